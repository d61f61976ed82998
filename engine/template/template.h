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
#include <vector>

#include "engine/template/value.h"
#include "storage/status.h"

namespace larder::tmpl {

struct Stmt;

struct RenderOptions {
  // strftime_now(fmt): formats "now" (local time). Tests fix the clock.
  std::function<std::string(const std::string& format)> strftime_now;
  // Limits of one render; past one, render() fails (see below). Defaults
  // are far above what any chat template needs for a request the HTTP
  // server accepts, and keep a runaway template to about a second and a
  // few hundred MiB.
  // Steps of work: one per statement and expression evaluated, and one per
  // item (or 64 bytes of text) an operation copies, compares or builds.
  int64_t max_steps = 50'000'000;
  // Bytes of the output, and of any one string made while rendering.
  size_t max_output_bytes = size_t{64} << 20;
  // Bytes of strings and list/dict items made in all (freed ones count).
  int64_t max_memory_bytes = int64_t{512} << 20;
  // Nested macro calls (Jinja2 raises RecursionError near 200 as well).
  int max_call_depth = 200;
  // Machine stack the render may use (less if the thread has less left).
  size_t max_stack_bytes = size_t{1} << 20;
};

// A rendering and the byte ranges of it that came from untrusted strings
// (value.h, "Untrusted text"): sorted, disjoint.
struct Rendered {
  std::string text;
  std::vector<TextSpan> spans;
};

class Template {
 public:
  // Errors: Status::unsupported naming the construct and its line, e.g.
  // "chat template line 3: unsupported tag {% include %}", or
  // invalid_argument for a syntax error, and for a template that nests
  // blocks or expressions deeper than the parser allows (kMaxNesting).
  static Result<Template> parse(std::string_view source);

  // Renders with `globals` (e.g. messages, add_generation_prompt,
  // bos_token). Errors: Status::invalid_argument with the template's message
  // for raise_exception(), or naming the failing expression's line (also
  // for a render that passes max_steps, max_memory_bytes, max_call_depth or
  // max_stack_bytes); Status::out_of_range when the output, or a string,
  // would pass max_output_bytes.
  Result<std::string> render(const Dict& globals, const RenderOptions& options = {}) const;
  // As render(), with the ranges of the output that came from untrusted
  // strings in `globals`.
  Result<Rendered> render_text(const Dict& globals, const RenderOptions& options = {}) const;

 private:
  std::shared_ptr<const std::vector<std::unique_ptr<Stmt>>> body_;
};

// Deepest nesting the parser accepts: of blocks ({% if %} in {% for %} ...)
// and of expressions (parentheses, operands, arguments). Jinja2 3.1 fails
// sooner: below 80 nested parentheses, at 100 nested blocks.
inline constexpr int kMaxNesting = 128;

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
