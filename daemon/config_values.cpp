// Converting config values between TOML nodes, command-line text and the
// schema's Value (daemon/config_schema.h).
#include <cerrno>
#include <charconv>
#include <cstdlib>

#include "daemon/byte_size.h"
#include "daemon/config_schema.h"
#include "daemon/duration.h"
#include "daemon/toml_text.h"

namespace larder::config_schema {
namespace {

Status bad(std::string detail = "") { return Status::invalid_argument(std::move(detail)); }

}  // namespace

// Converts a TOML node to the spec's kind. On a type mismatch returns a
// non-OK Status whose message says what was found.
Result<Value> value_from_node(const KeySpec& spec, const toml::node& node) {
  Value v;
  switch (spec.kind) {
    case Kind::kInt:
      if (!node.is_integer()) return bad(std::string("got ") + type_name(node));
      v.i = node.as_integer()->get();
      return v;
    case Kind::kFloat:
      if (node.is_integer()) v.f = double(node.as_integer()->get());
      else if (node.is_floating_point()) v.f = node.as_floating_point()->get();
      else return bad(std::string("got ") + type_name(node));
      return v;
    case Kind::kString:
      if (!node.is_string()) return bad(std::string("got ") + type_name(node));
      v.s = node.as_string()->get();
      // Found in hostile testing: "\u0000" in a path cut it short there
      // (the C calls stop at a NUL), so another file or directory was used.
      if (v.s.find('\0') != std::string::npos) return bad("a string holding a NUL character (\\u0000)");
      return v;
    case Kind::kBool:
      if (!node.is_boolean()) return bad(std::string("got ") + type_name(node));
      v.b = node.as_boolean()->get();
      return v;
    case Kind::kDuration:
      if (node.is_integer()) {
        v.i = node.as_integer()->get();
        if (v.i < 0) return bad("negative");
        return v;
      }
      if (node.is_string()) {
        LARDER_ASSIGN_OR_RETURN(v.i, parse_duration(node.as_string()->get()));
        return v;
      }
      return bad(std::string("got ") + type_name(node));
    case Kind::kStringList: {
      const toml::array* array = node.as_array();
      if (array == nullptr) return bad(std::string("got ") + type_name(node));
      for (const toml::node& element : *array) {
        if (!element.is_string()) return bad(std::string("got an array holding ") + type_name(element));
        v.list.push_back(element.as_string()->get());
        if (v.list.back().find('\0') != std::string::npos) {
          return bad("an array holding a string with a NUL character (\\u0000)");
        }
      }
      return v;
    }
    case Kind::kSize:
      if (node.is_integer()) {
        v.i = node.as_integer()->get();
        if (v.i < 0) return bad("negative");
        // The limit of the string form too, so that --print-config's output
        // reads back (found in hostile testing: 2^63 - 1 passed as an
        // integer, and its printed "9223372036854775807B" was refused).
        if (v.i > kMaxByteSize) return bad("too large (the limit is 2^62 bytes)");
        return v;
      }
      if (node.is_string()) {
        LARDER_ASSIGN_OR_RETURN(v.i, parse_byte_size(node.as_string()->get()));
        return v;
      }
      return bad(std::string("got ") + type_name(node));
  }
  return bad();
}

// Converts command-line text to the spec's kind.
Result<Value> value_from_text(const KeySpec& spec, std::string_view text) {
  Value v;
  switch (spec.kind) {
    case Kind::kInt: {
      const char* end = text.data() + text.size();
      auto [ptr, ec] = std::from_chars(text.data(), end, v.i);
      if (ec != std::errc() || ptr != end || text.empty()) return bad("not an integer");
      return v;
    }
    case Kind::kFloat: {
      std::string s(text);
      char* end = nullptr;
      errno = 0;
      v.f = std::strtod(s.c_str(), &end);
      if (s.empty() || end != s.c_str() + s.size() || errno == ERANGE) return bad("not a number");
      return v;
    }
    case Kind::kString:
      v.s = std::string(text);
      return v;
    case Kind::kBool:
      if (text == "true" || text == "1") v.b = true;
      else if (text == "false" || text == "0") v.b = false;
      else return bad("not true or false");
      return v;
    case Kind::kDuration: {
      LARDER_ASSIGN_OR_RETURN(v.i, parse_duration(text));
      return v;
    }
    case Kind::kSize: {
      LARDER_ASSIGN_OR_RETURN(v.i, parse_byte_size(text));
      return v;
    }
    case Kind::kStringList: {
      // "a, b,c" -> {"a", "b", "c"}; "" -> {}.
      std::string_view rest = text;
      while (!rest.empty()) {
        const size_t comma = rest.find(',');
        std::string_view item = rest.substr(0, comma);
        while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
        while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
        if (!item.empty()) v.list.emplace_back(item);
        if (comma == std::string_view::npos) break;
        rest.remove_prefix(comma + 1);
      }
      return v;
    }
  }
  return bad();
}


std::string format_value(const KeySpec& spec, const Value& v, bool redact) {
  switch (spec.kind) {
    case Kind::kInt: return std::to_string(v.i);
    case Kind::kFloat: return format_float(v.f);
    case Kind::kString: return toml_quote(redact && spec.secret && !v.s.empty() ? kRedacted : std::string_view(v.s));
    case Kind::kBool: return v.b ? "true" : "false";
    case Kind::kSize: return toml_quote(format_byte_size(v.i));
    case Kind::kDuration: return toml_quote(format_duration(v.i));
    case Kind::kStringList: {
      std::string out = "[";
      for (const std::string& e : v.list) {
        out += (out.size() > 1 ? ", " : "") + toml_quote(redact && spec.secret ? kRedacted : std::string_view(e));
      }
      return out + "]";
    }
  }
  return "";
}

}  // namespace larder::config_schema
