// Templates (from a GGUF file: outside bytes) and data that would make a
// render recurse, loop or allocate without end get an error naming the
// line, never a crash or a hang. Expected outcomes are Python Jinja2 3.1's
// where it has one (RecursionError near 200 nested macro calls).
#include <catch2/catch.hpp>

#include <pthread.h>

#include <string>

#include "engine/template/template.h"

namespace larder::tmpl {
namespace {

Result<std::string> render(std::string_view src, const RenderOptions& options = {}, Dict globals = {}) {
  auto t = Template::parse(src);
  if (!t.is_ok()) return t.status();
  return t->render(globals, options);
}

bool contains(const std::string& s, std::string_view what) { return s.find(what) != std::string::npos; }

std::string repeat(std::string_view s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

}  // namespace

TEST_CASE("a macro that calls itself without end is a template error naming the line", "[template][limits]") {
  auto r = render("{% macro f(x) %}{{ f(x) }}{% endmacro %}{{ f(1) }}");
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  CHECK(contains(r.status().message(), "chat template line 1: "));
  CHECK(contains(r.status().message(), "maximum recursion depth exceeded"));
  CHECK(contains(r.status().message(), "macro 'f'"));

  // On a later line, and inside a loop: the line of the recursive call.
  auto r2 = render("{% macro g(n) %}\n{{ g(n + 1) }}\n{% endmacro %}\n{% for i in [1] %}{{ g(0) }}{% endfor %}");
  REQUIRE_FALSE(r2.is_ok());
  CHECK(contains(r2.status().message(), "chat template line 2: "));
}

TEST_CASE("macro recursion: 150 levels render, past 200 fail (as in Jinja2)", "[template][limits]") {
  const std::string countdown = "{% macro c(n) %}{% if n > 0 %}{{ n }},{{ c(n - 1) }}{% endif %}{% endmacro %}{{ c(N) }}";
  Dict g;
  g.set("N", Value(150));
  auto ok = render(countdown, {}, g);
  REQUIRE(ok.is_ok());
  std::string want;
  for (int n = 150; n > 0; --n) want += std::to_string(n) + ",";
  CHECK(*ok == want);
  g.set("N", Value(250));
  auto deep = render(countdown, {}, g);
  REQUIRE_FALSE(deep.is_ok());
  CHECK(contains(deep.status().message(), "maximum recursion depth exceeded"));
}

// The shape of Hermes 3's tool-use template: a macro mapping a JSON schema
// type to a Python type name recurses into a type that is a list. For the
// usual type of an optional field, ["string", "null"], "null" is a string,
// and strings are iterable in Jinja: "null" -> "n" -> "n" -> ... without
// end. Jinja2 raises RecursionError; so do we (as an error, not a crash).
TEST_CASE("a schema type list ['string', 'null'] in a Hermes-style type macro is an error", "[template][limits]") {
  const std::string tmpl =
      "{%- macro py_type(spec) %}\n"
      "{%- set basic = {'string': 'str', 'integer': 'int'} %}\n"
      "{%- if basic[spec.type] is defined %}{{- basic[spec.type] }}\n"
      "{%- elif spec.type is iterable %}{{- 'Union[' }}\n"
      "{%- for t in spec.type %}{{- py_type({'type': t}) }}{%- if not loop.last %},{% endif %}{%- endfor %}\n"
      "{{- ']' }}\n"
      "{%- else %}{{- 'Any' }}{%- endif %}\n"
      "{%- endmacro %}\n"
      "{%- for name, spec in params|items %}{{ name }}: {{ py_type(spec) }}\n{% endfor %}";
  Dict props;
  Dict required_type;
  required_type.set("type", Value("string"));
  props.set("city", Value(required_type));
  Dict g;
  g.set("params", Value(props));
  auto fine = render(tmpl, {}, g);
  REQUIRE(fine.is_ok());
  CHECK(*fine == "city: str\n");

  Dict optional_type;
  optional_type.set("type", Value(List{Value("string"), Value("null")}));
  props.set("unit", Value(optional_type));
  g.set("params", Value(props));
  auto r = render(tmpl, {}, g);
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  CHECK(contains(r.status().message(), "chat template line 5: maximum recursion depth exceeded"));
}

TEST_CASE("loops and builtins that would run for ever or allocate without bound fail fast", "[template][limits]") {
  // 10**10 iterations; the default budget stops them (generous bound: a
  // hang would take hours).
  auto nested = render("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}");
  REQUIRE_FALSE(nested.is_ok());
  CHECK(contains(nested.status().message(), "budget"));
  // Each of these asks for far more memory than exists.
  for (const char* src : {"{{ range(10**9)|length }}", "{{ range(10**12)|length }}", "{{ ('x' * 10**12)|length }}",
                          "{{ ([1] * 10**12)|length }}", "{{ ('ab' * 10**6 * 10**6)|length }}"}) {
    INFO(src);
    auto r = render(src);
    CHECK_FALSE(r.is_ok());
  }
  // A string past the output limit is out_of_range; the limit counts bytes.
  RenderOptions small;
  small.max_output_bytes = 1000;
  auto joined = render("{{ range(100000)|join(',') }}", small);
  REQUIRE_FALSE(joined.is_ok());
  CHECK(joined.status().code() == StatusCode::kOutOfRange);
  auto exact = render("{{ 'x' * 1000 }}", small);
  REQUIRE(exact.is_ok());
  CHECK(exact->size() == 1000);
  auto over = render("{{ 'x' * 1000 }}y", small);
  REQUIRE_FALSE(over.is_ok());
  CHECK(over.status().code() == StatusCode::kOutOfRange);
  CHECK(contains(over.status().message(), "1000 bytes"));
  // Powers are computed by squaring, not by 10**12 multiplications.
  CHECK(render("{{ 3 ** 10**12 > 0 or true }}").is_ok());
  // Small steps budget: the message names the line.
  RenderOptions few;
  few.max_steps = 1000;
  auto slow = render("a\n{% for i in range(10000) %}{{ i }}{% endfor %}", few);
  REQUIRE_FALSE(slow.is_ok());
  CHECK(contains(slow.status().message(), "chat template line 2: "));
}

TEST_CASE("deeply nested template source is a parse error, not a stack overflow", "[template][limits]") {
  const int n = 100000;
  const std::vector<std::string> sources = {
      "{{ " + repeat("(", n) + "1" + repeat(")", n) + " }}",
      "{{ " + repeat("[", n) + "1" + repeat("]", n) + " }}",
      "{{ " + repeat("- ", n) + "1 }}",
      "{{ " + repeat("not ", n) + "1 }}",
      "{{ 1" + repeat(" + 1", n) + " }}",
      "{{ 'a'" + repeat(" ~ 'a'", n) + " }}",
      "{{ x" + repeat(".a", n) + " }}",
      "{{ x" + repeat("|trim", n) + " }}",
      "{{ f" + repeat("(1)", n) + " }}",
      "{{ 1" + repeat(" if 1 else 2", n) + " }}",
      repeat("{% if true %}", n) + "x" + repeat("{% endif %}", n),
      repeat("{% for i in [1] %}", n) + repeat("{% endfor %}", n),
  };
  for (const std::string& src : sources) {
    INFO(src.substr(0, 40));
    auto t = Template::parse(src);
    REQUIRE_FALSE(t.is_ok());
    CHECK(t.status().code() == StatusCode::kInvalidArgument);
    CHECK(contains(t.status().message(), "nested more than"));
  }
  // Nesting a real template might use still parses and renders.
  auto parens = render("{{ " + repeat("(", 100) + "1 + 2" + repeat(")", 100) + " }}");
  REQUIRE(parens.is_ok());
  CHECK(*parens == "3");
  auto blocks = render(repeat("{% if true %}", 100) + "x" + repeat("{% endif %}", 100));
  REQUIRE(blocks.is_ok());
  CHECK(*blocks == "x");
  auto chain = render("{{ 1" + repeat(" + 1", 100) + " }}");
  REQUIRE(chain.is_ok());
  CHECK(*chain == "101");
}

TEST_CASE("values nested without end, and chains of namespaces, are refused or freed safely", "[template][limits]") {
  // 100,000 nested lists: refused past depth 256, where Jinja2 renders
  // this one (printing, comparing or freeing a value recursively overflows
  // the stack at some depth; no chat template nests data that deep).
  auto lists = render("{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}ok");
  REQUIRE_FALSE(lists.is_ok());
  CHECK(contains(lists.status().message(), "levels deep"));
  auto fine = render("{% set ns = namespace(x=[]) %}{% for i in range(200) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x|length }}");
  REQUIRE(fine.is_ok());
  CHECK(*fine == "1");
  // 200,000 namespaces, each holding the one before: freed without recursion.
  auto chain = render(
      "{% set h = namespace(head=none) %}{% for i in range(200000) %}{% set h.head = namespace(next=h.head) %}{% endfor %}"
      "done");
  REQUIRE(chain.is_ok());
  CHECK(*chain == "done");
  // A namespace holding itself renders (and is freed at the end).
  auto self = render("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns.me.me is defined }}");
  REQUIRE(self.is_ok());
  CHECK(*self == "True");
}

namespace {

struct ThreadRender {
  std::string src;
  RenderOptions options;
  Result<std::string> result = Status::internal("not run");
};

void* render_on_thread(void* arg) {
  auto* job = static_cast<ThreadRender*>(arg);
  job->result = render(job->src, job->options);
  return nullptr;
}

}  // namespace

TEST_CASE("the stack guard stops a render before the thread's stack ends", "[template][limits]") {
  // Call depth limit lifted: only the stack guard is left, on a thread
  // with a 512 KiB stack (the render may use what is left above a reserve).
  ThreadRender job;
  job.src = "{% macro f(x) %}{{ f(x) }}{% endmacro %}{{ f(1) }}";
  job.options.max_call_depth = 1000000;
  pthread_attr_t attr;
  REQUIRE(pthread_attr_init(&attr) == 0);
  REQUIRE(pthread_attr_setstacksize(&attr, size_t{512} << 10) == 0);
  pthread_t thread;
  REQUIRE(pthread_create(&thread, &attr, render_on_thread, &job) == 0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
  REQUIRE_FALSE(job.result.is_ok());
  CHECK(contains(job.result.status().message(), "maximum recursion depth exceeded"));
  CHECK(contains(job.result.status().message(), "chat template line 1: "));
}

}  // namespace larder::tmpl
