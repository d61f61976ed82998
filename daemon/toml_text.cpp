#include "daemon/toml_text.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace larder {

std::string toml_quote(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

std::string format_float(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  // The shortest text that reads back as f (10 -> "10", not "1e+01").
  char buf[40];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, f);
  std::string s = ec == std::errc() ? std::string(buf, end) : std::to_string(f);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

const char* type_name(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    default: return "a date/time";
  }
}

std::string show_node(const toml::node& node) {
  std::string s;
  if (const auto* str = node.as_string()) {
    s = toml_quote(str->get());  // toml++ would print 'literal' quotes
  } else if (const auto* array = node.as_array()) {
    s.push_back('[');  // (not s = "[": GCC 12 warns falsely, -Wrestrict)
    for (const toml::node& element : *array) {
      if (s.size() > 1) s += ", ";
      s += show_node(element);
    }
    s += "]";
  } else {
    std::ostringstream os;
    node.visit([&](auto&& n) { os << n; });
    s = os.str();
  }
  for (char& c : s) if (c == '\n') c = ' ';
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

std::string where(const toml::source_region& src) {
  if (src.begin.line == 0) return "";
  std::string file = src.path ? *src.path : "";
  return " (" + (file.empty() ? "" : file + " ") + "line " + std::to_string(src.begin.line) + ")";
}

}  // namespace larder
