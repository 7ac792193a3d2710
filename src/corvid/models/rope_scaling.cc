#include "corvid/models/rope_scaling.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "corvid/core/error.h"

namespace corvid {

namespace {

// base ** (2i / dim) in float32, as torch evaluates `base ** (arange(0, dim, 2).float() / dim)`.
std::vector<float> base_inv_freq(double theta, int dim) {
  std::vector<float> inv(static_cast<size_t>(dim / 2));
  for (int i = 0; i < dim / 2; ++i) {
    float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
    inv[static_cast<size_t>(i)] = 1.0f / std::pow(static_cast<float>(theta), exponent);
  }
  return inv;
}

void apply_llama3(std::vector<float>& inv, const RopeScaling& s) {
  const double old_ctx = static_cast<double>(s.original_max_position_embeddings);
  CORVID_CHECK(old_ctx > 0, "rope_scaling llama3: original_max_position_embeddings must be positive");
  const double low_wavelen = old_ctx / s.low_freq_factor;
  const double high_wavelen = old_ctx / s.high_freq_factor;
  for (float& f : inv) {
    const double wavelen = 2.0 * std::numbers::pi / f;
    if (wavelen > low_wavelen) {
      f = static_cast<float>(f / s.factor);  // long wavelengths: fully interpolated
    } else if (wavelen >= high_wavelen) {   // the band between: smooth blend
      const double smooth = (old_ctx / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      f = static_cast<float>((1.0 - smooth) * f / s.factor + smooth * f);
    }
  }
}

double yarn_mscale(double scale, double mscale) { return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0; }

float apply_yarn(std::vector<float>& inv, const RopeScaling& s, double theta, int dim, int64_t max_positions) {
  double factor = s.factor;
  double original = static_cast<double>(max_positions);
  if (s.original_max_position_embeddings > 0) {
    // transformers derives the factor from the two context lengths when both are given.
    original = static_cast<double>(s.original_max_position_embeddings);
    factor = static_cast<double>(max_positions) / original;
  }
  double attention_factor;
  if (s.attention_factor) {
    attention_factor = *s.attention_factor;
  } else if (s.mscale && s.mscale_all_dim && *s.mscale != 0.0 && *s.mscale_all_dim != 0.0) {
    attention_factor = yarn_mscale(factor, *s.mscale) / yarn_mscale(factor, *s.mscale_all_dim);
  } else {
    attention_factor = yarn_mscale(factor, 1.0);
  }
  auto correction_dim = [&](double rotations) {
    return (dim * std::log(original / (rotations * 2.0 * std::numbers::pi))) / (2.0 * std::log(theta));
  };
  double low = correction_dim(s.beta_fast), high = correction_dim(s.beta_slow);
  if (s.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;  // avoid a zero-width ramp
  for (size_t i = 0; i < inv.size(); ++i) {
    const float ramp = std::clamp(static_cast<float>((static_cast<double>(i) - low) / (high - low)), 0.0f, 1.0f);
    const float extrapolation_weight = 1.0f - ramp;
    const float extrapolated = inv[i];
    const float interpolated = static_cast<float>(inv[i] / factor);
    inv[i] = interpolated * (1.0f - extrapolation_weight) + extrapolated * extrapolation_weight;
  }
  return static_cast<float>(attention_factor);
}

// transformers' longrope: inv_freq = 1 / (ext * base ** (2i / dim)) in float32, with ext
// the long factors when the model's context exceeds the pretraining one (see the header),
// and cos/sin scaled by sqrt(1 + ln(factor) / ln(original)) unless the config gives it.
float apply_longrope(std::vector<float>& inv, const RopeScaling& s, double theta, int dim, int64_t max_positions) {
  const int64_t original = s.original_max_position_embeddings;
  CORVID_CHECK(original > 0, "rope_scaling longrope: original_max_position_embeddings must be positive");
  const bool use_long = max_positions > original;
  const std::vector<double>& ext = use_long ? s.long_factor : s.short_factor;
  CORVID_CHECK(static_cast<int>(ext.size()) == dim / 2, "rope_scaling longrope: ", ext.size(),
               " factors for a rotary dim of ", dim, " (need ", dim / 2, ")");
  for (int i = 0; i < dim / 2; ++i) {
    const float shape = static_cast<float>(2 * i) / static_cast<float>(dim);
    inv[static_cast<size_t>(i)] =
        1.0f / (static_cast<float>(ext[static_cast<size_t>(i)]) * std::pow(static_cast<float>(theta), shape));
  }
  if (s.attention_factor) return static_cast<float>(*s.attention_factor);
  const double factor = s.factor > 0 ? s.factor : static_cast<double>(max_positions) / static_cast<double>(original);
  if (factor <= 1.0) return 1.0f;
  return static_cast<float>(std::sqrt(1.0 + std::log(factor) / std::log(static_cast<double>(original))));
}

}  // namespace

ops::RopeParams make_rope_params(const ModelConfig& config) {
  return make_rope_params(config, config.rope_theta, config.rope_scaling);
}

ops::RopeParams identity_rope(int64_t head_dim) {
  ops::RopeParams params;
  params.rotary_dim = static_cast<int>(head_dim);
  params.inv_freq.assign(static_cast<size_t>(head_dim / 2), 0.0f);
  return params;
}

ops::RopeParams make_rope_params(const ModelConfig& config, double theta, const RopeScaling& s) {
  ops::RopeParams params;
  const int dim = static_cast<int>(config.rotary_dim > 0 ? config.rotary_dim : config.head_dim);
  CORVID_CHECK(dim > 0 && dim % 2 == 0 && dim <= config.head_dim, "rope: rotary dim ", dim,
               " must be even and at most head_dim ", config.head_dim);
  params.rotary_dim = dim;
  params.interleaved = config.rope_interleaved;
  params.inv_freq = base_inv_freq(theta, dim);
  switch (s.type) {
    case RopeScaling::Type::None:
      break;
    case RopeScaling::Type::Linear:
      for (float& f : params.inv_freq) f = static_cast<float>(f / s.factor);
      break;
    case RopeScaling::Type::Llama3:
      apply_llama3(params.inv_freq, s);
      break;
    case RopeScaling::Type::Yarn:
      params.attention_factor = apply_yarn(params.inv_freq, s, theta, dim, config.max_position_embeddings);
      break;
    case RopeScaling::Type::LongRope:
      params.attention_factor = apply_longrope(params.inv_freq, s, theta, dim, config.max_position_embeddings);
      break;
  }
  return params;
}

}  // namespace corvid
