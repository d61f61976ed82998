// Tools through ChatFormat (engine/tokenizer/chat_tools.cpp) on the real
// templates of tests/template/fixtures: what the probe finds per template
// (a hand-written table, from reading each template), and that a request in
// the form OpenAI clients send it (arguments as a JSON string, content null)
// renders byte for byte as Python's Jinja2 renders the form that template
// needs (expected.json, written by scripts/template/render_reference.py from
// the tools_* conversations: every combination of object/string arguments
// and ""/null content).
#include <catch2/catch.hpp>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/tokenizer/chat_format.h"
#include "tests/support/chat_fixture_format.h"

namespace larder {
namespace {

using Json = nlohmann::ordered_json;

std::filesystem::path fixture_dir() {
  return std::filesystem::path(__FILE__).parent_path().parent_path() / "template" / "fixtures";
}

Json read_json(const std::string& name) {
  std::ifstream f(fixture_dir() / name, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return Json::parse(ss.str());
}

// A fixture conversation as the API layer hands it to the engine.
ChatRequest to_request(const Json& conv, bool with_tools) {
  ChatRequest r;
  for (const Json& m : conv["messages"]) {
    ChatMessage msg(m["role"].get<std::string>(), "");
    if (m["content"].is_null()) {
      msg.content_null = true;
    } else {
      msg.content = m["content"].get<std::string>();
    }
    if (m.contains("tool_calls")) {
      for (const Json& c : m["tool_calls"]) {
        const Json& args = c["function"]["arguments"];
        msg.tool_calls.push_back({c["id"].get<std::string>(), c["function"]["name"].get<std::string>(),
                                  args.is_string() ? args.get<std::string>() : args.dump()});
      }
    }
    if (m.contains("tool_call_id")) msg.tool_call_id = m["tool_call_id"].get<std::string>();
    r.messages.push_back(std::move(msg));
  }
  if (with_tools && conv.contains("tools")) r.tools_json = conv["tools"].dump();
  return r;
}

struct Expect {
  ToolCallSyntax syntax;
  bool object_arguments;
  bool non_null_content;
};

// From reading the templates: which print `arguments | tojson` (need an
// object), which fail on or print a null content, which mention tools.
const std::map<std::string, Expect> kExpect = {
    {"llama3_1", {ToolCallSyntax::kNone, false, true}},    // short form: content only, prints None
    {"llama3_2", {ToolCallSyntax::kLlama3Json, true, false}},
    {"qwen2_5", {ToolCallSyntax::kHermes, true, false}},
    {"qwen3", {ToolCallSyntax::kHermes, false, true}},     // `arguments is string`; '</think>' in content
    {"mistral_nemo", {ToolCallSyntax::kMistral, true, false}},
    {"gemma2", {ToolCallSyntax::kNone, false, false}},     // raises on a system role / a tool role
    {"gemma3", {ToolCallSyntax::kNone, false, false}},
    {"phi3_5", {ToolCallSyntax::kNone, false, true}},      // '...' + content
    {"phi4", {ToolCallSyntax::kNone, false, true}},
    {"smollm2", {ToolCallSyntax::kNone, false, true}},
    {"deepseek_r1_distill_qwen", {ToolCallSyntax::kNone, false, false}},  // tool calls only when content is None
    {"deepseek_v3", {ToolCallSyntax::kNone, false, false}},
};

}  // namespace

TEST_CASE("tools on real templates: probe results and renderings equal Jinja2's", "[chat][tools]") {
  const Json specs = read_json("templates.json");
  const Json convs = read_json("conversations.json");
  const Json expected = read_json("expected.json");
  std::map<std::string, Json> conv_by_name;
  for (const Json& c : convs) conv_by_name[c["name"].get<std::string>()] = c;
  auto expected_case = [&](const std::string& tmpl, const std::string& conv) -> const Json& {
    for (const Json& c : expected["cases"]) {
      if (c["template"] == tmpl && c["conversation"] == conv && c["add_generation_prompt"] == true) return c;
    }
    FAIL("no expected case " << tmpl << " / " << conv);
    static Json none;
    return none;
  };

  int n_compared = 0;
  for (const Json& spec : specs) {
    const std::string name = spec["name"];
    INFO(name);
    const ChatFormat f = testing::fixture_chat_format(name);
    const Expect& e = kExpect.at(name);
    CHECK(f.tool_call_syntax() == e.syntax);
    CHECK(f.requires_object_arguments() == e.object_arguments);
    CHECK(f.requires_non_null_content() == e.non_null_content);

    const std::string variant = std::string(e.object_arguments ? "object" : "string") + "_" +
                                (e.non_null_content ? "empty" : "null");
    for (const std::string family : {"tools_first_turn", "tools_history", "tools_single"}) {
      const std::string client_form = family == "tools_first_turn" ? family : family + "_string_null";
      const std::string needed_form = family == "tools_first_turn" ? family : family + "_" + variant;
      INFO(family << ": the client's form " << client_form << " must render as " << needed_form);
      const bool offer_tools = e.syntax != ToolCallSyntax::kNone;
      ChatRequest request = to_request(conv_by_name.at(client_form), offer_tools);
      if (!offer_tools) {
        // Tools are refused; without them the template (which ignores them)
        // renders as Jinja2 did with them.
        ChatRequest with = to_request(conv_by_name.at(client_form), true);
        auto refused = f.render_request(with);
        REQUIRE_FALSE(refused.is_ok());
        CHECK(refused.status().code() == StatusCode::kUnsupported);
      }
      auto out = f.render_request(request);
      const Json& want = expected_case(name, needed_form);
      if (want.contains("output")) {
        INFO(out.status().to_string());
        REQUIRE(out.is_ok());
        CHECK(*out == want["output"].get<std::string>());
        ++n_compared;
      } else {
        CHECK_FALSE(out.is_ok());  // e.g. Llama 3.2: "only supports single tool-calls at once"
      }
    }
  }
  CHECK(n_compared >= 25);
}

TEST_CASE("fixed formats refuse tools and tool calls", "[chat][tools]") {
  for (auto kind : {ChatFormatKind::kPlain, ChatFormatKind::kChatML, ChatFormatKind::kLlama3}) {
    const ChatFormat f = ChatFormat::of_kind(kind);
    INFO(f.name());
    CHECK(f.tool_call_syntax() == ToolCallSyntax::kNone);
    ChatRequest r;
    r.messages = {{"user", "Hi"}};
    r.tools_json = R"([{"type": "function", "function": {"name": "f"}}])";
    auto with_tools = f.render_request(r);
    REQUIRE_FALSE(with_tools.is_ok());
    CHECK(with_tools.status().code() == StatusCode::kUnsupported);
    r.tools_json.clear();
    ChatMessage call("assistant", "");
    call.tool_calls.push_back({"c1", "f", "{}"});
    r.messages.push_back(call);
    auto with_call = f.render_request(r);
    REQUIRE_FALSE(with_call.is_ok());
    CHECK(with_call.status().code() == StatusCode::kInvalidArgument);
  }
}

}  // namespace larder
