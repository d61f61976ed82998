// Text forms of TOML values for the config loader: what dump_config writes
// and what error messages show. No config knowledge here.
#pragma once

#include <string>
#include <string_view>

#include <toml++/toml.h>

namespace larder {

// A TOML basic string: "..." with \" \\ \n \t \r and \uXXXX escapes.
std::string toml_quote(std::string_view s);

// Shortest decimal text that reads back as the same double; always a TOML
// float literal (has '.', 'e', "inf" or "nan").
std::string format_float(double f);

// "a string", "an integer", ... for "(got ...)" in messages.
const char* type_name(const toml::node& node);

// How the value looked in the file, for error messages: strings in "..."
// quotes, arrays as ["a", 1], clipped to 60 characters.
std::string show_node(const toml::node& node);

// " (FILE line N)" for a node parsed from a file, " (line N)" otherwise
// ("" without a position).
std::string where(const toml::source_region& src);

}  // namespace larder
