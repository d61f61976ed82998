// The engine's public face for the API layer: what a generation request is,
// what comes back, and the Generator interface the HTTP server talks to.
// No JSON and no HTTP here (DESIGN.md: JSON ends in api/).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/cache_admin.h"
#include "engine/grammar/grammar_matcher.h"
#include "engine/grammar/grammar_trigger.h"
#include "engine/sampling/logprobs.h"
#include "storage/status.h"

namespace larder {

// Sampler chain settings (order: penalties -> temperature -> top-k -> top-p
// -> min-p -> draw). temperature == 0 means greedy (argmax, ties to the
// lowest id).
struct SamplingParams {
  float temperature = 0.8f;
  int top_k = 40;              // <= 0: off
  float top_p = 0.95f;         // >= 1: off
  float min_p = 0.05f;         // <= 0: off
  float repeat_penalty = 1.0f; // 1: off (llama.cpp semantics: divide positive logits, multiply negative)
  int repeat_last_n = 64;      // window of recent tokens the penalties look at (-1: all)
  float presence_penalty = 0.0f;   // OpenAI semantics: logit -= presence * (count > 0)
  float frequency_penalty = 0.0f;  // logit -= frequency * count
  std::optional<uint64_t> seed;    // nullopt: a random seed per request
};

struct GenerationRequest {
  std::vector<int32_t> prompt_tokens;  // already tokenized (BOS included where the model wants it)
  SamplingParams sampling;
  int max_tokens = -1;                 // completion token cap; -1: until the context is full; 0: none (echo: the prompt only,
                                       // which may then fill the whole context: n_ctx tokens; else at most n_ctx - 1)
  std::vector<std::string> stop;       // stop strings (never reach the client)
  bool ignore_eos = false;
  // Tests and diagnostics: put the logits at the last prompt position into the
  // final event (GenerationEvent::prompt_logits, [n_vocab]).
  bool return_prompt_logits = false;
  // Chat requests: when the answer ends (stop or length), keep its ids under
  // its text so that the next turn's prompt reuses them (Generator::chat_prompt).
  bool remember_answer = false;
  // The request's own cache salt (OpenAI/vLLM `cache_salt`): requests with
  // different salts never share KV pages or remembered answers; "" shares
  // with every unsalted request (engine/kv/prefix_hash.h salted_root).
  std::string cache_salt{};
  // Constrained decoding (engine/grammar/): every generated token keeps
  // the output text inside this grammar; end of generation is possible only
  // where the text is a whole sentence of it, and generation stops (stop)
  // once nothing more may follow. Null: unconstrained.
  std::shared_ptr<const CompiledGrammar> grammar{};
  // With triggers, the grammar is lazy (engine/grammar/grammar_trigger.h):
  // the model writes freely until its output reaches a trigger, and the
  // grammar applies from there (tool calls under tool_choice "auto"). A
  // grammar that refuses the text that fired it leaves that text free and
  // waits for the next trigger; one that has no token left to allow (the
  // vocabulary, or logit_bias) is dropped, and the rest is unconstrained.
  GrammarTriggers grammar_triggers{};
  // OpenAI's logit_bias: (token id, bias) added to the logits before the
  // sampler chain; a bias of -100 or less bans the token (-inf). Ids lie in
  // [0, n_vocab) (checked by the API).
  std::vector<std::pair<int32_t, float>> logit_bias{};
  // n > 1: choices of this one prompt (OpenAI's `n`). The prompt is
  // prefilled once and its pages shared: the choices fork after the prefill
  // (full pages by reference, the partial last page copied) and then decode
  // as sequences of their own, each with its own sampler (seed + j for
  // choice j when a seed is given, else a random seed each), stop strings,
  // grammar state, max_tokens and logit_bias. Each choice preempts and
  // finishes on its own; cancelling the sink cancels all of them.
  int n = 1;
  // The choice index of this request's first choice: its events carry
  // choice = first_choice + j (a batch of prompts numbers its choices
  // i * n + j, as OpenAI does, through one sink).
  int first_choice = 0;
  // Token log-probabilities (engine/sampling/logprobs.h): -1 off; 0..20:
  // every generated token's entry with that many alternatives, carried by
  // the event that carries its text (GenerationEvent::logprobs).
  int logprobs = -1;
  // Completions' echo: the first event (echo = true) carries the prompt's
  // decoded text and, with logprobs >= 0, every prompt token's entry. Prompt
  // entries need the logits of every prompt position, so such a request
  // computes its whole prompt (no cached page is used; its pages still go
  // into the cache).
  bool echo = false;
};

enum class FinishReason { kNone, kStop, kLength, kCancelled, kError };
const char* finish_reason_name(FinishReason r);  // "stop", "length", "cancelled", "error"

// One event from the engine to a request's sink. Each choice of a request
// gets zero or more events with text, then exactly one with done = true
// (all n choices finish unless one ends with kError or kCancelled first:
// the consumer then treats the request as failed).
struct GenerationEvent {
  int choice = 0;                      // GenerationRequest::first_choice + j for choice j
  std::string text;                    // UTF-8 text delta (never splits a character)
  std::vector<int32_t> tokens;         // token ids this delta covers
  // request.logprobs >= 0: the entries of the tokens whose text starts in
  // this delta (in order; a token whose text a stop string cut off entirely,
  // and the end-of-generation token, get none). text_offset counts bytes
  // from the start of the generated text (echo event: of the prompt text).
  std::vector<TokenLogprob> logprobs;
  bool echo = false;                   // request.echo: this event is the prompt (text, logprobs), not output
  bool done = false;
  FinishReason finish = FinishReason::kNone;
  bool stopped_by_string = false;      // final event, kStop: a stop string ended the output, not the model
  std::string error;                   // set when finish == kError
  // kError that the request itself leads to, whatever the model does (its
  // grammar needs text the vocabulary cannot write, its logit_bias bans
  // every token that may come next): the API answers 400, not 500.
  bool request_fault = false;
  // Filled on the final event (of each choice; prompt_tokens and
  // cached_tokens are the prompt's, the same for every choice of it):
  int prompt_tokens = 0;
  int cached_tokens = 0;               // prompt tokens whose KV came from the cache (memory or disk)
  int completion_tokens = 0;
  double prefill_ms = 0;               // time from admission to the first token's logits
  double decode_ms = 0;
  std::vector<float> prompt_logits;    // [n_vocab] when requested, else empty
  std::vector<int32_t> output_tokens;  // final event: every generated token id, in order
  // Final event: when the prompt shares its first page with an earlier
  // request but the cache hit ended early, the position of the first token
  // that differs from that request (also logged, so admins can see why a
  // chat missed the cache, e.g. a template that rewrites history); else -1.
  int cache_divergence_pos = -1;
};

// Receives a request's events. on_event is called on the engine thread and
// must not block (push to a queue and wake the consumer).
class GenerationSink {
 public:
  virtual ~GenerationSink() = default;
  virtual void on_event(GenerationEvent event) = 0;
  // Set by the consumer when the client went away; the engine polls it and
  // finishes the request with FinishReason::kCancelled (KV pages already made
  // are kept).
  void cancel() { cancelled_.store(true, std::memory_order_relaxed); }
  bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }

 private:
  std::atomic<bool> cancelled_{false};
};

// One function call the assistant made (OpenAI "tool_calls" item).
struct ToolCall {
  std::string id;         // e.g. "call_..." (Mistral templates want 9 alphanumerics)
  std::string name;       // function name
  std::string arguments;  // JSON text of the arguments object, as the client sent it
};

struct ChatMessage {
  ChatMessage() = default;
  ChatMessage(std::string role_, std::string content_) : role(std::move(role_)), content(std::move(content_)) {}

  std::string role;     // "system", "developer", "user", "assistant", "tool"
  std::string content;
  bool content_null = false;        // content was null or absent (an assistant turn with only tool calls)
  std::vector<ToolCall> tool_calls; // assistant turns
  std::string tool_call_id;         // "tool" turns: the call answered ("" when not given)
  std::string name;                 // optional "name" field of the message ("" when not given)
  // Assistant turns: the thinking the client sends back (llama.cpp's and
  // DeepSeek's "reasoning_content"); templates that show it (Qwen 3, for
  // the turns after the last user message) get it as
  // message.reasoning_content. nullopt when not given.
  std::optional<std::string> reasoning_content{};
  // An assistant turn that is finished even without tool_calls: never
  // continued as an assistant prefill (api/generic_tools.h writes a turn's
  // tool calls into its content and sets this, so that a conversation
  // ending in tool calls gets a new assistant turn, as when the template
  // renders the calls itself).
  bool ends_turn = false;
};

// Everything the chat template renders for one request.
struct ChatRequest {
  std::vector<ChatMessage> messages;
  // The function tools offered to the model: the JSON text of the request's
  // "tools" array exactly as the client sent it (key order kept), validated
  // by the API layer; "" when none are offered (no tools, or tool_choice
  // "none"). Passed to the template as `tools`, as transformers does.
  std::string tools_json;
  // Control-token text inside message contents ("<|im_end|>" typed by a
  // user) becomes the control token, as in llama.cpp's server. Default: it
  // stays text, and only the template's own control tokens are parsed.
  bool special_in_content = false;
  // The request's cache salt (GenerationRequest::cache_salt): remembered
  // answers are looked up under it.
  std::string cache_salt{};
  // llama.cpp's `chat_template_kwargs`: the JSON text of an object whose
  // keys become extra variables of the Jinja template (e.g.
  // {"enable_thinking": false}); "" when none. Validated by the API layer
  // (an object, none of the names the template gets anyway).
  std::string template_kwargs_json{};
};

// How a model marks its reasoning (its "thinking") in the output, detected
// from its chat template and vocabulary (engine/tokenizer/chat_format.h).
enum class ReasoningSyntax {
  kNone,       // no reasoning markers
  kThinkTags,  // <think> ... </think> before the answer (Qwen 3, QwQ, DeepSeek R1 distills)
};

// What Generator::chat_prompt found out about a prompt besides its ids.
struct ChatPromptInfo {
  // The rendering ends inside an open reasoning block (a generation prompt
  // ending in "<think>\n", as DeepSeek R1 distills' and QwQ's do): the
  // answer starts with the model's thinking and has no opening tag.
  bool opens_reasoning = false;
};

// How a model writes a tool call in its output, detected from its chat
// template (engine/tokenizer/chat_format.h says how).
enum class ToolCallSyntax {
  kNone,       // the chat format cannot render tools (no Jinja template, or one that never mentions tools)
  kHermes,     // <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>, repeated (Hermes, Qwen 2.5, Qwen 3)
  kLlama3Json, // the whole answer is {"name": ..., "parameters": {...}} (Llama 3.1/3.2), maybe after <|python_tag|>
  kMistral,    // [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...] (Mistral / Nemo)
  kGeneric,    // a template that renders tools in another way: Hermes tags or a bare JSON object are accepted
  // Never a template's: the API layer's generic tool prompt for kNone models
  // (api/generic_tools.h) asks for {"tool_call": {...}} or {"response": "..."}.
  kJsonEnvelope,
};
// "none", "hermes", "llama3_json", "mistral", "generic", "json_envelope"
const char* tool_call_syntax_name(ToolCallSyntax s);

struct ModelInfo {
  std::string id;       // model id shown by /v1/models (file stem unless configured)
  int n_ctx = 0;        // context length served (tokens)
  int n_vocab = 0;
  int64_t created = 0;  // unix seconds
  // 32 hex digits naming what can change the outputs: the KV chain root
  // without salts (engine/kv/prefix_hash.h prefix_root: the model's
  // fingerprint, KV layout and the backend's numerics); "" when unknown.
  std::string fingerprint;
  // A prompt text longer than this many bytes cannot fit the context (it
  // encodes to more than n_ctx - 1 tokens: (n_ctx - 1) x the longest token
  // text), so it is refused before it is tokenized; 0: no such bound.
  size_t max_prompt_bytes = 0;
};

// What the API layer needs from the engine. Thread-safe: every method may be
// called from the libuv loop thread while the engine runs.
class Generator {
 public:
  virtual ~Generator() = default;
  virtual const ModelInfo& model_info() const = 0;
  // Text -> token ids. add_bos follows the model's add_bos_token;
  // parse_special: text like "<|im_start|>" becomes its control token.
  virtual std::vector<int32_t> tokenize(const std::string& text, bool parse_special) const = 0;
  // Text -> token ids as llama.cpp's /tokenize does it: add_special puts
  // BOS first where the vocabulary adds one (add_bos_token) and EOS last
  // where it adds one (add_eos_token); parse_special as in tokenize().
  virtual std::vector<int32_t> tokenize_text(const std::string& text, bool add_special,
                                             bool parse_special) const = 0;
  // The bytes token `id` stands for, as llama.cpp's token_to_piece with
  // special = true gives them (a control token as its text, a byte token as
  // its one raw byte, which may be part of a UTF-8 character). id must lie
  // in [0, n_vocab).
  virtual std::string token_piece(int32_t id) const = 0;
  // Renders messages (and tools) with the model's chat format, ending with
  // the prompt for the assistant's turn. Errors: kInvalidArgument (e.g.
  // unknown role, a template's raise_exception, a template over its render
  // budget); kUnsupported when tools are given and tool_call_syntax() is
  // kNone; kOutOfRange when the rendering cannot fit the context
  // (ModelInfo::max_prompt_bytes).
  virtual Result<std::string> render_chat(const ChatRequest& request) const = 0;
  // How this model writes tool calls; kNone: it cannot be offered tools.
  virtual ToolCallSyntax tool_call_syntax() const = 0;
  // Whether render_chat output contains control-token text to parse.
  virtual bool chat_uses_special_tokens() const = 0;
  // The prompt ids of a chat request: render_chat, then tokenize with
  // special-token parsing where the format has control tokens. The engine
  // overrides it to put the ids the model sampled for earlier answers in
  // place of their text, where that gives the same text
  // (engine/tokenizer/answer_memo.h), so a returning chat matches the KV
  // pages of its earlier turns. Errors: as render_chat (the engine's also
  // kInvalidArgument for a rendering too long for the context).
  virtual Result<std::vector<int32_t>> chat_prompt(const ChatRequest& request) const {
    Result<std::string> rendered = render_chat(request);
    if (!rendered.is_ok()) return rendered.status();
    return tokenize(*rendered, chat_uses_special_tokens());
  }
  // chat_prompt(), also filling *info (not null). The default says nothing
  // about the prompt (info left at its defaults).
  virtual Result<std::vector<int32_t>> chat_prompt(const ChatRequest& request, ChatPromptInfo* info) const {
    *info = ChatPromptInfo{};
    return chat_prompt(request);
  }
  // How this model marks its reasoning; kNone: it does not.
  virtual ReasoningSyntax reasoning_syntax() const { return ReasoningSyntax::kNone; }
  // Queues a request; events arrive on `sink`. Never blocks on the engine.
  virtual void submit(GenerationRequest request, std::shared_ptr<GenerationSink> sink) = 0;
  // Queues several requests at once (a completion request's array of
  // prompts), so that the engine takes them in the same step and decodes
  // them together. Default: submit() each in order.
  virtual void submit_batch(std::vector<std::pair<GenerationRequest, std::shared_ptr<GenerationSink>>> batch) {
    for (auto& [request, sink] : batch) submit(std::move(request), std::move(sink));
  }

  // ---- cache admin (api/admin_routes.h) -----------------------------------
  // These BLOCK until the engine thread did the work (between two steps;
  // pin also runs a generation): call them off the loop thread. Errors
  // common to all: kUnsupported (the default: a generator without a KV
  // cache), kCancelled (the engine stopped, or did not answer in time).
  //
  // Every tier's counters, the queue and the running sequences.
  virtual Result<CacheReport> cache_report() const { return Status::unsupported("no KV cache to report on"); }
  // Computes the full pages of `prompt` (token ids, as submit takes them)
  // under `cache_salt` where they are not cached, then pins them in every
  // tier and writes them to the persistent ones; the pin survives a
  // restart. Errors: kInvalidArgument (empty, no full page, bad ids),
  // kOutOfRange (longer than the context), kResourceExhausted (the pins
  // would leave the device less than one full context).
  virtual Result<PinResult> pin(const std::vector<int32_t>& prompt, const std::string& cache_salt) {
    (void)prompt, (void)cache_salt;
    return Status::unsupported("no KV cache to pin in");
  }
  // Reverses pin() for the same prompt and salt. Errors: kNotFound when that
  // prefix is not pinned.
  virtual Result<PinResult> unpin(const std::vector<int32_t>& prompt, const std::string& cache_salt) {
    (void)prompt, (void)cache_salt;
    return Status::unsupported("no KV cache to unpin in");
  }
  // Removes cached pages from every tier (counted as admin evictions):
  // every page when `prompt` is null, else the full pages of `prompt` under
  // `cache_salt`. Pages a running request holds stay on the device. Pins
  // stay in force (a pinned page that comes back is pinned again).
  virtual Result<EvictResult> evict(const std::vector<int32_t>* prompt, const std::string& cache_salt) {
    (void)prompt, (void)cache_salt;
    return Status::unsupported("no KV cache to evict from");
  }
};

}  // namespace larder
