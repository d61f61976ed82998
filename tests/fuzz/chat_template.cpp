#include <string>

#include "engine/template/template.h"
#include "tests/fuzz/harness.h"

namespace larder::fuzz {

namespace {

tmpl::Value message(const char* role, const char* content) {
  tmpl::Dict m;
  m.set("role", role);
  m.set("content", content);
  return tmpl::Value(std::move(m));
}

// The globals transformers' apply_chat_template passes, with a small chat
// and one tool.
const tmpl::Dict& chat_globals() {
  static const tmpl::Dict globals = [] {
    tmpl::Dict g;
    g.set("messages", tmpl::List{message("system", "Be brief."), message("user", "Hi"),
                                 message("assistant", "Hello!"), message("user", "Weather?")});
    tmpl::Dict params;
    params.set("type", "object");
    tmpl::Dict fn;
    fn.set("name", "get_weather");
    fn.set("description", "Weather by city");
    fn.set("parameters", tmpl::Value(std::move(params)));
    tmpl::Dict tool;
    tool.set("type", "function");
    tool.set("function", tmpl::Value(std::move(fn)));
    g.set("tools", tmpl::List{tmpl::Value(std::move(tool))});
    g.set("add_generation_prompt", true);
    g.set("bos_token", "<s>");
    g.set("eos_token", "</s>");
    return g;
  }();
  return globals;
}

}  // namespace

int chat_template(const uint8_t* data, size_t size) {
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  Result<tmpl::Template> t = tmpl::Template::parse(source);
  if (!t.is_ok()) return 0;
  tmpl::RenderOptions options;
  options.strftime_now = [](const std::string&) { return std::string("01 Dec 2026"); };
  (void)t->render(chat_globals(), options);
  return 0;
}

}  // namespace larder::fuzz
