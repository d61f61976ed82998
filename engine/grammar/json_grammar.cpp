#include "engine/grammar/json_grammar.h"

namespace larder {

namespace {

#define LARDER_JSON_RULES                                                                  \
  "value  ::= object | array | string | number | \"true\" | \"false\" | \"null\"\n"       \
  "object ::= \"{\" ws ( string ws \":\" ws value ws ( \",\" ws string ws \":\" ws value ws )* )? \"}\"\n" \
  "array  ::= \"[\" ws ( value ws ( \",\" ws value ws )* )? \"]\"\n"                        \
  "string ::= \"\\\"\" char* \"\\\"\"\n"                                                    \
  "char   ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" hex hex hex hex )\n"   \
  "hex    ::= [0-9a-fA-F]\n"                                                                \
  "number ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,15} ) ( \".\" [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,2} )?\n" \
  "ws     ::= ( \" \" | \"\\n\" [ \\t]{0,20} )?\n"

}  // namespace

const std::string_view kJsonObjectGbnf = "root   ::= object\n" LARDER_JSON_RULES;
const std::string_view kJsonValueGbnf = "root   ::= value\n" LARDER_JSON_RULES;

#undef LARDER_JSON_RULES

}  // namespace larder
