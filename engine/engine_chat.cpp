// Engine: the Generator calls that run on the caller's thread (the libuv
// pool): tokenize, chat rendering, chat prompts with remembered answers
// (engine/engine_impl.h). They read the model, tokenizer and chat format,
// which do not change after start-up, and the answer memo (thread-safe).
#include <string_view>
#include <unordered_map>

#include <spdlog/spdlog.h>

#include "engine/engine_impl.h"
#include "engine/kv/prefix_hash.h"
#include "engine/tokenizer/chat_prompt.h"

namespace larder {

namespace {

Status too_long_for_context(int n_ctx, size_t max_bytes) {
  return Status::out_of_range("the chat prompt cannot fit the model's context of " + std::to_string(n_ctx) +
                                  " tokens: its rendering passes " + std::to_string(max_bytes) +
                                  " bytes (no token covers more than " + std::to_string(max_bytes / (n_ctx - 1)) +
                                  " bytes); shorten the conversation");
}

}  // namespace

// Memory first, then the disk tier (a synchronous point read of a small
// record, on the caller's thread: a returning chat after a restart).
std::optional<std::vector<int32_t>> Engine::Impl::find_answer(const std::string& text, const PageKey& chain_root) {
  const std::string scope = answer_scope(chain_root);
  if (auto ids = answers.find(text, scope)) return ids;
  if (!tiers) return std::nullopt;
  const PageKey key = answer_key(chain_root, text);
  std::optional<std::string> record = tiers->get_now(key);
  if (!record) return std::nullopt;
  std::optional<std::vector<int32_t>> ids = decode_answer_record(*record, text, n_vocab);
  if (!ids) {
    ++stats.records_rejected_answers;
    log_limited.log(spdlog::level::warn, "verify",
                    "dropping a damaged answer record " + key.to_hex() + " from the disk tier");
    tiers->erase(key);
    return std::nullopt;
  }
  answers.remember(text, *ids, scope);
  return ids;
}

std::vector<int32_t> Engine::tokenize(const std::string& text, bool parse_special) const {
  const Tokenizer& tok = *impl_->tokenizer;
  std::vector<int32_t> ids = tok.encode(text, /*add_bos=*/false, parse_special);
  if (tok.add_bos() && tok.bos_id() >= 0 && (ids.empty() || ids.front() != tok.bos_id())) {
    ids.insert(ids.begin(), tok.bos_id());
  }
  return ids;
}

std::vector<int32_t> Engine::tokenize_text(const std::string& text, bool add_special, bool parse_special) const {
  const Tokenizer& tok = *impl_->tokenizer;
  std::vector<int32_t> ids = tok.encode(text, /*add_bos=*/false, parse_special);
  if (add_special && tok.add_bos() && tok.bos_id() >= 0) ids.insert(ids.begin(), tok.bos_id());
  if (add_special && tok.add_eos() && tok.eos_id() >= 0) ids.push_back(tok.eos_id());
  return ids;
}

std::string Engine::token_piece(int32_t id) const {
  const Tokenizer& tok = *impl_->tokenizer;
  // llama.cpp's token_to_piece(special = true) prints control tokens as
  // their text; the tokenizer's own piece of a control token is empty.
  if (tok.token_type(id) == TokenType::kControl) return tok.token_text(id);
  return tok.token_to_piece(id);
}

Result<std::string> Engine::render_chat(const ChatRequest& request) const {
  Result<tmpl::Rendered> r = impl_->render_chat_text(request);
  if (!r.is_ok()) return r.status();
  return std::move(r->text);
}

// The rendering with the client's byte ranges; a rendering that cannot fit
// the context is refused here, before anything is tokenized (the template's
// output limit, RenderOptions::max_output_bytes, is the same bound, so a
// Jinja render stops as soon as it passes it).
Result<tmpl::Rendered> Engine::Impl::render_chat_text(const ChatRequest& request) const {
  const Impl& m = *this;
  const size_t max_bytes = m.info.max_prompt_bytes;
  Result<tmpl::Rendered> r = m.chat->render_text(request);
  if (!r.is_ok()) {
    if (r.status().code() == StatusCode::kOutOfRange && max_bytes > 0) return too_long_for_context(m.n_ctx, max_bytes);
    if (r.status().code() == StatusCode::kOutOfRange) return Status::invalid_argument(r.status().message());
    return r.status();
  }
  if (max_bytes > 0 && r->text.size() > max_bytes) return too_long_for_context(m.n_ctx, max_bytes);
  return r;
}

Result<std::vector<int32_t>> Engine::chat_prompt(const ChatRequest& request) const {
  ChatPromptInfo info;
  return chat_prompt(request, &info);
}

Result<std::vector<int32_t>> Engine::chat_prompt(const ChatRequest& request, ChatPromptInfo* info) const {
  Impl& m = *impl_;
  Result<tmpl::Rendered> rendered = m.render_chat_text(request);
  if (!rendered.is_ok()) return rendered.status();
  const std::string& text = rendered->text;
  *info = ChatPromptInfo{};
  info->opens_reasoning = reasoning_syntax() == ReasoningSyntax::kThinkTags && ChatFormat::opens_reasoning(text);
  // The plain format has no control tokens of its own; parse_special still
  // parses control-token text in its contents.
  const bool special = chat_uses_special_tokens() || request.special_in_content;
  // Earlier answers the template kept whole: the ids we remember for them
  // (looked up once per distinct text, and only for those), under the chain
  // root of the request's cache salt.
  const PageKey chain_root = salted_root(m.root, request.cache_salt);
  std::unordered_map<std::string_view, std::optional<std::vector<int32_t>>> answer_ids;
  std::vector<ChatSplice> splices;
  for (const tmpl::TextSpan& sp : rendered->spans) {
    if (sp.origin < 0 || static_cast<size_t>(sp.origin) >= request.messages.size()) continue;
    const ChatMessage& msg = request.messages[static_cast<size_t>(sp.origin)];
    if (msg.role != "assistant" || msg.content_null || msg.content.empty()) continue;
    if (std::string_view(text).substr(sp.begin, sp.end - sp.begin) != msg.content) continue;
    auto [it, fresh] = answer_ids.try_emplace(msg.content);
    if (fresh) it->second = m.find_answer(msg.content, chain_root);
    if (it->second) splices.push_back({sp.begin, sp.end, &*it->second});
  }
  ChatPromptIds out = tokenize_chat(*m.tokenizer, text, rendered->spans, splices, m.tokenizer->add_bos(), special,
                                    request.special_in_content);
  if (out.n_spliced > 0) spdlog::debug("chat prompt: {} earlier answer(s) use the ids the model sampled", out.n_spliced);
  return std::move(out.ids);
}

ToolCallSyntax Engine::tool_call_syntax() const { return impl_->chat->tool_call_syntax(); }

ReasoningSyntax Engine::reasoning_syntax() const {
  const Impl& m = *impl_;
  if (m.chat->reasoning_syntax() != ReasoningSyntax::kNone) return m.chat->reasoning_syntax();
  if (m.tokenizer->find_token("<think>") >= 0 && m.tokenizer->find_token("</think>") >= 0) {
    return ReasoningSyntax::kThinkTags;
  }
  return ReasoningSyntax::kNone;
}

bool Engine::chat_uses_special_tokens() const { return impl_->chat->uses_special_tokens(); }

}  // namespace larder
