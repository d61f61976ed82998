// The generic tool prompt (api/generic_tools.h) on real chat formats:
// stories260K's plain format and Gemma 2's template (which never mentions
// tools and refuses a system message), through a real Engine. The expected
// renderings are written out by hand from the plain format's rules
// (engine/tokenizer/chat_format.h) and the Gemma 2 template.
#include <thread>

#include <catch2/catch.hpp>

#include "api/generic_tools.h"
#include "api/http_server.h"
#include "tests/api/test_client.h"
#include "tests/engine/engine_test_util.h"
#include "tests/support/chat_models.h"
#include "tests/support/gguf_writer.h"
#include "tests/support/test_models.h"

using namespace larder;
using namespace larder::testing;

namespace {

const char* kTools = R"([{"type":"function","function":{"name":"get_time","parameters":{"type":"object"}}}])";

// What the system message says for kTools (parallel calls allowed).
const std::string kPrompt =
    "Respond in JSON format, either with `tool_call` (a request to call tools) or with `response` reply to the "
    "user's request.\n\nYou can call any of the following tools to satisfy the user's requests: [\n  {\n    "
    "\"type\": \"function\",\n    \"function\": {\n      \"name\": \"get_time\",\n      \"parameters\": {\n        "
    "\"type\": \"object\"\n      }\n    }\n  }\n]\n\nExample tool call syntax:\n\n"
    R"({"tool_calls": [{"name": "tool_name", "arguments": {"arg1": "some_value"}, "id": "call_1"}]})"
    "\n\nExample reply:\n\n"
    R"({"response": "Your reply to the user."})";

ChatRequest time_request() {
  ChatRequest r;
  r.messages = {{"user", "What time is it?"}};
  r.tools_json = kTools;
  return r;
}

// stories260K's weights with Gemma 2's real chat template (no tools, no
// system role), written into dir.
std::string stories_with_gemma2_template(const std::string& stories, const TempDir& dir) {
  Result<std::string> tmpl = chat_template_fixture("gemma2");
  REQUIRE(tmpl.is_ok());
  const std::string model = dir.str() + "/stories260K-gemma2.gguf";
  REQUIRE(copy_gguf_with_chat_template(stories, model, *tmpl).is_ok());
  return model;
}

}  // namespace

TEST_CASE("generic tools: the plain format of stories260K shows the tools", "[api][tools]") {
  LARDER_REQUIRE_MODEL(stories, "stories260K.gguf");
  auto engine = make_engine(options_for(stories, ""));
  REQUIRE(engine->tool_call_syntax() == ToolCallSyntax::kNone);
  ChatRequest chat = time_request();
  ChatPromptInfo info;
  Result<std::vector<int32_t>> ids = chat_prompt_with_tools(*engine, true, &chat, &info);
  INFO(ids.status().to_string());
  REQUIRE(ids.is_ok());
  const std::string rendered = kPrompt + "\n\nUser: What time is it?\nAssistant:";
  CHECK(engine->render_chat(chat).value() == rendered);
  CHECK(*ids == engine->tokenize(rendered, false));

  // A whole tool round: the call and both results (one user turn) as JSON.
  ChatRequest round = time_request();
  ChatMessage call{"assistant", ""};
  call.content_null = true;
  call.tool_calls = {{"call_a", "get_time", R"({"tz":"UTC"})"}, {"call_b", "get_time", R"({"tz":"CET"})"}};
  ChatMessage a{"tool", "12:00"}, b{"tool", "13:00"};
  a.tool_call_id = "call_a";
  b.tool_call_id = "call_b";
  round.messages.insert(round.messages.end(), {call, a, b});
  REQUIRE(chat_prompt_with_tools(*engine, true, &round, &info).is_ok());
  CHECK(engine->render_chat(round).value() ==
        kPrompt + "\n\nUser: What time is it?\nAssistant:"
                  R"({"tool_calls": [{"name": "get_time", "arguments": {"tz": "UTC"}, "id": "call_a"}, )"
                  R"({"name": "get_time", "arguments": {"tz": "CET"}, "id": "call_b"}]})"
                  "\nUser: "
                  R"({"tool_response": {"tool_call_id": "call_a", "content": "12:00"}})"
                  "\n"
                  R"({"tool_response": {"tool_call_id": "call_b", "content": "13:00"}})"
                  "\nAssistant:");
}

TEST_CASE("generic tools: a template without a system role gets them in the first user turn", "[api][tools]") {
  LARDER_REQUIRE_MODEL(stories, "stories260K.gguf");
  TempDir dir("generic-tools");
  const std::string model = stories_with_gemma2_template(stories, dir);
  auto engine = make_engine(options_for(model, ""));
  REQUIRE(engine->tool_call_syntax() == ToolCallSyntax::kNone);
  ChatRequest chat = time_request();
  chat.messages.insert(chat.messages.begin(), ChatMessage{"system", "Be brief."});
  ChatPromptInfo info;
  Result<std::vector<int32_t>> ids = chat_prompt_with_tools(*engine, false, &chat, &info);
  INFO(ids.status().to_string());
  REQUIRE(ids.is_ok());
  REQUIRE(chat.messages.size() == 1);
  const std::string prompt = kPrompt.substr(0, kPrompt.find("Example tool call syntax:")) +
                             "Example tool call syntax:\n\n" +
                             R"({"tool_call": {"name": "tool_name", "arguments": {"arg1": "some_value"}}})" +
                             "\n\nExample reply:\n\n" + R"({"response": "Your reply to the user."})";
  // Gemma 2: "<bos>" (stories260K's BOS text is "<s>"), the user turn, the model's prompt.
  CHECK(engine->render_chat(chat).value() == "<s><start_of_turn>user\nBe brief.\n\n" + prompt +
                                                 "\n\nWhat time is it?<end_of_turn>\n<start_of_turn>model\n");
  // Without tools the same request is the template's own 400.
  ChatRequest plain;
  plain.messages = {{"system", "Be brief."}, {"user", "Hi"}};
  CHECK(chat_prompt_with_tools(*engine, false, &plain, &info).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("generic tools: /apply-template folds them into the first user turn as chat requests do", "[api][tools]") {
  LARDER_REQUIRE_MODEL(stories, "stories260K.gguf");
  TempDir dir("generic-tools-http");
  const std::string model = stories_with_gemma2_template(stories, dir);
  auto engine = make_engine(options_for(model, ""));
  ServerOptions so;
  so.port = 0;
  auto server = HttpServer::create(so, *engine);
  REQUIRE(server.is_ok());
  std::thread loop([&] { (*server)->run(); });
  const std::string body = std::string(R"({"messages":[{"role":"user","content":"What time is it?"}],"tools":)") +
                           kTools + R"(,"parallel_tool_calls":true})";
  auto r = http((*server)->port(), "POST", "/apply-template", body);
  (*server)->request_stop();
  loop.join();
  REQUIRE(r);
  INFO(r->body);
  CHECK(r->status == 200);  // was the template's "System role not supported" 400
  CHECK(r->json()["prompt"] == "<s><start_of_turn>user\n" + kPrompt + "\n\nWhat time is it?<end_of_turn>\n<start_of_turn>model\n");
}

TEST_CASE("generic tools: a last assistant message with tool calls is a finished turn, not a prefill",
          "[api][tools]") {
  // README: prefill continues only an assistant message without tool calls.
  // The template-native path renders such a turn closed, then the
  // generation prompt; the generic rewrite must do the same although the
  // calls become plain content.
  LARDER_REQUIRE_MODEL(stories, "stories260K.gguf");
  auto engine = make_engine(options_for(stories, ""));
  ChatRequest chat = time_request();
  ChatMessage call{"assistant", ""};
  call.content_null = true;
  call.tool_calls = {{"call_a", "get_time", R"({"tz":"UTC"})"}};
  chat.messages.push_back(call);
  ChatPromptInfo info;
  Result<std::vector<int32_t>> ids = chat_prompt_with_tools(*engine, true, &chat, &info);
  INFO(ids.status().to_string());
  REQUIRE(ids.is_ok());
  // Plain format: the call's turn ends with "\n", then "Assistant:" opens the answer.
  const std::string rendered = kPrompt + "\n\nUser: What time is it?\nAssistant:" +
                               R"({"tool_call": {"name": "get_time", "arguments": {"tz": "UTC"}}})" +
                               "\nAssistant:";
  CHECK(engine->render_chat(chat).value() == rendered);
  CHECK(*ids == engine->tokenize(rendered, false));

  // Gemma 2's template (no tools of its own): the model turn is closed too.
  TempDir dir("generic-tools-closed");
  const std::string model = stories_with_gemma2_template(stories, dir);
  auto gemma = make_engine(options_for(model, ""));
  ChatRequest g = time_request();
  g.messages.push_back(call);
  REQUIRE(chat_prompt_with_tools(*gemma, false, &g, &info).is_ok());
  const std::string text = gemma->render_chat(g).value();
  const std::string tail = std::string("<start_of_turn>model\n") +
                           R"({"tool_call": {"name": "get_time", "arguments": {"tz": "UTC"}}})" +
                           "<end_of_turn>\n<start_of_turn>model\n";
  REQUIRE(text.size() >= tail.size());
  CHECK(text.substr(text.size() - tail.size()) == tail);
}
