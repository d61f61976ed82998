// ChatFormats of the real chat templates in tests/template/fixtures, for the
// tests that render conversations through them (header-only: only tests that
// link the tokenizer include it).
#pragma once

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/tokenizer/chat_format.h"
#include "tests/support/chat_models.h"
#include "tests/support/fixed_clock.h"

namespace larder::testing {

// The ChatFormat of templates/<name>.jinja with the bos_token / eos_token
// that templates.json gives it (as transformers passes them), rendering
// strftime_now with the fixed clock. A missing fixture or a template that
// does not parse fails the test (REQUIREd).
inline ChatFormat fixture_chat_format(const std::string& name) {
  const std::filesystem::path dir =
      std::filesystem::path(__FILE__).parent_path().parent_path() / "template" / "fixtures";
  std::ifstream specs_file(dir / "templates.json");
  REQUIRE(specs_file);
  for (const nlohmann::json& spec : nlohmann::json::parse(specs_file)) {
    if (spec["name"] != name) continue;
    Result<std::string> text = chat_template_fixture(name);
    REQUIRE(text.is_ok());
    auto format = ChatFormat::from_jinja(*text, spec["bos_token"].get<std::string>(), spec["eos_token"].get<std::string>());
    INFO(name << ": " << format.status().to_string());
    REQUIRE(format.is_ok());
    format->set_render_options({fixed_strftime});
    return std::move(format).value();
  }
  FAIL("no template fixture " << name);
  return {};
}

// f's rendering of `messages` with the generation prompt; a render error
// fails the test.
inline std::string render_ok(const ChatFormat& f, const std::vector<ChatMessage>& messages) {
  auto r = f.render(messages);
  INFO(r.status().to_string());
  REQUIRE(r.is_ok());
  return *r;
}

}  // namespace larder::testing
