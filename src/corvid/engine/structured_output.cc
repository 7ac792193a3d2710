#include "corvid/engine/structured_output.h"

#include <algorithm>
#include <exception>
#include <thread>

#include <xgrammar/xgrammar.h>

#include "corvid/core/error.h"

namespace corvid {

class CompiledFormat {
 public:
  xgrammar::CompiledGrammar grammar;
};

namespace {

xgrammar::VocabType vocab_type(Tokenizer::VocabSpelling::Kind kind) {
  switch (kind) {
    case Tokenizer::VocabSpelling::Kind::ByteLevel:
      return xgrammar::VocabType::BYTE_LEVEL;
    case Tokenizer::VocabSpelling::Kind::ByteFallback:
      return xgrammar::VocabType::BYTE_FALLBACK;
    default:
      return xgrammar::VocabType::RAW;
  }
}

// The vocabulary as XGrammar reads it: each token's stored string, "" for a special
// token (XGrammar never lets a format produce an empty-string token) and for ids the
// tokenizer does not have. Stop tokens come per sequence (FormatMatcher), so none are
// named here.
xgrammar::TokenizerInfo tokenizer_info(const Tokenizer& tokenizer, int64_t vocab_size) {
  const int64_t n = std::min<int64_t>(tokenizer.vocab_size(), vocab_size);
  std::vector<std::string> vocab(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int32_t id = static_cast<int32_t>(i);
    if (!tokenizer.is_special(id)) vocab[static_cast<size_t>(i)] = tokenizer.id_to_token(id);
  }
  const Tokenizer::VocabSpelling spelling = tokenizer.vocab_spelling();
  return xgrammar::TokenizerInfo(vocab, vocab_type(spelling.kind), static_cast<int>(vocab_size),
                                 std::vector<int32_t>{}, spelling.prefix_space);
}

// Host int32 bitmask words as the DLTensor XGrammar fills (`shape` outlives it).
DLTensor bitmask_tensor(int32_t* data, int64_t* shape, int ndim) {
  DLTensor t{};
  t.data = data;
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = ndim;
  t.dtype = xgrammar::GetBitmaskDLType();
  t.shape = shape;
  t.strides = nullptr;
  t.byte_offset = 0;
  return t;
}

// The longest run of whitespace a JSON format allows between tokens (pretty-printing
// nests about ten levels deep within it).
constexpr int kMaxWhitespaceRun = 20;

}  // namespace

std::string OutputFormat::describe() const {
  switch (kind) {
    case Kind::Json:
      return object_only ? "json_object" : "json";
    case Kind::JsonSchema:
      return "json_schema";
    case Kind::Regex:
      return "regex";
    case Kind::Grammar:
      return "grammar";
  }
  return "format";
}

struct FormatCompiler::Impl {
  xgrammar::TokenizerInfo info;
  xgrammar::GrammarCompiler compiler;
  Impl(const Tokenizer& tokenizer, int64_t vocab_size)
      : info(tokenizer_info(tokenizer, vocab_size)),
        // Compiling uses up to 4 threads; compiled formats are cached up to 256 MiB.
        compiler(info, std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, 4), true,
                 int64_t{256} << 20) {}
};

FormatCompiler::FormatCompiler(const Tokenizer& tokenizer, int64_t vocab_size)
    : impl_(std::make_unique<Impl>(tokenizer, vocab_size)), vocab_size_(vocab_size) {}

FormatCompiler::~FormatCompiler() = default;

std::shared_ptr<const CompiledFormat> FormatCompiler::compile(const OutputFormat& format) const {
  try {
    switch (format.kind) {
      case OutputFormat::Kind::Json:
      case OutputFormat::Kind::JsonSchema: {
        // Any JSON is the schema {} (an object: {"type": "object"}). Whitespace runs are
        // bounded: a model may otherwise pad with blanks until max_tokens.
        const std::string schema = format.kind == OutputFormat::Kind::JsonSchema ? format.spec
                                   : format.object_only                          ? R"({"type": "object"})"
                                                                                 : "{}";
        return std::make_shared<CompiledFormat>(CompiledFormat{impl_->compiler.CompileJSONSchema(
            schema, format.any_whitespace, std::nullopt, std::nullopt, /*strict_mode=*/true, kMaxWhitespaceRun)});
      }
      case OutputFormat::Kind::Regex:
        return std::make_shared<CompiledFormat>(CompiledFormat{impl_->compiler.CompileRegex(format.spec)});
      case OutputFormat::Kind::Grammar:
        return std::make_shared<CompiledFormat>(CompiledFormat{impl_->compiler.CompileGrammar(format.spec, "root")});
    }
  } catch (const std::exception& e) {
    fail("the ", format.describe(), " cannot be compiled: ", e.what());
  }
  fail("unknown output format");
}

struct FormatMatcher::Impl {
  xgrammar::GrammarMatcher matcher;
  // Without stop tokens (ignore_eos) the format ends the sequence once it is complete.
  Impl(const CompiledFormat& format, std::span<const int32_t> stop_ids)
      : matcher(format.grammar,
                stop_ids.empty() ? std::nullopt : std::optional<std::vector<int>>(std::in_place, stop_ids.begin(), stop_ids.end()),
                /*terminate_without_stop_token=*/stop_ids.empty()) {}
};

FormatMatcher::FormatMatcher(std::shared_ptr<const CompiledFormat> format, std::span<const int32_t> stop_ids) {
  CORVID_CHECK(format, "FormatMatcher: no format");
  impl_ = std::make_unique<Impl>(*format, stop_ids);
}

FormatMatcher::~FormatMatcher() = default;
FormatMatcher::FormatMatcher(FormatMatcher&&) noexcept = default;
FormatMatcher& FormatMatcher::operator=(FormatMatcher&&) noexcept = default;

int64_t FormatMatcher::mask_words(int64_t vocab_size) { return xgrammar::GetBitmaskSize(static_cast<int>(vocab_size)); }

bool FormatMatcher::fill_mask(std::span<int32_t> mask) {
  int64_t shape[1] = {static_cast<int64_t>(mask.size())};
  DLTensor t = bitmask_tensor(mask.data(), shape, 1);
  return impl_->matcher.FillNextTokenBitmask(&t);
}

bool FormatMatcher::accept(int32_t token) { return impl_->matcher.AcceptToken(token); }
bool FormatMatcher::complete() const { return impl_->matcher.IsCompleted(); }
bool FormatMatcher::terminated() const { return impl_->matcher.IsTerminated(); }

struct MaskFiller::Impl {
  xgrammar::BatchGrammarMatcher batch;
  std::vector<xgrammar::GrammarMatcher> matchers;  // handles sharing the sequences' states
  explicit Impl(int threads) : batch(static_cast<int32_t>(threads)) {}
};

MaskFiller::MaskFiller(int threads)
    : impl_(std::make_unique<Impl>(std::clamp(threads, 1, std::max(1, static_cast<int>(std::thread::hardware_concurrency()))))) {}
MaskFiller::~MaskFiller() = default;

void MaskFiller::fill(std::span<FormatMatcher* const> matchers, std::span<int32_t> masks, int64_t words) {
  CORVID_CHECK(static_cast<int64_t>(masks.size()) == static_cast<int64_t>(matchers.size()) * words,
               "MaskFiller: ", masks.size(), " words for ", matchers.size(), " masks of ", words);
  if (matchers.empty()) return;
  impl_->matchers.clear();
  for (FormatMatcher* m : matchers) impl_->matchers.push_back(m->impl_->matcher);
  int64_t shape[2] = {static_cast<int64_t>(matchers.size()), words};
  DLTensor t = bitmask_tensor(masks.data(), shape, 2);
  impl_->batch.BatchFillNextTokenBitmask(&impl_->matchers, &t);
  impl_->matchers.clear();
}

}  // namespace corvid
