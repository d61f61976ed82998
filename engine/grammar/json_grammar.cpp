#include "engine/grammar/json_grammar.h"

namespace larder {

namespace {

// A \u escape is a code point below U+D800 or past U+DFFF, or a surrogate
// pair: a lone surrogate is not a character (RFC 8259 section 8.2), and
// parsers refuse it (found in hostile testing: nlohmann refused a forced
// tool call's arguments, which then came back as content).
#define LARDER_JSON_RULES                                                                  \
  "value  ::= object | array | string | number | \"true\" | \"false\" | \"null\"\n"       \
  "object ::= \"{\" ws ( string ws \":\" ws value ws ( \",\" ws string ws \":\" ws value ws )* )? \"}\"\n" \
  "array  ::= \"[\" ws ( value ws ( \",\" ws value ws )* )? \"]\"\n"                        \
  "string ::= \"\\\"\" char* \"\\\"\"\n"                                                    \
  "char   ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" uhex )\n"                \
  "uhex   ::= [0-9a-cA-Ce-fE-F] hex{3} | [dD] [0-7] hex{2} | [dD] [89abAB] hex{2} \"\\\\u\" [dD] [c-fC-F] hex{2}\n" \
  "hex    ::= [0-9a-fA-F]\n"                                                                \
  "number ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,15} ) ( \".\" [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,2} )?\n" \
  "ws     ::= ( \" \" | \"\\n\" [ \\t]{0,20} )?\n"

}  // namespace

const std::string_view kJsonObjectGbnf = "root   ::= object\n" LARDER_JSON_RULES;
const std::string_view kJsonValueGbnf = "root   ::= value\n" LARDER_JSON_RULES;

#undef LARDER_JSON_RULES

}  // namespace larder
