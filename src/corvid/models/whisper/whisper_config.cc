#include "corvid/models/whisper/whisper_config.h"

#include "corvid/core/error.h"
#include "corvid/formats/ctranslate2.h"
#include "corvid/models/config_fields.h"

namespace corvid {

void WhisperConfig::validate(const std::string& source) const {
  CORVID_CHECK(n_mels == 80 || n_mels == 128, source, ": ", n_mels, " mel bins (Whisper uses 80 or 128)");
  CORVID_CHECK(d_model > 0 && encoder_layers > 0 && decoder_layers > 0 && encoder_ffn > 0 && decoder_ffn > 0 &&
                   vocab_size > 0,
               source, ": a Whisper config needs positive widths and layer counts");
  CORVID_CHECK(encoder_heads > 0 && d_model % encoder_heads == 0 && decoder_heads > 0 && d_model % decoder_heads == 0,
               source, ": d_model ", d_model, " does not split into ", encoder_heads, " / ", decoder_heads, " heads");
  CORVID_CHECK(audio_positions == 1500, source, ": max_source_positions ", audio_positions,
               " (Whisper's 30-s windows give 1500)");
  CORVID_CHECK(text_positions > 0 && text_positions <= 4096, source, ": max_target_positions ", text_positions,
               " is out of range");
}

WhisperConfig whisper_config_from_hf(const nlohmann::json& j, const std::string& source) {
  auto need = [&](const char* key) {
    const auto v = config_fields::integer(j, key, source);
    CORVID_CHECK(v, source, ": config.json has no ", key);
    return *v;
  };
  WhisperConfig c;
  c.n_mels = config_fields::integer(j, "num_mel_bins", source).value_or(80);
  c.d_model = need("d_model");
  c.encoder_layers = need("encoder_layers");
  c.decoder_layers = need("decoder_layers");
  c.encoder_heads = need("encoder_attention_heads");
  c.decoder_heads = need("decoder_attention_heads");
  c.encoder_ffn = need("encoder_ffn_dim");
  c.decoder_ffn = need("decoder_ffn_dim");
  c.vocab_size = need("vocab_size");
  c.audio_positions = config_fields::integer(j, "max_source_positions", source).value_or(1500);
  c.text_positions = config_fields::integer(j, "max_target_positions", source).value_or(448);
  const nlohmann::json* act = config_fields::find(j, "activation_function");
  CORVID_CHECK(!act || (act->is_string() && act->get<std::string>() == "gelu"), source,
               ": activation_function must be gelu (Whisper's exact GELU)");
  CORVID_CHECK(!config_fields::boolean(j, "scale_embedding", false, source), source,
               ": scale_embedding is not supported (no Whisper checkpoint sets it)");
  c.validate(source);
  return c;
}

namespace {

int64_t count_layers(const Ct2File& f, const std::string& stack) {
  int64_t n = 0;
  while (f.find(stack + "/layer_" + std::to_string(n) + "/ffn/linear_0/weight")) ++n;
  return n;
}

const Ct2Variable& need(const Ct2File& f, const std::string& name, size_t rank) {
  const Ct2Variable* v = f.find(name);
  CORVID_CHECK(v, f.path(), ": missing variable ", name);
  CORVID_CHECK(v->shape.size() == rank, f.path(), ": variable ", name, " has rank ", v->shape.size(), ", expected ",
               rank);
  return *v;
}

}  // namespace

WhisperConfig whisper_config_from_ct2(const Ct2File& f) {
  CORVID_CHECK(f.spec() == "WhisperSpec", f.path(), ": a CTranslate2 ", f.spec(), ", not a Whisper model");
  // Flags the spec writes as scalars, checked where present. CTranslate2's
  // ActivationType 3 is the exact GELU.
  auto expect = [&](const std::string& name, int64_t want, const char* what) {
    if (f.find(name)) CORVID_CHECK(f.scalar(name) == want, f.path(), ": ", name, " is ", f.scalar(name), ": ", what);
  };
  for (const std::string stack : {"encoder", "decoder"}) {
    expect(stack + "/activation", 3, "Whisper's activation is the exact GELU");
    expect(stack + "/pre_norm", 1, "Whisper's blocks are pre-LN");
  }
  expect("decoder/scale_embeddings", 0, "scaled embeddings are not supported");
  WhisperConfig c;
  const Ct2Variable& conv1 = need(f, "encoder/conv1/weight", 3);
  c.d_model = conv1.shape[0];
  c.n_mels = conv1.shape[1];
  c.encoder_layers = count_layers(f, "encoder");
  c.decoder_layers = count_layers(f, "decoder");
  c.encoder_heads = f.scalar("encoder/num_heads");
  c.decoder_heads = f.scalar("decoder/num_heads");
  c.encoder_ffn = need(f, "encoder/layer_0/ffn/linear_0/weight", 2).shape[0];
  c.decoder_ffn = need(f, "decoder/layer_0/ffn/linear_0/weight", 2).shape[0];
  c.vocab_size = need(f, "decoder/embeddings/weight", 2).shape[0];
  c.audio_positions = need(f, "encoder/position_encodings/encodings", 2).shape[0];
  c.text_positions = need(f, "decoder/position_encodings/encodings", 2).shape[0];
  c.validate(f.path());
  return c;
}

}  // namespace corvid
