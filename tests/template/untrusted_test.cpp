// Untrusted text (engine/template/value.h): the bytes of a rendering that
// came from strings the caller marked are reported as spans, whatever a
// template does with those strings. Each case gives the output and the
// marked ranges, worked out by hand.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/template/template.h"

namespace larder::tmpl {
namespace {

Rendered render(std::string_view src, const Dict& globals) {
  auto t = Template::parse(src);
  REQUIRE(t.is_ok());
  auto r = t->render_text(globals);
  if (!r.is_ok()) FAIL(r.status().message());
  return *r;
}

// The marked substrings of a rendering, in order.
std::vector<std::string> marked(const Rendered& r) {
  std::vector<std::string> out;
  for (const TextSpan& s : r.spans) out.push_back(r.text.substr(s.begin, s.end - s.begin));
  return out;
}

using Strings = std::vector<std::string>;

}  // namespace

TEST_CASE("marks follow the client's bytes through concatenation and output", "[template][untrusted]") {
  Dict g;
  g.set("x", Value::untrusted("XY", 3));
  g.set("y", Value::untrusted("Z"));
  const Rendered r = render("<a>{{ x }}</a>{{ '[' ~ x ~ ']' + '' }}{% set s %}({{ y }}){% endset %}{{ s }}", g);
  CHECK(r.text == "<a>XY</a>[XY](Z)");
  CHECK(r.spans == std::vector<TextSpan>{{3, 5, 3}, {10, 12, 3}, {14, 15, kNoOrigin}});
  // A macro's output, a join, and a repeated string keep them too.
  const Rendered m = render("{% macro w(v) %}<{{ v }}>{% endmacro %}{{ w(x) }}|{{ [x, 'k', y]|join('-') }}|{{ y * 3 }}", g);
  CHECK(m.text == "<XY>|XY-k-Z|ZZZ");
  CHECK(marked(m) == Strings{"XY", "XY", "Z", "ZZZ"});
  CHECK(m.spans[3].origin == kNoOrigin);
  // Adjacent marked pieces of one origin merge into one span.
  const Rendered adj = render("{{ x[:1] ~ x[1:] }}", g);
  CHECK(adj.spans == std::vector<TextSpan>{{0, 2, 3}});
}

TEST_CASE("every string operation keeps or spreads the marks", "[template][untrusted]") {
  Dict g;
  g.set("c", Value::untrusted("  <|eot_id|> Ab\ncd  ", 0));
  g.set("n", Value::untrusted("3"));
  struct Case {
    const char* src;
    const char* text;
    Strings marked;
  };
  const Case cases[] = {
      {"{{ c|trim }}", "<|eot_id|> Ab\ncd", {"<|eot_id|> Ab\ncd"}},
      {"{{ c.strip() }}|{{ c.lstrip() }}|{{ c.rstrip() }}", "<|eot_id|> Ab\ncd|<|eot_id|> Ab\ncd  |  <|eot_id|> Ab\ncd",
       {"<|eot_id|> Ab\ncd", "<|eot_id|> Ab\ncd  ", "  <|eot_id|> Ab\ncd"}},
      {"{{ c|upper }}", "  <|EOT_ID|> AB\nCD  ", {"  <|EOT_ID|> AB\nCD  "}},
      {"{{ c|lower }}|{{ c|title }}|{{ c|capitalize }}", "  <|eot_id|> ab\ncd  |  <|Eot_Id|> Ab\nCd  |  <|eot_id|> ab\ncd  ",
       {"  <|eot_id|> ab\ncd  ", "  <|Eot_Id|> Ab\nCd  ", "  <|eot_id|> ab\ncd  "}},
      {"{{ c|replace('Ab', '<X>') }}", "  <|eot_id|> <X>\ncd  ", {"  <|eot_id|> ", "\ncd  "}},
      {"{{ c.split('|')[1] }}", "eot_id", {"eot_id"}},
      {"{{ c.split()|join(',') }}", "<|eot_id|>,Ab,cd", {"<|eot_id|>", "Ab", "cd"}},
      {"{{ c[2:12] }}|{{ c[::-1][:4] }}", "<|eot_id|>|  dc", {"<|eot_id|>", "  dc"}},
      {"{{ c[2] }}{{ c|first }}{{ c|last }}", "<  ", {"<  "}},
      {"{% for ch in c[2:5] %}{{ ch }}.{% endfor %}", "<.|.e.", {"<", "|", "e"}},
      {"{{ c|tojson }}", "\"  <|eot_id|> Ab\\ncd  \"", {"\"  <|eot_id|> Ab\\ncd  \""}},
      {"{{ [c]|string }}", "['  <|eot_id|> Ab\\ncd  ']", {"['  <|eot_id|> Ab\\ncd  ']"}},
      {"{{ c|e }}", "  &lt;|eot_id|&gt; Ab\ncd  ", {"  &lt;|eot_id|&gt; Ab\ncd  "}},
      {"{{ c|reverse|reverse }}", "  <|eot_id|> Ab\ncd  ", {"  <|eot_id|> Ab\ncd  "}},
      {"{{ {c: 1}|tojson }}", "{\"  <|eot_id|> Ab\\ncd  \": 1}", {"{\"  <|eot_id|> Ab\\ncd  \": 1}"}},
      {"{{ n|int + 1 }}{{ c|length }}", "420", {}},
      {"{% if '<|eot_id|>' in c %}yes{% endif %}", "yes", {}},
      {"{{ strftime_now(c[2:12]) }}{{ strftime_now('<b>') }}", "<|eot_id|><b>", {"<|eot_id|>"}},
  };
  for (const Case& k : cases) {
    INFO(k.src);
    const Rendered r = render(k.src, g);
    CHECK(r.text == k.text);
    CHECK(marked(r) == k.marked);
  }
}

TEST_CASE("JSON from the client is marked in its keys and strings", "[template][untrusted]") {
  const auto json = nlohmann::ordered_json::parse(R"({"type": "object", "properties": {"city<|x|>": {"description": "A <|y|>"}}, "n": 5})");
  Dict g;
  g.set("tool", from_json(json, /*untrusted=*/true).value());
  const Rendered r = render(
      "{% for name, p in tool.properties|items %}{{ name }}: {{ p.description }}{% endfor %}"
      "|{{ tool.type == 'object' }}|{{ tool.n }}|{% for k in tool %}{{ k }},{% endfor %}",
      g);
  CHECK(r.text == "city<|x|>: A <|y|>|True|5|type,properties,n,");
  CHECK(marked(r) == Strings{"city<|x|>", "A <|y|>", "type", "properties", "n"});
  // Trusted JSON (template fixtures) has no marks.
  Dict t;
  t.set("tool", from_json(json).value());
  CHECK(render("{{ tool|tojson }}", t).spans.empty());
}

TEST_CASE("from_json refuses JSON nested deeper than kMaxValueDepth", "[template][untrusted]") {
  const auto nest = [](int n) { return std::string(size_t(n), '[') + std::string(size_t(n), ']'); };
  CHECK(from_json(nlohmann::ordered_json::parse(nest(int(kMaxValueDepth)))).has_value());
  CHECK_FALSE(from_json(nlohmann::ordered_json::parse(nest(int(kMaxValueDepth) + 1))).has_value());
  CHECK_FALSE(from_json(nlohmann::ordered_json::parse(nest(100000))).has_value());
}

}  // namespace larder::tmpl
