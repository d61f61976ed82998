// Parsing and validation of OpenAI-style request bodies for
// POST /v1/chat/completions and POST /v1/completions. Every check happens
// here, before any response byte: the first problem found is returned as an
// ApiError (400 invalid_request_error with `param` naming the field).
//
// Accepted fields (OpenAI API reference, plus llama.cpp extensions):
//   model                 string (checked against the served id by the caller)
//   messages (chat)       non-empty array of {role, content}; role one of
//                         system, developer (the chat format makes it "system"
//                         unless the template has a developer role), user,
//                         assistant, tool (else 400 naming messages[i].role); content is
//                         a string, null (assistant only), or an array of
//                         {"type": "text", "text": string} parts (concatenated).
//                         A last assistant message without tool calls is
//                         continued (prefill: engine/tokenizer/chat_format.h)
//   prompt (completions)  string | [token id, ...] | a batch: [string or
//                         [token id, ...], ...] (at most kMaxPrompts)
//   max_tokens, max_completion_tokens  integer >= 1 (the latter wins; 0 with
//                         echo: the prompt's logprobs only);
//   n_predict (llama.cpp) integer >= 1 or -1 (no limit), 0 where max_tokens
//                         may be 0 (echo); below both
//   temperature [0, 2]; top_p (0, 1]; top_k integer >= 0; min_p [0, 1];
//   presence_penalty, frequency_penalty [-2, 2]; repeat_penalty > 0;
//   repeat_last_n integer >= -1; ranges hold for the value as a 32-bit
//   float too (1e-50 is 0 as a float);
//   seed integer (-1: random); stop string | array of <= 4 strings;
//   n integer >= 1 (at most [server] max_n, checked by the router); stream bool;
//   stream_options {include_usage bool, include_obfuscation bool (accepted, ignored)};
//   cache_salt non-empty string of <= 1024 bytes;
//   parse_special bool (default false for chat contents, true for a
//   completion prompt);
//   grammar, json_schema, response_format (api/request_constraints.h);
//   logit_bias; ignore_eos, return_tokens bool;
//   logprobs: chat bool + top_logprobs 0..20; completions integer 0..20 and
//   echo bool (api/request_logprobs.h);
//   the fields of kUnsupportedFields (api/request_fields.h: suffix, best_of, functions, n_probs,
//   reasoning_effort, verbosity, ...) -> 400 "not supported" unless they hold their "off" value.
// Function calling (chat):
//   tools                 array of {"type": "function", "function": {"name"
//                         (1-64 of [A-Za-z0-9_-]), "description"?: string,
//                         "parameters"?: object, "strict"?: bool}}
//   tool_choice           "auto" (default) | "none" (tools are then not shown
//                         to the model and no calls are parsed) | "required"
//                         | {"type": "function", "function": {"name": N}}
//                         (the answer is forced into calls by a grammar)
//   parallel_tool_calls   bool; false: a forced answer holds one call, and
//                         the generic tool prompt asks for one
//                         (api/generic_tools.h)
//   messages: assistant messages may carry "tool_calls" ([{"id": string,
//   "type": "function", "function": {"name": string, "arguments": JSON text
//   nesting <= kMaxJsonDepth (an object is accepted too)}}]) with content
//   null or absent; "tool"
//   messages need "tool_call_id" (string) and content; any message may carry
//   a string "name"; assistant messages a string "reasoning_content" (the
//   thinking of an earlier answer, passed to the template).
// Reasoning models and templates (chat):
//   reasoning_format      "none" | "auto" (default) | "deepseek" (else 400)
//   chat_template_kwargs  object: extra variables for the Jinja template
//                         (e.g. {"enable_thinking": false}); the names the
//                         template gets anyway (messages, tools,
//                         add_generation_prompt, bos_token, eos_token,
//                         documents) are a 400
// Errors name the offending path, e.g. param "tools[1].function.name" or
// "messages[2].tool_calls[0].function.arguments".
// Integer fields take a float with an integral value too (2.0 is 2, as
// OpenAI's server reads it; 2.5 is a 400 naming the field).
// null counts as "not given" for every optional field. Any other top-level
// field is refused with a 400 naming it ("Unrecognized request argument
// supplied: X"); the table of known fields, including those accepted and
// ignored on purpose (user, metadata, store, service_tier, ...), is
// api/request_fields.cpp.
// Thread-safe (pure functions): the router calls them on libuv's pool.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/api_error.h"
#include "api/reasoning.h"
#include "engine/generation.h"

namespace larder {

// Fields shared by both endpoints.
struct GenerationOptions {
  std::optional<std::string> model;  // nullopt: not given
  std::optional<int> max_tokens;     // nullopt: not given
  SamplingParams sampling;           // defaults overridden by the fields given
  std::vector<std::string> stop;     // empty strings dropped
  bool stream = false;
  bool include_usage = false;        // stream_options.include_usage
  // llama.cpp extensions:
  bool ignore_eos = false;           // "ignore_eos": keep generating past end-of-generation tokens
  bool return_tokens = false;        // "return_tokens": non-streaming choices carry "tokens" (generated ids)
  // "parse_special": control-token text ("<|im_end|>") in the prompt text or
  // in message contents becomes the control token (llama.cpp's behaviour);
  // default: it stays text (a chat template's own control tokens are always parsed).
  bool parse_special = false;
  // "cache_salt" (vLLM's field): requests with different salts never share
  // cached KV pages, so one client cannot tell from cached_tokens or timing
  // what another sent. "" when not given.
  std::string cache_salt{};
  // "grammar" (llama.cpp: GBNF text) or "response_format" {"type":
  // "json_object"}: the compiled grammar the output must follow (engine
  // GenerationRequest::grammar); null when neither is given.
  std::shared_ptr<const CompiledGrammar> grammar{};
  // Tool calls under tool_choice "auto": the triggers that make `grammar`
  // lazy (engine GenerationRequest::grammar_triggers); set by the router.
  GrammarTriggers grammar_triggers{};
  // "logit_bias": {"<token id>": bias in [-100, 100]} (OpenAI), or
  // llama.cpp's [[id, bias or false], ...]; ids are checked against the
  // model's vocabulary by the router.
  std::vector<std::pair<int32_t, float>> logit_bias{};
  // "n": choices per prompt (>= 1; the router refuses more than the
  // server's max_n).
  int n = 1;
  // Chat "logprobs": true + "top_logprobs": N, or completions "logprobs":
  // N: N alternatives per token (GenerationRequest::logprobs); -1: off.
  int logprobs = -1;
  bool echo = false;                 // completions "echo": the prompt comes back first
};

struct ChatCompletionRequest {
  GenerationOptions options;
  ChatRequest chat;                     // messages; tools_json "" when no tools are offered
  std::vector<std::string> tool_names;  // names of the offered tools (empty: none offered)
  // tool_choice "required" or {"type": "function", "function": {"name": N}}:
  // the answer is forced into tool calls (api/tool_call_grammar.h), of the
  // function `forced_tool` when set.
  bool tool_required = false;
  std::string forced_tool;
  bool parallel_tool_calls = true;      // "parallel_tool_calls": false allows one call
  // "reasoning_format" (llama.cpp): "none" leaves a reasoning model's
  // thinking in content; "auto" (the default) and "deepseek" return it as
  // reasoning_content (api/reasoning.h).
  ReasoningFormat reasoning_format = ReasoningFormat::kDeepseek;
};

// One prompt of a completion request.
struct CompletionPrompt {
  bool is_tokens = false;
  std::string text;             // when !is_tokens
  std::vector<int32_t> tokens;  // when is_tokens (passed to the engine as is)
};

struct CompletionRequest {
  GenerationOptions options;
  // The (first) prompt:
  bool prompt_is_tokens = false;
  std::string prompt_text;              // when !prompt_is_tokens
  std::vector<int32_t> prompt_tokens;   // when prompt_is_tokens (passed to the engine as is)
  // An array of prompts: the ones after the first, in order (they run as
  // one batch; choice i * n + j is prompt i's choice j).
  std::vector<CompletionPrompt> more_prompts;
};

// Most prompts one completion request may hold (an array of prompts): each
// is a sequence queued in the engine at once, with sampler buffers the size
// of the vocabulary (1.5 MB for 128k tokens).
inline constexpr size_t kMaxPrompts = 256;

// Parses a chat completion body. `defaults` fills every knob the body leaves
// unset. Returns the first validation error, or nullopt with *out filled.
std::optional<ApiError> parse_chat_completion_request(std::string_view body,
                                                      const SamplingParams& defaults,
                                                      ChatCompletionRequest* out);

// Parses a completion body. Token ids must lie in [0, n_vocab) when
// n_vocab > 0.
std::optional<ApiError> parse_completion_request(std::string_view body,
                                                 const SamplingParams& defaults, int n_vocab,
                                                 CompletionRequest* out);

}  // namespace larder
