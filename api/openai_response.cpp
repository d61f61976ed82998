#include "api/openai_response.h"

#include <cstdio>

#include <xxhash.h>

namespace larder {

using nlohmann::json;

const char* openai_finish_reason(FinishReason r) {
  return r == FinishReason::kLength ? "length" : "stop";
}

namespace {

// "tool_calls" when the answer made calls and ended by itself; "length" when
// max_tokens or the context cut it, calls or not (OpenAI's; found in hostile
// testing: a forced call cut before its closing tag said "tool_calls").
const char* finish_reason_json(const GenerationEvent& final_event, bool made_calls) {
  if (made_calls && final_event.finish != FinishReason::kLength) return "tool_calls";
  return openai_finish_reason(final_event.finish);
}

}  // namespace

std::string make_completion_id(std::string_view prefix, std::mt19937_64& rng) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::uniform_int_distribution<int> pick(0, sizeof(kAlphabet) - 2);
  std::string id(prefix);
  for (int i = 0; i < 24; ++i) id += kAlphabet[pick(rng)];
  return id;
}

std::string make_tool_call_id(bool short_id, std::mt19937_64& rng) {
  if (!short_id) return make_completion_id("call_", rng);
  std::string id = make_completion_id("", rng);
  id.resize(9);
  return id;
}

std::string make_system_fingerprint(std::string_view model_fingerprint, std::string_view build) {
  std::string input(model_fingerprint);
  input += '|';
  input += build;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(XXH3_64bits(input.data(), input.size())));
  return "fp_" + std::string(hex, 10);
}

std::string dump_json(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }
std::string dump_json(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

json error_json(const ApiError& error) {
  return {{"error",
           {{"message", error.message},
            {"type", error.type},
            {"param", error.param ? json(*error.param) : json(nullptr)},
            {"code", error.code ? json(*error.code) : json(nullptr)}}}};
}

HttpResponse json_response(int status, const json& body) { return json_text_response(status, dump_json(body)); }

HttpResponse json_text_response(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

HttpResponse error_response(const ApiError& error) { return json_response(error.http_status, error_json(error)); }

HttpResponse retry_later_response(std::string message, std::string code) {
  HttpResponse r = error_response(ApiError{503, std::move(message), "server_error", std::nullopt, std::move(code)});
  r.headers.emplace_back("Retry-After", "1");
  return r;
}

json usage_json(const GenerationEvent& e) {
  return {{"prompt_tokens", e.prompt_tokens},
          {"completion_tokens", e.completion_tokens},
          {"total_tokens", e.prompt_tokens + e.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", e.cached_tokens}}},
          {"completion_tokens_details",
           {{"reasoning_tokens", 0}, {"accepted_prediction_tokens", 0}, {"rejected_prediction_tokens", 0}}}};
}

json timings_json(const GenerationEvent& e) {
  return {{"prompt_n", e.prompt_tokens - e.cached_tokens},
          {"prompt_ms", e.prefill_ms},
          {"predicted_n", e.completion_tokens},
          {"predicted_ms", e.decode_ms}};
}

namespace {

json envelope(const CompletionMeta& meta, const char* object) {
  return {{"id", meta.id},
          {"object", object},
          {"created", meta.created},
          {"model", meta.model},
          {"system_fingerprint", meta.system_fingerprint}};
}

// A streamed chunk's envelope; "usage": null when the stream ends with a usage chunk.
json chunk_envelope(const CompletionMeta& meta) {
  json body = envelope(meta, meta.kind == CompletionKind::kChat ? "chat.completion.chunk" : "text_completion");
  if (meta.stream_usage) body["usage"] = nullptr;
  return body;
}

// One streamed choice: chat carries `delta`, text carries `text`.
json stream_choice(const CompletionMeta& meta, json delta_or_text, json finish_reason) {
  json c = {{"index", 0}};
  c[meta.kind == CompletionKind::kChat ? "delta" : "text"] = std::move(delta_or_text);
  c["logprobs"] = nullptr;
  c["finish_reason"] = std::move(finish_reason);
  return c;
}

json tool_call_json(const ToolCall& call) {
  return {{"id", call.id}, {"type", "function"}, {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
}

}  // namespace

json completion_json(const CompletionMeta& meta, const std::string& text, const GenerationEvent& final_event,
                     const std::vector<ToolCall>& tool_calls) {
  return completion_body_json(meta, json::array({choice_json(meta, 0, text, final_event, tool_calls)}), final_event);
}

json completion_body_json(const CompletionMeta& meta, json choices, const GenerationEvent& usage_event) {
  json body = envelope(meta, meta.kind == CompletionKind::kChat ? "chat.completion" : "text_completion");
  body["choices"] = std::move(choices);
  body["usage"] = usage_json(usage_event);
  body["timings"] = timings_json(usage_event);
  return body;
}

json choice_json(const CompletionMeta& meta, int index, const std::string& text, const GenerationEvent& final_event,
                 const std::vector<ToolCall>& tool_calls) {
  bool chat = meta.kind == CompletionKind::kChat;
  json choice = {{"index", index}};
  if (chat && !tool_calls.empty()) {
    json calls = json::array();
    for (const ToolCall& c : tool_calls) calls.push_back(tool_call_json(c));
    choice["message"] = {{"role", "assistant"},
                         {"content", text.empty() ? json(nullptr) : json(text)},
                         {"tool_calls", std::move(calls)}};
  } else if (chat) {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = finish_reason_json(final_event, !tool_calls.empty());
  if (meta.return_tokens) choice["tokens"] = final_event.output_tokens;
  return choice;
}

json with_choice_index(json chunk, int index) {
  if (chunk.contains("choices") && chunk["choices"].is_array() && !chunk["choices"].empty()) {
    chunk["choices"][0]["index"] = index;
  }
  return chunk;
}

json role_chunk_json(const CompletionMeta& meta) {
  json body = chunk_envelope(meta);
  body["choices"] = json::array({stream_choice(meta, {{"role", "assistant"}, {"content", ""}}, nullptr)});
  return body;
}

json text_chunk_json(const CompletionMeta& meta, const std::string& text) {
  json body = chunk_envelope(meta);
  json payload = meta.kind == CompletionKind::kChat ? json{{"content", text}} : json(text);
  body["choices"] = json::array({stream_choice(meta, std::move(payload), nullptr)});
  return body;
}

json tool_call_chunk_json(const CompletionMeta& meta, int index, const ToolCall& call) {
  json body = chunk_envelope(meta);
  json c = tool_call_json(call);
  json entry = {{"index", index}};
  for (auto& [k, v] : c.items()) entry[k] = v;
  body["choices"] = json::array({stream_choice(meta, {{"tool_calls", json::array({std::move(entry)})}}, nullptr)});
  return body;
}

json finish_chunk_json(const CompletionMeta& meta, const GenerationEvent& final_event, bool tool_calls) {
  json body = chunk_envelope(meta);
  json payload = meta.kind == CompletionKind::kChat ? json::object() : json("");
  json reason = finish_reason_json(final_event, tool_calls);
  body["choices"] = json::array({stream_choice(meta, std::move(payload), std::move(reason))});
  body["timings"] = timings_json(final_event);
  return body;
}

json usage_chunk_json(const CompletionMeta& meta, const GenerationEvent& final_event) {
  json body = chunk_envelope(meta);
  body["choices"] = json::array();
  body["usage"] = usage_json(final_event);
  return body;
}

json reasoning_chunk_json(const CompletionMeta& meta, const std::string& text) {
  json body = chunk_envelope(meta);
  body["choices"] = json::array({stream_choice(meta, {{"reasoning_content", text}}, nullptr)});
  return body;
}

void add_reasoning_json(json& j, const std::string& reasoning, int reasoning_tokens) {
  if (j.contains("usage")) j["usage"]["completion_tokens_details"]["reasoning_tokens"] = reasoning_tokens;
  if (!reasoning.empty() && j.contains("message")) j["message"]["reasoning_content"] = reasoning;
}

std::string sse_event(std::string_view payload) {
  std::string out = "data: ";
  out += payload;
  out += "\n\n";
  return out;
}

json model_json(const ModelInfo& info) {
  return {{"id", info.id},
          {"object", "model"},
          {"created", info.created},
          {"owned_by", "larder"},
          {"meta", {{"n_ctx", info.n_ctx}, {"n_vocab", info.n_vocab}}}};
}

json models_list_json(const ModelInfo& info) {
  return {{"object", "list"}, {"data", json::array({model_json(info)})}};
}

}  // namespace larder
