#include "api/response_logprobs.h"

#include <cmath>

namespace larder {

// Ordered: a completions {piece: logprob} object keeps its alternatives in
// rank order (clients read the key order as the rank, as OpenAI's own
// examples show it); the other objects keep OpenAI's field order.
using json = nlohmann::ordered_json;

namespace {

json logprob_value(double lp) { return std::isfinite(lp) ? json(lp) : json(-9999.0); }

json bytes_of(const std::string& piece) {
  json out = json::array();
  for (unsigned char c : piece) out.push_back(int(c));
  return out;
}

json chat_top(const TopLogprob& t) {
  return {{"token", t.piece}, {"logprob", logprob_value(t.logprob)}, {"bytes", bytes_of(t.piece)}};
}

json chat_entry(const TokenLogprob& e) {
  json top = json::array();
  for (const TopLogprob& t : e.top) top.push_back(chat_top(t));
  return {{"token", e.piece},
          {"logprob", e.has_logprob ? logprob_value(e.logprob) : json(nullptr)},
          {"bytes", bytes_of(e.piece)},
          {"top_logprobs", std::move(top)}};
}

// A piece as an object key: invalid UTF-8 replaced, as dump_json would.
std::string key_of(const std::string& piece) {
  const std::string quoted = json(piece).dump(-1, ' ', false, json::error_handler_t::replace);
  return json::parse(quoted).get<std::string>();
}

// A completions entry's {piece: logprob} object; e.top is best first: the
// first alternative with a piece wins it.
json completions_top(const TokenLogprob& e) {
  json top = json::object();
  for (const TopLogprob& t : e.top) {
    const std::string k = key_of(t.piece);
    if (!top.contains(k)) top[k] = logprob_value(t.logprob);
  }
  return top;
}

}  // namespace

void ResponseLogprobs::add(GenerationEvent& e) {
  const size_t base = e.echo ? text_.size() : echo_bytes_;
  for (TokenLogprob& entry : e.logprobs) {
    // Generated entries count from the start of the generated text, which
    // follows the echoed prompt.
    const size_t offset = base + entry.text_offset;
    pending_.push_back({std::move(entry), offset});
  }
  e.logprobs.clear();
  if (!e.done) {
    text_ += e.text;
    if (e.echo) echo_bytes_ = text_.size();
  }
}

size_t ResponseLogprobs::chars_at(size_t byte_offset) {
  if (byte_offset < counted_bytes_) {
    counted_bytes_ = 0;
    counted_chars_ = 0;
  }
  const size_t end = std::min(byte_offset, text_.size());
  for (; counted_bytes_ < end; ++counted_bytes_) {
    if ((static_cast<unsigned char>(text_[counted_bytes_]) & 0xC0) != 0x80) ++counted_chars_;
  }
  return counted_chars_;
}

std::string ResponseLogprobs::take_text() {
  std::vector<Pending> entries;
  entries.swap(pending_);
  std::string out;
  // Each element is dumped on its own, as dump_json writes it inside the
  // array (no whitespace), and released.
  const auto list = [&](const char* head, auto&& element) {
    out += head;
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i > 0) out += ',';
      out += element(entries[i]);
    }
    out += ']';
  };
  if (kind_ == CompletionKind::kChat) {
    list("{\"content\":[", [](Pending& p) {
      std::string s = dump_json(chat_entry(p.entry));
      p.entry = TokenLogprob();
      return s;
    });
    out += ",\"refusal\":null}";
    return out;
  }
  list("{\"tokens\":[", [](const Pending& p) { return dump_json(json(p.entry.piece)); });
  list(",\"token_logprobs\":[", [](const Pending& p) {
    return dump_json(p.entry.has_logprob ? logprob_value(p.entry.logprob) : json(nullptr));
  });
  list(",\"top_logprobs\":[", [](Pending& p) {
    if (!p.entry.has_logprob) return std::string("null");
    std::string s = dump_json(completions_top(p.entry));
    p.entry.top = {};  // released
    return s;
  });
  list(",\"text_offset\":[", [this](const Pending& p) { return std::to_string(chars_at(p.byte_offset)); });
  out += '}';
  return out;
}

json ResponseLogprobs::take() {
  std::vector<Pending> entries;
  entries.swap(pending_);
  if (kind_ == CompletionKind::kChat) {
    json content = json::array();
    for (const Pending& p : entries) content.push_back(chat_entry(p.entry));
    return {{"content", std::move(content)}, {"refusal", nullptr}};
  }
  json tokens = json::array(), token_logprobs = json::array(), top_logprobs = json::array(),
       offsets = json::array();
  for (const Pending& p : entries) {
    const TokenLogprob& e = p.entry;
    tokens.push_back(e.piece);
    if (!e.has_logprob) {
      token_logprobs.push_back(nullptr);
      top_logprobs.push_back(nullptr);
    } else {
      token_logprobs.push_back(logprob_value(e.logprob));
      top_logprobs.push_back(completions_top(e));
    }
    offsets.push_back(chars_at(p.byte_offset));
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(token_logprobs)},
          {"top_logprobs", std::move(top_logprobs)},
          {"text_offset", std::move(offsets)}};
}

}  // namespace larder
