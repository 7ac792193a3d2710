#include "corvid/kv/kv_format.h"

namespace corvid {

namespace {

struct NamedDType {
  const char* name;
  DType dtype;
};
constexpr NamedDType kPlain[] = {
    {"f32", DType::F32},      {"f16", DType::F16},      {"bf16", DType::BF16},   {"q8", DType::A8G64},
    {"q4", DType::A4G64},     {"q8_g32", DType::A8G32}, {"q4_g32", DType::A4G32}, {"fp8", DType::F8G64},
};
// TurboQuant's widths: 8 bits is affine int8 (in the rotated basis), 4 to 2 Lloyd-Max codes.
constexpr struct {
  int bits;
  DType dtype;
} kTurboWidths[] = {{8, DType::A8G64}, {4, DType::T4G64}, {3, DType::T3G64}, {2, DType::T2G64}};

std::optional<DType> turbo_width(char c) {
  for (const auto& w : kTurboWidths)
    if (c == '0' + w.bits) return w.dtype;
  return std::nullopt;
}

int turbo_bits(DType t) {
  for (const auto& w : kTurboWidths)
    if (t == w.dtype) return w.bits;
  return 0;
}

}  // namespace

int64_t KvFormat::bytes_per_position(int64_t elems) const {
  return static_cast<int64_t>(bytes_for(keys, elems) + bytes_for(values, elems));
}

std::optional<KvFormat> kv_format_from_name(const std::string& name) {
  for (const NamedDType& f : kPlain)
    if (name == f.name) return KvFormat(f.dtype);
  if (name.size() == 10 && name.compare(0, 7, "turbo:k") == 0 && name[8] == 'v') {
    const std::optional<DType> k = turbo_width(name[7]), v = turbo_width(name[9]);
    if (k && v) return KvFormat(*k, *v, true, true);
  }
  return std::nullopt;
}

const std::vector<std::string>& kv_format_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const NamedDType& f : kPlain) out.emplace_back(f.name);
    for (const auto& k : kTurboWidths)
      for (const auto& v : kTurboWidths) out.push_back("turbo:k" + std::to_string(k.bits) + "v" + std::to_string(v.bits));
    return out;
  }();
  return names;
}

std::string kv_format_name(const KvFormat& f) {
  if (f.rotate_values && f.rotate_keys && turbo_bits(f.keys) && turbo_bits(f.values))
    return "turbo:k" + std::to_string(turbo_bits(f.keys)) + "v" + std::to_string(turbo_bits(f.values));
  auto plain_name = [](DType t) {
    for (const NamedDType& p : kPlain)
      if (p.dtype == t) return std::string(p.name);
    return std::string(dtype_name(t));
  };
  std::string name = plain_name(f.keys);
  if (f.values != f.keys) name.append("/").append(plain_name(f.values));
  if (f.rotate_keys) name.append(" rotated");
  if (f.rotate_values) name.append(" (values rotated)");
  return name;
}

bool kv_format_coded(const KvFormat& f) {
  auto plain = [](DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; };
  return !plain(f.keys) || !plain(f.values);
}

KvFormat kv_head_format(const KvFormat& coded, DType plain) {
  return {plain, plain, coded.rotate_keys, coded.rotate_values};
}

}  // namespace corvid
