// Jinja lexing (engine/template): splits a template into text, {{ }} and
// {% %} chunks applying whitespace control, and turns the inside of a tag
// into expression tokens.
//
// Whitespace rules are Jinja2's with the options Hugging Face's
// apply_chat_template uses (transformers: trim_blocks=True,
// lstrip_blocks=True): a "-" inside a delimiter strips all whitespace on
// that side; "+" turns the option off for that tag; otherwise the first
// newline after a block or comment tag is dropped, and spaces/tabs between a
// line start and a block or comment tag are dropped.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace larder::tmpl {

// Internal error of the template module: never leaves engine/template (the
// public Template API turns it into a Status).
struct TemplateError : std::runtime_error {
  TemplateError(const std::string& message, int line) : std::runtime_error(message), line(line) {}
  int line;  // 1-based; 0 when unknown
};

enum class ChunkKind { kText, kExpr, kStmt };

struct Chunk {
  ChunkKind kind;
  std::string text;  // text, or the inside of the tag (delimiters and -/+ removed)
  int line;          // line where the chunk starts
};

// Throws TemplateError on an unterminated tag, comment or raw block.
std::vector<Chunk> lex_template(std::string_view source);

enum class TokKind { kName, kInt, kFloat, kString, kOp, kEnd };

struct Token {
  TokKind kind;
  std::string text;  // name, operator, or the unescaped string value
  int64_t int_value = 0;
  double float_value = 0;
};

// Throws TemplateError on an unterminated string or an unknown character.
std::vector<Token> lex_expression(std::string_view text, int line);

}  // namespace larder::tmpl
