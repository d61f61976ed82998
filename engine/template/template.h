// Jinja templates for Hugging Face chat templates: the public face of
// engine/template. A Template is parsed once (at model load, so an
// unsupported construct fails there, not at the first request) and rendered
// many times; it is immutable and safe to render from several threads.
//
// Supported: see parser.h (statements), filters.cpp (filters and tests),
// methods.cpp (str/dict methods). Globals the caller gives (messages,
// bos_token, ...) plus the builtins namespace(), range(), dict(),
// raise_exception(msg) and strftime_now(fmt), as transformers'
// apply_chat_template defines them.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "engine/template/value.h"
#include "storage/status.h"

namespace larder::tmpl {

struct Stmt;

struct RenderOptions {
  // strftime_now(fmt): formats "now" (local time). Tests fix the clock.
  std::function<std::string(const std::string& format)> strftime_now;
};

class Template {
 public:
  // Errors: Status::unsupported naming the construct and its line, e.g.
  // "chat template line 3: unsupported tag {% include %}", or
  // invalid_argument for a syntax error.
  static Result<Template> parse(std::string_view source);

  // Renders with `globals` (e.g. messages, add_generation_prompt,
  // bos_token). Errors: Status::invalid_argument with the template's message
  // for raise_exception(), or naming the failing expression's line.
  Result<std::string> render(const Dict& globals, const RenderOptions& options = {}) const;

 private:
  std::shared_ptr<const std::vector<std::unique_ptr<Stmt>>> body_;
};

// The strftime_now of RenderOptions by default: std::strftime on local time.
std::string strftime_now_local(const std::string& format);

}  // namespace larder::tmpl

namespace larder::tmpl {

// Byte offset of the first difference between two renderings: -1 when
// `before` is a prefix of `after` (the KV prefix cache can reuse all of it),
// else the first offset where they differ (or before.size() when `after` is
// a proper prefix of `before`).
int64_t first_difference(std::string_view before, std::string_view after);

}  // namespace larder::tmpl
