// corvid tokenize / corvid detokenize.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <sstream>

#include "corvid/cli/common.h"
#include "corvid/core/error.h"

namespace corvid::cli {

namespace {

struct TokenizeArgs {
  std::string model;
  std::string text;
  bool with_special = false;
  bool skip_special = false;
};

void run_tokenize(const TokenizeArgs& a) {
  auto tok = load_tokenizer(a.model);
  std::string text = a.text;
  if (text == "-") text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  std::vector<int32_t> ids = tok->encode(text, a.with_special);
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? ", " : "") + std::to_string(ids[i]);
  std::printf("%s]\n", out.c_str());
}

// Accepts "[1, 2, 3]", "1,2,3" or "1 2 3".
std::vector<int32_t> parse_ids(const std::string& s) {
  std::vector<int32_t> ids;
  std::string cleaned;
  for (char ch : s) cleaned += (ch == '[' || ch == ']' || ch == ',') ? ' ' : ch;
  std::istringstream in(cleaned);
  std::string word;
  while (in >> word) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    CORVID_CHECK(used == word.size() && v >= 0 && v <= INT32_MAX, "not a token id: '", word, "'");
    ids.push_back(static_cast<int32_t>(v));
  }
  return ids;
}

void run_detokenize(const TokenizeArgs& a) {
  auto tok = load_tokenizer(a.model);
  std::string text = a.text;
  if (text == "-") text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  std::vector<int32_t> ids = parse_ids(text);
  for (int32_t id : ids)
    CORVID_CHECK(id < tok->vocab_size(), "token id ", id, " is outside the vocabulary (", tok->vocab_size(), ")");
  std::string out = tok->decode(ids, a.skip_special);
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::printf("\n");
}

}  // namespace

void register_tokenize(CLI::App& app) {
  auto targs = std::make_shared<TokenizeArgs>();
  CLI::App* t = app.add_subcommand("tokenize", "Print the token ids of a text as JSON");
  t->add_option("-m,--model", targs->model, "GGUF file or Hugging Face folder with the tokenizer")->required();
  t->add_option("text", targs->text, "text to tokenize, or - to read stdin")->required();
  t->add_flag("--with-special", targs->with_special, "add the special tokens the model expects (BOS, …)");
  t->callback([targs] { run_tokenize(*targs); });

  auto dargs = std::make_shared<TokenizeArgs>();
  CLI::App* d = app.add_subcommand("detokenize", "Turn token ids back into text");
  d->add_option("-m,--model", dargs->model, "GGUF file or Hugging Face folder with the tokenizer")->required();
  d->add_option("ids", dargs->text, "ids as JSON ([1, 2]) or separated by spaces/commas, or - for stdin")->required();
  d->add_flag("--skip-special", dargs->skip_special, "leave out special tokens");
  d->callback([dargs] { run_detokenize(*dargs); });
}

}  // namespace corvid::cli
