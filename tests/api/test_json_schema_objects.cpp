// JSON Schema objects -> GBNF: which property subsets the grammar accepts
// (enumerated: a subset is valid exactly when it holds every required
// property, written in schema order with one comma between properties),
// objects with thousands of optional properties, the size limits, and
// random walks under the token mask whose documents validate.
#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "api/json_schema_grammar.h"
#include "engine/grammar/token_mask.h"
#include "tests/grammar/grammar_test_util.h"

using namespace larder;
using namespace larder::testing;
using json = nlohmann::ordered_json;

namespace {

// {"type": "object", "properties": {"p0": <value>, ...}, "required": [...]}.
json object_schema(size_t n, const std::vector<bool>& required, const json& value = {{"type", "integer"}}) {
  json props = json::object();
  json req = json::array();
  for (size_t i = 0; i < n; ++i) {
    std::string name = "p";  // appended, not "p" + ...: GCC 12's false -Wrestrict
    name += std::to_string(i);
    props[name] = value;
    if (required[i]) req.push_back(name);
  }
  return {{"type", "object"}, {"properties", props}, {"required", req}, {"additionalProperties", false}};
}

std::shared_ptr<CompiledGrammar> grammar_of(const json& schema) {
  Result<std::string> gbnf = json_schema_to_gbnf(schema);
  INFO(gbnf.status().to_string());
  REQUIRE(gbnf.is_ok());
  return compile(*gbnf);
}

// The object with properties `ids` in this order, value i for p<i>;
// `sep` between properties, `pad` inside the braces.
std::string object_text(const std::vector<size_t>& ids, const std::string& sep = ",", const std::string& pad = "") {
  if (ids.empty()) return "{" + pad + "}";
  std::string out = "{" + pad;
  for (size_t k = 0; k < ids.size(); ++k) {
    if (k) out += sep;
    out += "\"p" + std::to_string(ids[k]) + "\":" + std::to_string(ids[k]);
  }
  return out + pad + "}";
}

}  // namespace

TEST_CASE("json schema objects: every property subset, for every required pattern of up to 6 properties",
          "[api][schema]") {
  for (size_t n = 1; n <= 6; ++n) {
    for (uint32_t req_bits = 0; req_bits < (1u << n); ++req_bits) {
      std::vector<bool> required(n);
      for (size_t i = 0; i < n; ++i) required[i] = (req_bits >> i) & 1;
      auto g = grammar_of(object_schema(n, required));
      size_t n_accepted = 0;
      for (uint32_t subset = 0; subset < (1u << n); ++subset) {
        std::vector<size_t> ids;
        for (size_t i = 0; i < n; ++i) {
          if ((subset >> i) & 1) ids.push_back(i);
        }
        const bool valid = (subset & req_bits) == req_bits;
        INFO("n " << n << " required " << req_bits << " subset " << subset);
        CHECK(accepts(*g, object_text(ids)) == valid);
        CHECK(accepts(*g, object_text(ids, ", ", " ")) == valid);
        n_accepted += accepts(*g, object_text(ids)) ? 1 : 0;
        if (ids.size() >= 2) {
          std::vector<size_t> reversed(ids.rbegin(), ids.rend());
          CHECK_FALSE(accepts(*g, object_text(reversed)));          // out of order
          CHECK_FALSE(accepts(*g, object_text(ids, ",,")));         // two commas
          CHECK_FALSE(accepts(*g, object_text(ids, "")));           // none
          std::vector<size_t> twice = ids;
          twice.insert(twice.begin() + 1, ids[0]);
          CHECK_FALSE(accepts(*g, object_text(twice)));             // a property twice
        }
        if (!ids.empty()) {
          const std::string text = object_text(ids);
          CHECK_FALSE(accepts(*g, "{," + text.substr(1)));                              // leading comma
          CHECK_FALSE(accepts(*g, text.substr(0, text.size() - 1) + ",}"));             // trailing comma
        }
      }
      // 2^(number of optional properties) subsets are valid.
      const size_t n_optional = n - size_t(__builtin_popcount(req_bits));
      CHECK(n_accepted == (size_t(1) << n_optional));
    }
  }
}

TEST_CASE("json schema objects: thousands of optional properties build and accept sampled objects", "[api][schema]") {
  // The matcher's state after a comma holds one reading per property that
  // may still come, so an object costs about (its properties) x (the
  // schema's): the samples here hold a few properties each.
  std::mt19937 rng(7);
  for (size_t n : {2000, 5000}) {
    INFO("n " << n);
    auto g = grammar_of(object_schema(n, std::vector<bool>(n, false)));
    CHECK(accepts(*g, "{}"));
    CHECK(accepts(*g, object_text({0})));
    CHECK(accepts(*g, object_text({n - 1})));
    CHECK(accepts(*g, object_text({0, n - 1})));
    CHECK_FALSE(accepts(*g, object_text({n - 1, 0})));
    CHECK_FALSE(accepts(*g, object_text({7, 7})));
    CHECK_FALSE(accepts(*g, "{\"p" + std::to_string(n) + "\":1}"));  // not a property
    for (int sample = 0; sample < 8; ++sample) {
      std::vector<size_t> ids;
      for (int k = 0; k < 12; ++k) ids.push_back(rng() % n);
      std::sort(ids.begin(), ids.end());
      ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
      CHECK(accepts(*g, object_text(ids, sample % 2 ? ", " : ",", sample % 3 ? "" : " ")));
      if (ids.size() >= 2) {
        std::swap(ids[0], ids[1]);
        CHECK_FALSE(accepts(*g, object_text(ids)));
      }
    }
  }
  {
    // All 2000 of them, in order.
    const size_t n = 2000;
    auto g = grammar_of(object_schema(n, std::vector<bool>(n, false)));
    std::vector<size_t> all(n);
    for (size_t i = 0; i < n; ++i) all[i] = i;
    CHECK(accepts(*g, object_text(all)));
  }
  // Required ones spread among them: each must come.
  const size_t n = 3000;
  std::vector<bool> required(n, false);
  for (size_t i = 0; i < n; i += 7) required[i] = true;
  auto g = grammar_of(object_schema(n, required));
  std::vector<size_t> req_ids;
  for (size_t i = 0; i < n; i += 7) req_ids.push_back(i);
  CHECK(accepts(*g, object_text(req_ids)));
  std::vector<size_t> plus = req_ids;
  plus.push_back(n - 1);
  CHECK(accepts(*g, object_text(plus)));
  std::vector<size_t> missing = req_ids;
  missing.erase(missing.begin() + long(missing.size() / 2));
  CHECK_FALSE(accepts(*g, object_text(missing)));
  CHECK_FALSE(accepts(*g, "{}"));
}

TEST_CASE("json schema objects: over 10000 properties in all, or a grammar over 4 MiB, is refused", "[api][schema]") {
  const size_t n = 10001;
  Result<std::string> big = json_schema_to_gbnf(object_schema(n, std::vector<bool>(n, false)));
  REQUIRE_FALSE(big.is_ok());
  CHECK(big.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(big.status().message(), Catch::Contains("more than 10000 properties"));
  // Two objects of 5001 each: 10002 in all.
  const json inner = object_schema(5001, std::vector<bool>(5001, false));
  const json outer = {{"type", "object"}, {"properties", {{"x", inner}, {"y", inner}}}};
  Result<std::string> nested = json_schema_to_gbnf(outer);
  REQUIRE_FALSE(nested.is_ok());
  CHECK_THAT(nested.status().message(), Catch::Contains("more than 10000 properties"));
  // An enum of 200000 strings of 30 bytes: a 6 MB grammar.
  json values = json::array();
  for (int i = 0; i < 200000; ++i) values.push_back("value-" + std::to_string(1000000000 + i) + "-abcdefghijklm");
  Result<std::string> e = json_schema_to_gbnf(json{{"enum", values}});
  REQUIRE_FALSE(e.is_ok());
  CHECK_THAT(e.status().message(), Catch::Contains("4 MiB"));
}

TEST_CASE("json schema objects: random walks under the token mask give valid objects", "[api][schema]") {
  // 24 properties of several kinds, every third required, one nested
  // object with optional properties of its own.
  json props = json::object();
  json req = json::array();
  const std::vector<json> kinds = {
      {{"type", "integer"}},
      {{"type", "string"}, {"maxLength", 3u}},
      {{"type", "boolean"}},
      {{"enum", {"x", "y"}}},
      {{"type", "object"},
       {"properties", {{"a", {{"type", "null"}}}, {"b", {{"type", "integer"}}}, {"c", {{"type", "boolean"}}}}}}};
  const size_t n = 24;
  for (size_t i = 0; i < n; ++i) {
    std::string name = "k";
    name += std::to_string(i);
    props[name] = kinds[i % kinds.size()];
    if (i % 3 == 1) req.push_back(name);
  }
  const json schema = {{"type", "object"}, {"properties", props}, {"required", req}};
  auto g = grammar_of(schema);
  std::vector<std::string> vocab;
  // Printable ASCII but the backslash (no escapes: a string's length is its bytes).
  for (int c = 0x20; c < 0x7F; ++c) {
    if (c != '\\') vocab.push_back(std::string(1, char(c)));
  }
  for (const char* t : {"\"k1\":", "\"k2", "true", "null", ",\"", "{\"", "\"}", "12", "}"}) vocab.push_back(t);
  TokenTrie trie(vocab);
  std::mt19937 rng(11);
  int n_docs = 0;
  for (int run = 0; run < 120; ++run) {
    GrammarState st = grammar_start(*g);
    std::string text;
    for (int step = 0; step < 600 && !(grammar_can_end(st) && grammar_is_done(st)); ++step) {
      const TokenMask m = compute_token_mask(*g, trie, st);
      std::vector<size_t> ok;
      for (size_t id = 0; id < vocab.size(); ++id) {
        if (mask_allows(m, int32_t(id))) ok.push_back(id);
      }
      REQUIRE_FALSE(ok.empty());  // never a dead end before the end
      const std::string& t = vocab[ok[rng() % ok.size()]];
      text += t;
      for (char c : t) st = grammar_advance(*g, st, uint8_t(c));
      REQUIRE_FALSE(st.empty());
    }
    if (!grammar_can_end(st)) continue;  // ran out of steps
    INFO(text);
    const nlohmann::ordered_json doc = nlohmann::ordered_json::parse(text, nullptr, false);
    REQUIRE_FALSE(doc.is_discarded());
    REQUIRE(doc.is_object());
    int last = -1;
    std::vector<bool> seen(n, false);
    for (const auto& [key, v] : doc.items()) {
      REQUIRE(key.size() >= 2);
      REQUIRE(key[0] == 'k');
      const int i = std::stoi(key.substr(1));
      REQUIRE(i > last);  // schema order, no repeats
      last = i;
      seen[size_t(i)] = true;
      switch (i % 5) {
        case 0: CHECK(v.is_number_integer()); break;
        case 1: CHECK((v.is_string() && v.get<std::string>().size() <= 3)); break;
        case 2: CHECK(v.is_boolean()); break;
        case 3: CHECK((v == "x" || v == "y")); break;
        case 4: {
          REQUIRE(v.is_object());
          std::string order;
          for (const auto& [k2, v2] : v.items()) order += k2;
          CHECK((order.empty() || order == "a" || order == "b" || order == "c" || order == "ab" ||
                 order == "ac" || order == "bc" || order == "abc"));
          break;
        }
      }
    }
    for (size_t i = 1; i < n; i += 3) CHECK(seen[i]);
    ++n_docs;
  }
  CHECK(n_docs >= 60);
}

TEST_CASE("json schema objects: 60000 refs into 60000 $defs convert (each ref found by an index)", "[api][schema]") {
  // Each ref used to scan the $defs object for its name: 60000^2 / 2
  // comparisons, over a minute. The bound is a generous upper limit.
  const int n = 60000;
  json defs = json::object();
  json::object_t::Container& items = defs.get_ref<json::object_t&>();  // appended: no scan per key
  json alts = json::array();
  for (int i = 0; i < n; ++i) {
    std::string name = "d";
    name += std::to_string(i);
    items.emplace_back(name, i % 2 ? json{{"type", "boolean"}} : json{{"const", i}});
    alts.push_back({{"$ref", "#/$defs/" + name}});
  }
  const json schema = {{"$defs", defs}, {"anyOf", alts}};
  const auto start = std::chrono::steady_clock::now();
  Result<std::string> gbnf = json_schema_to_gbnf(schema);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  REQUIRE(gbnf.is_ok());
  CHECK(seconds < 30.0);
  auto g = compile(*gbnf);
  CHECK(accepts(*g, "true"));
  CHECK(accepts(*g, "59998"));
  CHECK_FALSE(accepts(*g, "59999"));  // d59999 is a boolean; no const is odd
  CHECK_FALSE(accepts(*g, "null"));
}
