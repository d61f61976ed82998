// A tool whose parameters have 150000 properties renders through Qwen 2.5's
// real template (`tool | tojson`) as Python's json.dumps writes it, keys in
// the client's order. Reading the tools into template values parsed them
// with ordered_json, whose object keeps its keys in a vector and scans it
// for every new key: 150000^2 / 2 comparisons, over a minute, on the render
// pool. The bound below is a generous upper limit, not a speed measurement.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "engine/tokenizer/chat_format.h"
#include "tests/support/fixed_clock.h"

namespace larder {

TEST_CASE("a tool with 150000 properties renders in time linear in its size", "[chat][tools]") {
  const auto path = std::filesystem::path(__FILE__).parent_path().parent_path() / "template" / "fixtures" /
                    "templates" / "qwen2_5.jinja";
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  auto f = ChatFormat::from_jinja(ss.str(), "", "<|im_end|>");
  REQUIRE(f.is_ok());
  f->set_render_options({larder::testing::fixed_strftime});
  // Compact JSON as a client sends it, and json.dumps' form (", ", ": ")
  // the template prints.
  const int n = 150000;
  std::string props_compact, props_python;
  for (int i = 0; i < n; ++i) {
    std::string name = "\"q";  // appended, not "..." + ...: GCC 12's false -Wrestrict
    name += std::to_string((i * 7919) % n);  // not in sorted order
    name += '"';
    if (i) {
      props_compact += ',';
      props_python += ", ";
    }
    props_compact += name;
    props_compact += R"(:{"type":"integer"})";
    props_python += name;
    props_python += R"(: {"type": "integer"})";
  }
  ChatRequest r;
  r.messages = {{"user", "Hi"}};
  r.tools_json = R"([{"type":"function","function":{"name":"wide","parameters":{"type":"object","properties":{)" +
                 props_compact + "}}}}]";
  const auto start = std::chrono::steady_clock::now();
  Result<std::string> out = f->render_request(r);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(out.status().to_string());
  REQUIRE(out.is_ok());
  const std::string want = R"({"type": "function", "function": {"name": "wide", "parameters": {"type": "object", "properties": {)" +
                           props_python + "}}}}";
  CHECK(out->find("<tools>\n" + want + "\n</tools>") != std::string::npos);
  CHECK(seconds < 30.0);
}

}  // namespace larder
