// The grammar that forces an answer to be tool calls (tool_choice
// "required", or naming a function): the call objects in the syntax the
// model's chat template uses (api/tool_calls.h), each one's arguments valid
// under its function's "parameters" schema (api/json_schema_grammar.h).
//
//   kHermes      <tool_call>\n{"name": N, "arguments": {...}}\n</tool_call>,
//                one or more blocks (one when !parallel); 0 to 3 spaces,
//                tabs or newlines around the call
//   kLlama3Json  {"name": N, "parameters": {...}}: one call (the format has
//                no list)
//   kMistral     [{"name": N, "arguments": {...}}, ...] (its [TOOL_CALLS]
//                tag is a control token that the parser does not need)
//   kGeneric     {"name": N, "arguments": {...}}: one call
//   kJsonEnvelope {"tool_call": {"name": N, "arguments": {...}}} (one call),
//                or when parallel {"tool_calls": [call, ...]} (one or more)
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/generation.h"
#include "engine/grammar/grammar.h"
#include "storage/status.h"

namespace larder {

// tools: the request's "tools" array (keys in the client's order). forced:
// the one function to call ("" : any of them). Errors (kInvalidArgument):
// a function's parameters use a schema keyword the grammar cannot enforce
// (naming the tool), kNone syntax.
Result<std::string> tool_call_gbnf(ToolCallSyntax syntax, const nlohmann::ordered_json& tools,
                                   const std::string& forced, bool parallel);

// tool_choice "auto": where the calls' grammar (tool_call_gbnf with no
// forced function) starts to apply, as llama.cpp's server constrains them
// lazily. The model writes text freely; once it opens a call, the call is
// kept inside the grammar, so its arguments are valid JSON under the tool's
// schema.
//   kHermes      "<tool_call>", anywhere in the answer
//   kLlama3Json  {"name" (or { "name") opening the answer
//   kGeneric     the same (a bare call; calls in tags are not constrained)
//   kMistral     "[TOOL_CALLS]" (the grammar starts after it) or [{"name",
//                opening the answer
//   kJsonEnvelope, kNone: none (not constrained)
std::vector<GrammarTrigger> tool_call_triggers(ToolCallSyntax syntax);

// The compiled grammars of recent tool sets: agents send the same tools
// with every turn, and a schema's grammar can take long to compile (found
// in hostile testing: 0.4 s a request for tools with long patterns, under
// tool_choice "auto"). Thread-safe; the last kEntries sets are kept.
class ToolGrammarCache {
 public:
  static constexpr size_t kEntries = 16;
  // tool_call_gbnf(syntax, tools, forced, parallel), parsed and compiled,
  // or the error of whichever step failed (kInvalidArgument): the client's
  // schemas are the cause.
  Result<std::shared_ptr<const CompiledGrammar>> get(ToolCallSyntax syntax, const nlohmann::ordered_json& tools,
                                                     const std::string& forced, bool parallel);
  int64_t n_compiled() const;  // misses so far (tests)

 private:
  struct Entry {
    std::string key;
    Result<std::shared_ptr<const CompiledGrammar>> grammar;
    uint64_t last_use = 0;
  };
  mutable std::mutex mu_;
  std::vector<Entry> entries_;  // guarded by mu_
  uint64_t tick_ = 0;           // guarded by mu_
  int64_t n_compiled_ = 0;      // guarded by mu_
};

}  // namespace larder
