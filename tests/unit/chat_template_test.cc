// ChatTemplate against transformers: every template in tests/data/chat-templates on
// every conversation in tests/fixtures/templates/conversations.json, byte for byte
// (fixtures made by tests/oracle/make_template_fixtures.py), plus loading and options.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "corvid/chat/chat_template.h"
#include "fixture_util.h"

namespace corvid {
namespace {

namespace fs = std::filesystem;
using jinja::Json;

fs::path templates_dir() { return fixtures::source_dir() / "tests" / "data" / "chat-templates"; }
fs::path expected_dir() { return fixtures::fixtures_dir() / "templates"; }

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

Json read_ordered_json(const fs::path& p) { return Json::parse(read_file(p)); }

std::vector<std::string> template_names() {
  std::vector<std::string> names;
  if (!fs::exists(expected_dir())) return names;
  for (const auto& e : fs::directory_iterator(templates_dir()))
    if (e.path().extension() == ".jinja") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string fnv1a64(const std::string& s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

// Control characters and quotes escaped, so whitespace differences are visible.
std::string visible(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (c < 0x20) out += "\\x" + std::string(1, "0123456789abcdef"[c >> 4]) + "0123456789abcdef"[c & 15];
    else out += static_cast<char>(c);
  }
  return out;
}

// "first difference at byte N" with 40 bytes of context on each side of it.
std::string compact_diff(const std::string& expected, const std::string& actual) {
  size_t at = 0;
  while (at < expected.size() && at < actual.size() && expected[at] == actual[at]) ++at;
  const size_t from = at > 40 ? at - 40 : 0;
  std::ostringstream out;
  out << "first difference at byte " << at << " (expected " << expected.size() << " bytes, got " << actual.size()
      << ")\n      expected: \"" << visible(expected.substr(from, at - from)) << "⟦"
      << visible(expected.substr(at, 40)) << "\"\n      actual:   \"" << visible(actual.substr(from, at - from))
      << "⟦" << visible(actual.substr(at, 40)) << "\"";
  return out.str();
}

ChatRequest request_of(const Json& c, const std::tm& date) {
  ChatRequest r;
  r.messages = c.at("messages");
  if (c.contains("tools")) r.tools = c["tools"];
  r.add_generation_prompt = c.value("add_generation_prompt", true);
  const Json cont = c.value("continue_final_message", Json(false));
  if (cont.is_string()) r.continue_final_message = cont.get<std::string>();
  else if (cont.is_boolean() && cont.get<bool>()) r.continue_final_message = "content";
  if (c.contains("kwargs")) r.kwargs = c["kwargs"];
  r.now = date;
  return r;
}

// One case against its expected result; "" when they agree.
std::string check_case(const ChatTemplate& tmpl, const Json& c, const Json& expected, const std::tm& date) {
  std::string got;
  try {
    got = tmpl.render(request_of(c, date));
  } catch (const jinja::RaisedException& e) {
    if (expected.contains("error") && expected["error"]["kind"] == "raise" && expected["error"]["message"] == e.what())
      return "";
    return std::string("raise_exception(\"") + e.what() + "\") but expected " + expected.dump().substr(0, 300);
  } catch (const jinja::TemplateError& e) {
    if (expected.contains("error") && expected["error"]["kind"] == "runtime") return "";
    return std::string("template error \"") + e.what() + "\" but expected " + expected.dump().substr(0, 300);
  } catch (const Error& e) {
    if (expected.contains("error") && expected["error"]["kind"] == "caller" && expected["error"]["message"] == e.what())
      return "";
    return std::string("error \"") + visible(e.what()).substr(0, 300) + "\" but expected " + expected.dump().substr(0, 300);
  }
  if (expected.contains("error"))
    return "rendered " + std::to_string(got.size()) + " bytes but expected " + expected["error"].dump();
  if (expected.contains("text")) {
    const std::string want = expected["text"].get<std::string>();
    return got == want ? "" : compact_diff(want, got);
  }
  const std::string hash = fnv1a64(got);
  if (got.size() == expected["length"].get<size_t>() && hash == expected["fnv1a64"].get<std::string>()) return "";
  const std::string head = expected["head"].get<std::string>();
  return "long output differs (expected " + expected["length"].dump() + " bytes fnv1a64 " +
         expected["fnv1a64"].get<std::string>() + ", got " + std::to_string(got.size()) + " bytes " + hash + "); " +
         compact_diff(head, got.substr(0, std::min(got.size(), head.size() + 40)));
}

class ChatTemplateFixtures : public ::testing::TestWithParam<std::string> {};

TEST_P(ChatTemplateFixtures, RendersLikeTransformers) {
  const std::string name = GetParam();
  const Json conversations = read_ordered_json(expected_dir() / "conversations.json");
  const Json fixture = read_ordered_json(expected_dir() / (name + ".json"));
  const std::tm date = ChatTemplate::parse_date(conversations["pinned_date"].get<std::string>());
  const std::string source = read_file(templates_dir() / (name + ".jinja"));

  std::unique_ptr<ChatTemplate> tmpl;
  try {
    tmpl = std::make_unique<ChatTemplate>(source, fixture["special_tokens"]);
  } catch (const Error& e) {
    FAIL() << name << ": " << e.what();
  }
  int failures = 0, total = 0;
  std::ostringstream report;
  for (const Json& c : conversations["cases"]) {
    const std::string case_name = c["name"].get<std::string>();
    ASSERT_TRUE(fixture["results"].contains(case_name)) << "fixture lacks case " << case_name << " (regenerate)";
    ++total;
    std::string problem = check_case(*tmpl, c, fixture["results"][case_name], date);
    if (problem.empty()) continue;
    if (++failures <= 8) report << "  [" << case_name << "] " << problem << "\n";
  }
  EXPECT_EQ(failures, 0) << name << ": " << failures << " of " << total << " conversations differ\n"
                         << report.str() << (failures > 8 ? "  ...\n" : "");
}

std::string param_name(const ::testing::TestParamInfo<std::string>& info) { return fixtures::test_name(info.param); }

INSTANTIATE_TEST_SUITE_P(ChatTemplate, ChatTemplateFixtures, ::testing::ValuesIn(template_names()), param_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ChatTemplateFixtures);

TEST(ChatTemplateSuite, CoversEveryTemplateAndEnoughConversations) {
  ASSERT_TRUE(fs::exists(expected_dir() / "conversations.json"));
  const Json conversations = read_ordered_json(expected_dir() / "conversations.json");
  EXPECT_GE(conversations["cases"].size(), 60u);
  const auto names = template_names();
  EXPECT_GE(names.size(), 59u);
  for (const std::string& n : names) EXPECT_TRUE(fs::exists(expected_dir() / (n + ".json"))) << n;
}

TEST(ChatTemplateDate, ParsesAndRejects) {
  const std::tm t = ChatTemplate::parse_date("2026-11-30");
  EXPECT_EQ(t.tm_year, 126);
  EXPECT_EQ(t.tm_mon, 10);
  EXPECT_EQ(t.tm_mday, 30);
  EXPECT_EQ(t.tm_wday, 1);  // a Monday
  EXPECT_EQ(t.tm_yday, 333);
  EXPECT_EQ(t.tm_hour, 0);
  for (const char* bad : {"2026-13-01", "2026-02-30", "30-11-2026", "2026-11-30x", ""})
    EXPECT_THROW(ChatTemplate::parse_date(bad), Error) << bad;
}

// A temporary folder, removed at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("corvid_chat_template_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                                        "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  void write(const std::string& name, const std::string& text) const {
    fs::create_directories((path / name).parent_path());
    std::ofstream(path / name, std::ios::binary) << text;
  }
};

TEST(ChatTemplateRender, KwargsOverrideSpecialTokensAndDocumentsArePassed) {
  const ChatTemplate t("{{ bos_token }}|{{ eos_token }}|{{ documents | length if documents else 'none' }}|"
                       "{{ tools is none }}|{{ messages | length }}|{{ add_generation_prompt }}",
                       Json::parse(R"({"bos_token": "<s>", "eos_token": "</s>"})"));
  ChatRequest r;
  r.messages = Json::parse(R"([{"role": "user", "content": "hi", "name": null}])");
  EXPECT_EQ(t.render(r), "<s>|</s>|none|True|1|False");
  r.kwargs = Json::parse(R"({"eos_token": "<end>", "documents": [{"title": "a", "text": "b"}]})");
  r.add_generation_prompt = true;
  EXPECT_EQ(t.render(r), "<s>|<end>|1|True|1|True");
  r.kwargs = Json::parse(R"({"messages": []})");
  EXPECT_THROW(t.render(r), Error);
  r.kwargs = Json::parse(R"({"documents": ["not a dict"]})");
  EXPECT_THROW(t.render(r), Error);
}

TEST(ChatTemplateRender, NoneValuedKeysAreDroppedAndReasoningAliased) {
  const ChatTemplate t("{% for m in messages %}{{ m | tojson }};{% endfor %}", Json::object());
  ChatRequest r;
  r.messages = Json::parse(R"([{"role": "assistant", "content": null, "reasoning": "why"},
                               {"role": "assistant", "thinking": "t", "content": "c", "reasoning_content": "rc"}])");
  EXPECT_EQ(t.render(r),
            R"({"thinking": "why", "role": "assistant", "reasoning": "why", "reasoning_content": "why"};)"
            R"({"thinking": "t", "role": "assistant", "content": "c", "reasoning_content": "rc"};)");
}

TEST(ChatTemplateRender, PinnedDatesArePerRenderAndPerThread) {
  const ChatTemplate t("{{ strftime_now('%Y-%m-%d %A') }}", Json::object());
  const std::vector<std::string> dates = {"2024-02-29", "2026-11-30", "1999-12-31", "2030-01-01"};
  std::vector<std::string> want;
  for (const auto& d : dates) {
    std::tm tm = ChatTemplate::parse_date(d);
    char buf[64];
    std::strftime(buf, sizeof buf, "%Y-%m-%d %A", &tm);
    want.emplace_back(buf);
  }
  std::vector<int> wrong(dates.size(), 0);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < dates.size(); ++i)
    threads.emplace_back([&, i] {
      ChatRequest r;
      r.messages = Json::parse(R"([{"role": "user", "content": "x"}])");
      r.now = ChatTemplate::parse_date(dates[i]);
      for (int k = 0; k < 200; ++k)
        if (t.render(r) != want[i]) ++wrong[i];
    });
  for (auto& th : threads) th.join();
  for (size_t i = 0; i < dates.size(); ++i) EXPECT_EQ(wrong[i], 0) << dates[i];
  EXPECT_EQ(want[0], "2024-02-29 Thursday");
}

TEST(ChatTemplateRender, ContinueFinalMessageTrimsAsTransformers) {
  ChatRequest r;
  r.messages = Json::parse(R"([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Once upon "}])");
  r.continue_final_message = "content";
  // The template keeps the text whole: cut right before the tag, trailing space kept.
  EXPECT_EQ(ChatTemplate("{% for m in messages %}[{{ m.content }}]{% endfor %}", Json::object()).render(r),
            "[Hi][Once upon ");
  // The template trims the text: the tag loses its space, so the cut is rstripped.
  EXPECT_EQ(ChatTemplate("{% for m in messages %}[{{ m.content | trim }}]{% endfor %}", Json::object()).render(r),
            "[Hi][Once upon");
  // The template drops the text: transformers' error.
  try {
    ChatTemplate("{% for m in messages %}[{{ m.role }}]{% endfor %}{{ 'content' if false }}", Json::object()).render(r);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not appear in the chat after applying the chat template"),
              std::string::npos) << e.what();
  }
}

TEST(ChatTemplateLoading, PicksNamedTemplatesAsTransformers) {
  TempDir dir;
  dir.write("tokenizer_config.json", R"({"bos_token": {"content": "<s>", "lstrip": false}, "eos_token": "</s>",
    "chat_template": [{"name": "default", "template": "D"}, {"name": "tool_use", "template": "T"}]})");
  const ChatTemplate t = ChatTemplate::from_model(dir.path.string());
  EXPECT_EQ(t.special_tokens(), Json::parse(R"({"bos_token": "<s>", "eos_token": "</s>"})"));
  ChatRequest r;
  EXPECT_EQ(t.source(r), "D");
  r.tools = Json::array();  // tools given, even empty: transformers picks tool_use
  EXPECT_EQ(t.source(r), "T");
  r.template_name = "default";
  EXPECT_EQ(t.source(r), "D");
  r.template_name = "nope";
  EXPECT_THROW(t.source(r), Error);
}

TEST(ChatTemplateLoading, JinjaFilesWinOverTheConfig) {
  TempDir dir;
  dir.write("tokenizer_config.json", R"({"chat_template": "from config", "eos_token": "<e>"})");
  dir.write("special_tokens_map.json", R"({"bos_token": "<b>", "eos_token": "<ignored>"})");
  dir.write("chat_template.jinja", "from file");
  const ChatTemplate t = ChatTemplate::from_model(dir.path.string());
  EXPECT_EQ(t.source(ChatRequest{}), "from file");
  EXPECT_EQ(t.special_tokens(), Json::parse(R"({"bos_token": "<b>", "eos_token": "<e>"})"));

  dir.write("additional_chat_templates/tool_use.jinja", "tools file");
  const ChatTemplate named = ChatTemplate::from_model(dir.path.string());
  ChatRequest with_tools;
  with_tools.tools = Json::array({Json::object()});
  EXPECT_EQ(named.source(with_tools), "tools file");
  EXPECT_EQ(named.source(ChatRequest{}), "from file");
}

TEST(ChatTemplateLoading, NoDefaultIsTransformersError) {
  const ChatTemplate t(std::map<std::string, std::string>{{"a", "A"}, {"b", "B"}}, Json::object());
  try {
    t.source(ChatRequest{});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Available template names are ['a', 'b']."), std::string::npos) << e.what();
  }
}

TEST(ChatTemplateLoading, MissingTemplateIsAnError) {
  TempDir dir;
  dir.write("tokenizer_config.json", R"({"eos_token": "</s>"})");
  EXPECT_THROW(ChatTemplate::from_model(dir.path.string()), Error);
  EXPECT_THROW(ChatTemplate::from_model((dir.path / "missing.gguf").string()), Error);
}

TEST(ChatTemplateLoading, SmolLM2GgufTemplateAndTokens) {
  const fs::path gguf = fixtures::source_dir() / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!fs::exists(gguf)) GTEST_SKIP() << "SmolLM2 not fetched";
  const ChatTemplate t = ChatTemplate::from_model(gguf.string());
  EXPECT_EQ(t.source(ChatRequest{}), read_file(templates_dir() / "SmolLM2-135M-Instruct.jinja"));
  EXPECT_EQ(t.special_tokens(), Json::parse(R"({"bos_token": "<|im_start|>", "eos_token": "<|im_end|>",
    "unk_token": "<|endoftext|>", "pad_token": "<|im_end|>"})"));
}

}  // namespace
}  // namespace corvid
