// Hand-checked renderings of small templates (expected values are what
// Python's Jinja2 prints for the same input, worked out by hand).
#include <catch2/catch.hpp>

#include "engine/template/template.h"

namespace larder::tmpl {
namespace {

std::string render(std::string_view src, Dict globals = {}) {
  auto t = Template::parse(src);
  REQUIRE(t.is_ok());
  auto r = t->render(globals);
  if (!r.is_ok()) FAIL(r.status().message());
  return *r;
}

}  // namespace

TEST_CASE("expressions", "[template]") {
  CHECK(render("{{ 1 + 2 * 3 }}") == "7");
  CHECK(render("{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }}") == "3 -4 2 3.5");
  CHECK(render("{{ 'a' ~ 1 ~ none }}") == "a1None");
  CHECK(render("{{ [1, 'x', none, true] }}") == "[1, 'x', None, True]");
  CHECK(render("{{ 'abcdef'[1:4] }}|{{ 'abcdef'[::-2] }}|{{ [1,2,3][-1] }}") == "bcd|fdb|3");
  CHECK(render("{{ 'x' if false }}|{{ 'y' if 1 else 'z' }}") == "|y");
  CHECK(render("{{ 'b' in 'abc' }} {{ 2 not in [1, 2] }}") == "True False");
  CHECK(render("{{ ' a b '.strip() }}|{{ 'a,b,,c'.split(',') }}|{{ 'a b'.split() }}") == "a b|['a', 'b', '', 'c']|['a', 'b']");
  CHECK(render("{{ {'a': 1, 'b': [1, 2.5, 'é']} | tojson }}") == "{\"a\": 1, \"b\": [1, 2.5, \"é\"]}");
  CHECK(render("{{ {'a': 1, 'b': [1]} | tojson(indent=2) }}") == "{\n  \"a\": 1,\n  \"b\": [\n    1\n  ]\n}");
}

TEST_CASE("statements and whitespace", "[template]") {
  CHECK(render("{% for x in [1,2,3] %}{{ loop.index }}{{ x }}{% if not loop.last %},{% endif %}{% endfor %}") ==
        "11,22,33");
  CHECK(render("{% for k, v in {'a': 1}.items() %}{{ k }}={{ v }}{% endfor %}") == "a=1");
  CHECK(render("{% for x in [] %}a{% else %}empty{% endfor %}") == "empty");
  CHECK(render("{% set ns = namespace(n=0) %}{% for x in [1,2] %}{% set ns.n = ns.n + x %}{% endfor %}{{ ns.n }}") == "3");
  CHECK(render("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}") == "1");
  CHECK(render("{% macro m(a, b='q') %}<{{ a }}{{ b }}>{% endmacro %}{{ m(1) }}{{ m(2, b=3) }}") == "<1q><23>");
  CHECK(render("{% raw %}{{ x }}{% endraw %}") == "{{ x }}");
  // trim_blocks + lstrip_blocks
  CHECK(render("a\n  {% if true %}\n  b\n  {% endif %}\nc") == "a\n  b\nc");
  CHECK(render("a  {%- if true -%}  b  {%- endif %}") == "ab");
  CHECK(render("{{ 'x' }}\n{# c #}\ny") == "x\ny");
}

TEST_CASE("errors name the construct and line", "[template]") {
  auto t = Template::parse("a\n{% include 'x' %}");
  REQUIRE_FALSE(t.is_ok());
  CHECK(t.status().code() == StatusCode::kUnsupported);
  CHECK(t.status().message() == "chat template line 2: unsupported tag {% include %}");
  auto f = Template::parse("{{ x | frobnicate }}");
  REQUIRE_FALSE(f.is_ok());
  CHECK(f.status().message().find("unsupported filter 'frobnicate'") != std::string::npos);
  auto u = Template::parse("{% if x %}");
  REQUIRE_FALSE(u.is_ok());
  auto r = Template::parse("{{ raise_exception('no system role') }}");
  REQUIRE(r.is_ok());
  auto out = r->render({});
  REQUIRE_FALSE(out.is_ok());
  CHECK(out.status().message().find("no system role") != std::string::npos);
}

}  // namespace larder::tmpl
