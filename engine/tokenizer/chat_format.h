// Chat formats: turn a list of messages into the prompt text a model was
// trained on.
//
//   kJinja   (the GGUF has tokenizer.chat_template): the template itself,
//            run by our Jinja interpreter (engine/template) the way
//            transformers' apply_chat_template runs it: messages as
//            [{"role", "content", ...}], tools (None unless offered; see
//            "Tools" below), add_generation_prompt = true,
//            bos_token / eos_token = the text of the GGUF's BOS/EOS
//            tokens. The template is parsed once by load(); a construct we do
//            not support fails there with the construct and its line.
//            Tested byte-identical to Python's Jinja2 on real templates
//            (tests/template/). Like transformers, the output is tokenized
//            with special-token parsing and without an added BOS (the
//            template renders bos_token where the model wants it); unlike
//            transformers, control-token text in any string of the request
//            stays text by default (render_text, engine/tokenizer/chat_prompt.h).
//   The fixed renderings below remain for of_kind() and from_template():
//
//   kChatML  (template contains "<|im_start|>"), per message
//              "<|im_start|>{role}\n{content}<|im_end|>\n"
//            then "<|im_start|>assistant\n". Roles: system, user, assistant, tool.
//   kLlama3  (template contains "<|start_header_id|>"): "<|begin_of_text|>",
//            then per message
//              "<|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>"
//            with the content's leading/trailing whitespace trimmed (as Meta's
//            template does), then "<|start_header_id|>assistant<|end_header_id|>\n\n".
//            Roles: system, user, assistant. It renders the BOS text itself,
//            so the caller tokenizes with add_bos = false.
//   kPlain   (no template, or one matching neither marker; e.g. stories260K):
//            a system message renders as "{content}\n\n"; a user turn as
//            "User: {content}\n"; an assistant turn as "Assistant: {content}\n"
//            when the content starts with an ASCII letter or digit, else
//            "Assistant:{content}\n" (the model's own answers follow
//            "Assistant:" directly: " Once...", "\"Hi\"...", "”he..."); the text
//            ends with "Assistant:" (no trailing space: the answer's first
//            piece brings its own "▁"). Roles: system, user, assistant.
//            No control tokens, so tokenize it with parse_special = false.
//
// Roles: system, developer, user, assistant, tool (OpenAI's); any other is
// refused before the template runs (a role is printed as it is, so it must
// not carry text of its own). "developer" is passed on as "developer" only
// to a Jinja template whose text has it as a quoted string ('developer' or
// "developer": a template with a developer role); every other format and
// template gets it as "system" (Qwen 2.5's
// template would drop it, Llama 3's print an unknown header).
//
// Assistant prefill: when the last message is an assistant message without
// tool calls (and not ChatMessage::ends_turn), the model continues it, and the prompt ends inside that
// assistant turn, right after its content (no end-of-turn marker). Jinja: as
// transformers' continue_final_message, the whole conversation is rendered
// without the generation prompt and cut after the last text the template
// printed from that message's content (so a template that trims content,
// like Llama 3's, loses the trailing whitespace, and one that opens an
// answer with "<think>\n\n</think>\n\n", like Qwen 3's, keeps it). Where
// the template does not print that content (it raises or drops it), as
// llama.cpp's server does: the messages before it with the generation
// prompt, then the content as is. The fixed formats cut their own rendering
// the same way (plain: "Assistant:" and its usual space, then the content).
// An empty content continues nothing: the prompt is the generation prompt.
//
// Tools (kJinja only; the fixed formats refuse tools and tool calls). The
// request's data reaches the template as transformers' apply_chat_template
// passes it: `tools` is the request's "tools" array as sent (None when no
// tools are offered); a message is {"role", "content"} plus "tool_calls"
// ([{"id", "type": "function", "function": {"name", "arguments"}}]) when it
// has any, "tool_call_id", "name" and "reasoning_content" when given. Two adaptations, found by
// rendering a probe conversation once at load (as llama.cpp's minja does):
//   - OpenAI clients send `arguments` as a JSON string. Templates that print
//     `arguments | tojson` (Llama 3.2, Qwen 2.5, Mistral Nemo) would print
//     it double-encoded, so when the probe shows that a template prints an
//     object's JSON but not a string's, arguments are passed as the parsed
//     object (a string that is not a JSON object stays a string). Templates
//     that take strings (Qwen 3, DeepSeek) get the string.
//   - OpenAI clients send `content: null` with tool calls. When a template
//     fails on that or prints "None" (Qwen 3, Phi, SmolLM2, Llama 3.1), it
//     gets "" instead.
// The tool-call syntax of the output is read from the template text: no
// mention of "tools" -> kNone (render_text refuses tools: the template
// would never show them; the API layer then describes them in a system
// message of its own, api/generic_tools.h); "<tool_call>" -> kHermes; "[TOOL_CALLS]" -> kMistral;
// "<|start_header_id|>" -> kLlama3Json; else kGeneric.
//
// Prefix property (what the KV prefix cache relies on): for every format the
// rendering of turns 1..k is a text prefix of the rendering of turns 1..k plus
// the assistant's answer plus a further user turn. For the plain format this
// also holds for token ids with stories260K's tokenizer, possibly except the
// last token of the shorter prompt (":" could merge with the answer's first
// piece in some vocab); the last page of a prompt is recomputed anyway, since
// only full pages are shared.
//
// For kJinja the prefix property holds for the text when the template keeps
// history verbatim (Llama 3.x, Qwen 2.5, Gemma, Phi, SmolLM2, DeepSeek V3 on
// tests/template's conversations), but templates may rewrite history:
// Mistral Nemo moves the system prompt into the last user turn; DeepSeek-R1
// distills end the generation prompt with "<think>\n" and strip reasoning
// from earlier answers; Qwen 3 strips the <think> block of answers before the
// last user query; templates that trim content (Llama 3, Gemma) re-render an
// answer with surrounding whitespace differently from how it was generated.
// first_difference() gives the byte offset where two renderings part, for a
// log line explaining a cache miss.
//
// Reasoning (kJinja): a template that mentions "<think>" (Qwen 3, QwQ,
// DeepSeek R1 distills) gives reasoning_syntax() kThinkTags; the engine
// also says so when the vocabulary has "<think>" and "</think>" tokens.
// opens_reasoning() tells whether a rendering ends inside an open block
// (a generation prompt ending in "<think>\n"), so that the answer starts
// with the thinking. Template kwargs (ChatRequest::template_kwargs_json,
// llama.cpp's chat_template_kwargs, e.g. {"enable_thinking": false}) become
// extra template variables, their strings marked as the client's; the
// variables the template gets anyway (messages, tools, ...) win over them.
// The fixed formats have nothing to pass them to.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/generation.h"
#include "engine/template/template.h"
#include "storage/status.h"

namespace larder {

class GgufFile;

enum class ChatFormatKind { kPlain, kChatML, kLlama3, kJinja };

class ChatFormat {
 public:
  ChatFormat() = default;  // kPlain

  // From the GGUF: kJinja when tokenizer.chat_template is a string (parsed
  // now), kPlain when it is absent (the reason in detect_reason()).
  // Errors: Status::unsupported / invalid_argument naming the template
  // construct and line that we cannot parse; Status::corruption when the
  // template is not a string.
  static Result<ChatFormat> load(const GgufFile& gguf);
  // As load(), for callers that cannot handle an error: a template that fails
  // to parse gives a format whose render() returns that error (and whose
  // detect_reason() names it). Prefer load(), which fails at model load.
  static ChatFormat detect(const GgufFile& gguf);
  // A Jinja chat template with the text of the BOS/EOS tokens.
  static Result<ChatFormat> from_jinja(std::string_view chat_template, std::string bos_token,
                                       std::string eos_token);
  // Legacy: picks one of the fixed renderings by markers in the template
  // text (no Jinja); see the top of this file.
  static ChatFormat from_template(std::string_view chat_template);
  // A format by kind (no template involved).
  static ChatFormat of_kind(ChatFormatKind kind);

  ChatFormatKind kind() const { return kind_; }
  const char* name() const;  // "plain", "chatml", "llama3", "jinja"
  // Why this format was chosen, for a log line, e.g. "template contains
  // <|im_start|>" or "no tokenizer.chat_template in the metadata".
  const std::string& detect_reason() const { return reason_; }

  // Renders `messages`, ending with the prompt of the assistant's turn (or
  // inside the last assistant message: prefill, see the top of this file).
  // Errors (Status::invalid_argument): an empty list; a role that is not
  // one of system, developer, user, assistant, tool (OpenAI's roles), or
  // one the format does not know (the message names the role and the
  // format). kJinja: errors are Status::invalid_argument with the
  // template's own message (raise_exception, e.g. "roles must alternate")
  // or the failing line, and Status::out_of_range when the output passes
  // RenderOptions::max_output_bytes.
  Result<std::string> render(const std::vector<ChatMessage>& messages) const;

  // Renders a whole chat request: messages with their tool calls, tool
  // results, and the tools offered (see "Tools" above). Errors as render();
  // also Status::unsupported when tools are offered but tool_call_syntax()
  // is kNone, Status::invalid_argument when tools_json is not a JSON array
  // (or nests deeper than tmpl::kMaxValueDepth), and for the fixed formats
  // when a message carries tool calls.
  Result<std::string> render_request(const ChatRequest& request) const;

  // render_request(), with the byte ranges of the rendering that hold text
  // from the request (Rendered::spans): every string the client sent
  // (contents, names, tool call ids, names and arguments, everything in
  // `tools`) is marked, whatever the template does with it
  // (engine/template/value.h, "Untrusted text"); the template's own text,
  // bos_token / eos_token and the (checked) roles are not. A span's origin
  // is the index of the message whose content it holds, kNoOrigin for the
  // other strings. Tokenizing the marked ranges without control tokens
  // keeps a client from writing a control token in any field.
  Result<tmpl::Rendered> render_text(const ChatRequest& request) const;

  // Options for every later render (tests fix the clock of strftime_now).
  void set_render_options(tmpl::RenderOptions options) { render_options_ = std::move(options); }

  // How the model writes tool calls (kNone unless kJinja; see "Tools").
  ToolCallSyntax tool_call_syntax() const { return tool_syntax_; }
  // kThinkTags when the template mentions "<think>" (see "Reasoning").
  ReasoningSyntax reasoning_syntax() const { return reasoning_syntax_; }
  // Whether `rendered` ends inside an open <think> block: its last
  // "<think>" is followed by nothing but whitespace.
  static bool opens_reasoning(std::string_view rendered);
  // What probing the template found (kJinja; both false otherwise).
  bool requires_object_arguments() const { return requires_object_arguments_; }
  bool requires_non_null_content() const { return requires_non_null_content_; }

  // kJinja only: renders arbitrary message data (lists of dicts with role,
  // content, tool_calls, ...), `tools` (none or a list of tool schemas) and
  // add_generation_prompt. Other kinds: Status::unsupported.
  Result<std::string> render_values(const tmpl::Value& messages, const tmpl::Value& tools,
                                    bool add_generation_prompt) const;

  // ChatML / Llama-3 / Jinja output contains control-token text: tokenize it
  // with parse_special = true.
  bool uses_special_tokens() const { return kind_ != ChatFormatKind::kPlain; }
  // Llama-3 renders "<|begin_of_text|>" itself, and a Jinja template renders
  // bos_token itself where the model wants it (transformers tokenizes its
  // output with add_special_tokens=False): the caller must not add BOS.
  bool adds_bos_itself() const {
    return kind_ == ChatFormatKind::kLlama3 || kind_ == ChatFormatKind::kJinja;
  }

  // True when `messages` ends with an assistant message that a rendering
  // continues (assistant prefill, see the top of this file).
  static bool is_prefill(const std::vector<ChatMessage>& messages);

  // Byte offset where two renderings part: -1 when `before` is a prefix of
  // `after` (e.g. the prompt of turn k against the prompt of turn k+1).
  static int64_t first_difference(std::string_view before, std::string_view after) {
    return tmpl::first_difference(before, after);
  }

 private:
  ChatFormat(ChatFormatKind kind, std::string reason) : kind_(kind), reason_(std::move(reason)) {}

  // Messages as the template sees them, every client string marked
  // (chat_tools.cpp).
  tmpl::Value message_values(const std::vector<ChatMessage>& messages) const;
  // render() and render_text() (chat_format.cpp); tools: none or a list.
  // extra: none or a dict of further template variables (template kwargs).
  Result<tmpl::Rendered> render_messages(const std::vector<ChatMessage>& messages, const tmpl::Value& tools,
                                         const tmpl::Value& extra = tmpl::Value::none()) const;
  // Prefill, the transformers way (see the top of this file); nullopt when
  // the template fails or does not print the last message's content (the
  // caller falls back to llama.cpp's form), a kOutOfRange error when the
  // rendering is too long.
  std::optional<Result<tmpl::Rendered>> render_continued(const std::vector<ChatMessage>& messages,
                                                         const tmpl::Value& tools,
                                                         const tmpl::Value& extra) const;
  Result<tmpl::Rendered> render_jinja(const tmpl::Value& messages, const tmpl::Value& tools,
                                      bool add_generation_prompt,
                                      const tmpl::Value& extra = tmpl::Value::none()) const;
  // Sets tool_syntax_ and the requires_* flags from the template (chat_tools.cpp).
  void probe_tool_support(std::string_view chat_template);

  ChatFormatKind kind_ = ChatFormatKind::kPlain;
  std::string reason_ = "default";
  ToolCallSyntax tool_syntax_ = ToolCallSyntax::kNone;
  ReasoningSyntax reasoning_syntax_ = ReasoningSyntax::kNone;
  bool requires_object_arguments_ = false;
  bool requires_non_null_content_ = false;
  bool has_developer_role_ = false;  // the Jinja template has 'developer' as a string
  // kJinja:
  std::optional<tmpl::Template> template_;
  std::string bos_token_;
  std::string eos_token_;
  tmpl::RenderOptions render_options_;
  Status load_error_;  // detect() of a template that failed to parse
};

}  // namespace larder
