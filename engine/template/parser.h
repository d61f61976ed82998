// Jinja parser (engine/template): template text -> statement tree.
//
// Statements: text, {{ expr }}, if/elif/else, for (tuple targets, inline
// "if" filter, else, loop.*), set (name, tuple, ns.attr, block set), macro,
// break/continue (jinja2.ext.loopcontrols, which transformers enables),
// generation/endgeneration (transformers' AssistantTracker: rendered as its
// body), raw, comments. Anything else ({% include %}, {% extends %},
// {% call %}, {% filter %}, ...) is rejected at parse time, as are unknown
// filters and tests (Jinja2 also rejects those when compiling).
#pragma once

#include <string_view>

#include "engine/template/ast.h"

namespace larder::tmpl {

// Throws TemplateError (message names the construct; line is set).
Body parse_template(std::string_view source);

// Names the interpreter implements (filters.cpp).
bool is_known_filter(std::string_view name);
bool is_known_test(std::string_view name);

}  // namespace larder::tmpl
