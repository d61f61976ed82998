// OpenAI-format response bodies (JSON) for the chat and text completion
// endpoints, their streamed chunks, and error bodies. Shapes follow the
// OpenAI API reference ("The chat completion object", "The chat completion
// chunk object", "The completion object").
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/api_error.h"
#include "api/http_message.h"
#include "engine/generation.h"

namespace larder {

enum class CompletionKind { kChat, kText };

// What every body/chunk of one response repeats.
struct CompletionMeta {
  CompletionKind kind = CompletionKind::kChat;
  std::string id;       // "chatcmpl-..." / "cmpl-..."
  std::string model;    // the served model id
  int64_t created = 0;  // unix seconds
  bool return_tokens = false;  // add "tokens" (generated ids) to the non-streaming choice
  bool logprobs = false;       // choices carry "logprobs" (api/response_logprobs.h)
  std::string system_fingerprint;  // on every body and chunk (make_system_fingerprint)
  // Streaming with stream_options.include_usage: every chunk carries
  // "usage": null, and the usage chunk (choices []) the numbers (OpenAI).
  bool stream_usage = false;
};

// OpenAI's system_fingerprint: "fp_" + 10 lower-case hex digits of
// XXH3-64(model_fingerprint | build). model_fingerprint is
// ModelInfo::fingerprint (weights, KV layout, kernels), build the server's
// version: either changing changes the fingerprint, as OpenAI's changes with
// the backend configuration that can change outputs.
std::string make_system_fingerprint(std::string_view model_fingerprint, std::string_view build);

// "stop", "length" (OpenAI's finish_reason). kCancelled/kError map to "stop"
// (callers send an error instead where that matters).
const char* openai_finish_reason(FinishReason r);

// prefix + 24 random [A-Za-z0-9] characters.
std::string make_completion_id(std::string_view prefix, std::mt19937_64& rng);

// Serializes JSON; invalid UTF-8 is replaced rather than throwing. An
// ordered_json keeps its keys in the order they were written.
std::string dump_json(const nlohmann::json& j);
std::string dump_json(const nlohmann::ordered_json& j);

// {"error": {"message", "type", "param", "code"}}
nlohmann::json error_json(const ApiError& error);
HttpResponse error_response(const ApiError& error);
// 503 with `code` ("server_busy", "too_many_connections") and Retry-After: 1:
// the answer when a bound of the server, not the request, refuses it.
HttpResponse retry_later_response(std::string message, std::string code);
HttpResponse json_response(int status, const nlohmann::json& body);
// A response whose body is JSON text already serialized (dump_json).
HttpResponse json_text_response(int status, std::string body);

// {"prompt_tokens", "completion_tokens", "total_tokens",
//  "prompt_tokens_details": {"cached_tokens"},
//  "completion_tokens_details": {"reasoning_tokens", "accepted_prediction_tokens",
//  "rejected_prediction_tokens"}} from a final event (the details are 0: no
//  reasoning split, no predicted outputs).
nlohmann::json usage_json(const GenerationEvent& final_event);
// llama.cpp-style {"prompt_n", "prompt_ms", "predicted_n", "predicted_ms"}.
nlohmann::json timings_json(const GenerationEvent& final_event);

// The whole non-streaming body: chat.completion or text_completion. Chat
// with tool calls: message.content is `text` or null when empty,
// message.tool_calls lists the calls, finish_reason is "tool_calls".
nlohmann::json completion_json(const CompletionMeta& meta, const std::string& text,
                               const GenerationEvent& final_event,
                               const std::vector<ToolCall>& tool_calls = {});
// n > 1 or several prompts: one choice of the body, {"index", "message" or
// "text", "logprobs", "finish_reason"} as in completion_json, and the body
// around the choices (an array of choice_json) with the usage and timings
// of `usage_event` (GenerationJob sums them over the choices).
nlohmann::json choice_json(const CompletionMeta& meta, int index, const std::string& text,
                           const GenerationEvent& final_event, const std::vector<ToolCall>& tool_calls = {});
nlohmann::json completion_body_json(const CompletionMeta& meta, nlohmann::json choices,
                                    const GenerationEvent& usage_event);

// A tool call id: "call_" + 24 random [A-Za-z0-9]; `short_id` (Mistral
// templates check it): 9 random [A-Za-z0-9].
std::string make_tool_call_id(bool short_id, std::mt19937_64& rng);

// Streamed chunks. Chat: chat.completion.chunk with choices[0].delta; text:
// text_completion with choices[0].text.
nlohmann::json role_chunk_json(const CompletionMeta& meta);  // chat only: delta {"role":"assistant","content":""}
nlohmann::json text_chunk_json(const CompletionMeta& meta, const std::string& text);
// Chat: delta {"tool_calls": [{"index", "id", "type": "function",
// "function": {"name", "arguments"}}]}, the whole call in one chunk.
nlohmann::json tool_call_chunk_json(const CompletionMeta& meta, int index, const ToolCall& call);
// tool_calls: finish_reason "tool_calls".
nlohmann::json finish_chunk_json(const CompletionMeta& meta, const GenerationEvent& final_event,
                                 bool tool_calls = false);
nlohmann::json usage_chunk_json(const CompletionMeta& meta, const GenerationEvent& final_event);  // "choices": []
// The chunks above are for choice 0; this sets choices[0].index of one to
// `index` (n > 1, several prompts).
nlohmann::json with_choice_index(nlohmann::json chunk, int index);

// Reasoning models (api/reasoning.h). Chat: delta {"reasoning_content": text}.
nlohmann::json reasoning_chunk_json(const CompletionMeta& meta, const std::string& text);
// Of a reasoning model: a chat body or usage chunk from above gets
// usage.completion_tokens_details.reasoning_tokens; a choice_json (reasoning
// not empty) gets message.reasoning_content.
void add_reasoning_json(nlohmann::json& j, const std::string& reasoning, int reasoning_tokens);

// Server-sent events framing: "data: <payload>\n\n".
std::string sse_event(std::string_view payload);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

// GET /v1/models: {"object": "list", "data": [<model>]}; a model is
// {"id", "object": "model", "created", "owned_by": "larder"} (+ "meta": {"n_ctx", "n_vocab"}).
nlohmann::json model_json(const ModelInfo& info);
nlohmann::json models_list_json(const ModelInfo& info);

}  // namespace larder
