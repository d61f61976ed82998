// Tools for a model whose chat format cannot render them (engine
// ToolCallSyntax::kNone: no Jinja template, such as stories260K's plain
// format, or a template that never mentions tools), as llama.cpp's server
// does with its "generic" chat format: the tools are described in a system
// message and the model is asked to answer in JSON, and the answer is
// parsed as ToolCallSyntax::kJsonEnvelope (api/tool_calls.h).
//
// The request the template then renders (no tools of its own):
//   - a system message first (or, when the conversation opens with one,
//     appended to it after a blank line):
//       Respond in JSON format, either with `tool_call` (a request to call
//       tools) or with `response` reply to the user's request.
//
//       You can call any of the following tools to satisfy the user's
//       requests: <the tools array, JSON indented by 2>
//
//       Example tool call syntax:
//
//       {"tool_call": {"name": "tool_name", "arguments": {"arg1": "some_value"}}}
//     (with parallel calls allowed: {"tool_calls": [{"name": ..., "arguments":
//     ..., "id": "call_1"}]}), then how a reply looks: {"response": "..."};
//   - an assistant message with tool calls: its content becomes that JSON
//     ({"tool_call": ...} for one call, {"tool_calls": [... with ids]} for
//     several; its text, if any, as "content" beside them), a finished turn
//     (ChatMessage::ends_turn): when it is the last message, the prompt
//     closes it and opens a new assistant turn (no assistant prefill), as
//     the template-native tool path renders it;
//   - a tool message: a user message {"tool_response": {"tool_call_id": ID,
//     "name": N (when given), "content": C}}; the results of consecutive
//     tool messages share one user message, a line each (templates that
//     insist on alternating roles, Gemma's, accept that).
// A template that refuses system messages (Gemma 2 raises "System role not
// supported") gets the system text at the start of the first user message
// instead (fold_system_into_user; the router retries with it).
// Everything stays message content, so the client's text in it is never
// parsed as control tokens.
#pragma once

#include <nlohmann/json.hpp>

#include "engine/generation.h"

namespace larder {

// `request` rewritten as above; tools: the request's "tools" array (null
// or empty: no tools are offered, only the history is rewritten, with no
// system prompt); parallel: the request's parallel_tool_calls. The result
// has no tools_json (the template renders it as a chat without tools).
ChatRequest generic_tool_request(const ChatRequest& request, const nlohmann::ordered_json& tools, bool parallel);
// The leading system message's text put before the first user message's
// (after a blank line), and the system message removed; unchanged when the
// request opens with no system message or has no user message.
ChatRequest fold_system_into_user(const ChatRequest& request);
// Whether any message carries tool calls or is a tool result.
bool has_tool_history(const ChatRequest& request);
// When the model's template cannot show tools (template_syntax kNone) and
// *chat offers tools (its tools_json, parsed) or holds tool history,
// rewrites *chat with generic_tool_request. Returns whether it did.
bool use_generic_tools(ToolCallSyntax template_syntax, bool parallel, ChatRequest* chat);
// For every endpoint that renders a chat (chat completions, the admin
// pins): generator.chat_prompt(*chat, info) after use_generic_tools, and,
// when the template then refuses the rendering (kInvalidArgument), once
// more after fold_system_into_user. *chat is left as rendered. Errors:
// those of Generator::chat_prompt.
Result<std::vector<int32_t>> chat_prompt_with_tools(const Generator& generator, bool parallel, ChatRequest* chat,
                                                    ChatPromptInfo* info);
// The same for the prompt's text (/apply-template): generator.render_chat.
Result<std::string> render_chat_with_tools(const Generator& generator, bool parallel, ChatRequest* chat);

}  // namespace larder
