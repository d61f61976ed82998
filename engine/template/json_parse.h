// Parsing JSON text into nlohmann::ordered_json in linear time.
//
// nlohmann's ordered_map finds a key by scanning every key before it, so
// ordered_json::parse spends O(k^2) key comparisons on an object of k keys
// (a tool schema with 30000 properties: seconds, and a request body of 8 MiB
// holds far more keys). parse_json_ordered builds the same value through
// nlohmann's SAX interface and finds repeated keys with a hash index.
#pragma once

#include <cstddef>
#include <string_view>

#include <nlohmann/json.hpp>

namespace larder {

// What a parse cost, for tests: key comparisons made to find a repeated key
// in an object (a probe of the hash index counts one).
struct JsonParseCounters {
  size_t key_compares = 0;
};

// The value ordered_json::parse(text, nullptr, false) gives: keys in their
// order (a key repeated in an object keeps its first place and takes its
// last value, as ordered_json's parser does), a discarded value
// (is_discarded()) when the text is not one JSON document. Iterative: no
// recursion on the nesting (callers still bound it, json_depth.h, since
// destroying a deep value recurses). O(text) time with O(1) key comparisons
// per key.
nlohmann::ordered_json parse_json_ordered(std::string_view text, JsonParseCounters* counters = nullptr);

}  // namespace larder
