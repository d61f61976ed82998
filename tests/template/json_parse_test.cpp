// parse_json_ordered (engine/template/json_parse.h): the value
// nlohmann::ordered_json::parse gives, on hand-picked and random documents
// (repeated keys, nesting, errors), with a number of key comparisons linear
// in the keys (ordered_json's own parser compares each new key with every
// key before it: k (k - 1) / 2 for an object of k keys).
#include <random>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "engine/template/json_parse.h"

using namespace larder;
using J = nlohmann::ordered_json;

namespace {

void check_same(const std::string& text) {
  INFO(text);
  const J want = J::parse(text, nullptr, /*allow_exceptions=*/false);
  const J got = parse_json_ordered(text);
  REQUIRE(got.is_discarded() == want.is_discarded());
  if (!want.is_discarded()) CHECK(got.dump() == want.dump());
}

// A random document over a small key alphabet, so keys repeat.
std::string random_doc(std::mt19937& rng, int depth) {
  const int kind = int(rng() % (depth > 3 ? 4 : 6));
  switch (kind) {
    case 0: return std::to_string(int(rng() % 2000) - 1000);
    case 1: return "\"s" + std::to_string(rng() % 5) + "\"";
    case 2: return rng() % 2 ? "true" : "null";
    case 3: return "1.5e" + std::to_string(rng() % 20);
    case 4: {
      std::string out = "[";
      const int n = int(rng() % 5);
      for (int i = 0; i < n; ++i) out += (i ? "," : "") + random_doc(rng, depth + 1);
      return out + "]";
    }
    default: {
      std::string out = "{";
      const int n = int(rng() % 14);  // past the 8 keys where the index starts
      for (int i = 0; i < n; ++i) {
        out += (i ? ", " : " ") + std::string("\"k") + std::to_string(rng() % 11) + "\": " + random_doc(rng, depth + 1);
      }
      return out + "}";
    }
  }
}

}  // namespace

TEST_CASE("parse_json_ordered gives ordered_json::parse's value", "[template][json]") {
  for (const char* text :
       {"{}", "[]", "0", "-0", "\"x\"", "  {\"b\": 1, \"a\": 2}  ", "{\"a\": 1, \"b\": 2, \"a\": 3}",
        "{\"k\": {\"k\": {\"k\": 1}}, \"k\": 2}", "[1, {\"x\": [{}], \"x\": null}, \"\\u00e9\\n\"]",
        "{\"a\":1,\"b\":2,\"c\":3,\"d\":4,\"e\":5,\"f\":6,\"g\":7,\"h\":8,\"i\":9,\"b\":20,\"j\":10,\"i\":90}",
        "18446744073709551615", "-9223372036854775808", "1e308", "", "{", "[1,]", "{\"a\" 1}", "1 2", "nul",
        "{\"a\":1e999}", "\"\\ud800\"", "[\"\x01\"]", "{\"a\":1}}"}) {
    check_same(text);
  }
  std::mt19937 rng(31);
  for (int i = 0; i < 500; ++i) check_same(random_doc(rng, 0));
}

TEST_CASE("parse_json_ordered compares each key a bounded number of times", "[template][json]") {
  // One object of 100000 keys, and 1000 objects of 100 keys in an array.
  std::string big = "{";
  for (int i = 0; i < 100000; ++i) big += (i ? ",\"p" : "\"p") + std::to_string(i) + "\":{\"type\":\"string\"}";
  big += "}";
  JsonParseCounters c;
  const J j = parse_json_ordered(big, &c);
  REQUIRE(j.size() == 100000);
  CHECK(j.back() == J{{"type", "string"}});
  CHECK(std::next(j.begin(), 54321).key() == "p54321");
  // Each object: up to 0 + 1 + ... + 7 comparisons for its first 8 keys,
  // one probe of the index for each later one, and the inner objects' keys.
  CHECK(c.key_compares <= 100000 + 28 + 100000);
  std::string many = "[";
  for (int o = 0; o < 1000; ++o) {
    many += o ? ",{" : "{";
    for (int i = 0; i < 100; ++i) many += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":" + std::to_string(i);
    many += "}";
  }
  many += "]";
  JsonParseCounters c2;
  REQUIRE(parse_json_ordered(many, &c2).size() == 1000);
  CHECK(c2.key_compares <= 1000 * (100 + 28));
}
