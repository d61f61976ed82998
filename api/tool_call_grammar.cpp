#include "api/tool_call_grammar.h"

#include <algorithm>
#include <string>
#include <unordered_map>

#include "api/json_schema_grammar.h"

namespace larder {

Result<std::string> tool_call_gbnf(ToolCallSyntax syntax, const nlohmann::ordered_json& tools,
                                   const std::string& forced, bool parallel) {
  using ojson = nlohmann::ordered_json;
  if (syntax == ToolCallSyntax::kNone) return Status::invalid_argument("the model's template has no tool-call syntax");
  const char* args_key = syntax == ToolCallSyntax::kLlama3Json ? "parameters" : "arguments";
  // One schema for "a call of one of the functions": anyOf over them.
  ojson calls = ojson::array();
  // One budget for every tool's patterns, checked one by one and then together.
  DfaBudget budget{kSchemaDfaBudget};
  for (const ojson& t : tools) {
    const ojson& fn = t.at("function");
    const std::string name = fn.at("name").get<std::string>();
    if (!forced.empty() && name != forced) continue;
    ojson params = fn.contains("parameters") && fn.at("parameters").is_object() ? fn.at("parameters") : ojson::object();
    // The arguments are an object whatever else the schema says (found in
    // hostile testing: parameters {} or {"anyOf": [{"type": "string"}]}
    // let a forced call write a string, which was then answered as content).
    // Beside a $ref, "type" is not supported: the definition says it.
    if (!params.contains("type") && !params.contains("$ref")) params["type"] = "object";
    ojson call = {{"type", "object"},
                  {"properties", {{"name", {{"const", name}}}, {args_key, params}}},
                  {"required", {"name", args_key}},
                  {"additionalProperties", false}};
    // A function's own $defs stay reachable from its parameters.
    for (const char* defs : {"$defs", "definitions"}) {
      if (params.is_object() && params.contains(defs)) call[defs] = params[defs];
    }
    Result<std::string> check = json_schema_to_gbnf(call, &budget);
    if (!check.is_ok()) {
      // Places in the call's wrapper schema, said as places in the tool's parameters.
      std::string message = check.status().message();
      const std::string wrapper = "#/properties/" + std::string(args_key);
      for (size_t at = message.find(wrapper); at != std::string::npos; at = message.find(wrapper, at + 1)) {
        message.replace(at, wrapper.size(), "parameters #");
      }
      return Status::invalid_argument("tool \"" + name + "\": " + message);
    }
    calls.push_back(std::move(call));
  }
  if (calls.empty()) return Status::invalid_argument("no offered function is named \"" + forced + "\"");
  ojson schema = calls.size() == 1 ? calls[0] : ojson{{"anyOf", calls}};
  // $defs of several functions: merged at the top, where refs point.
  // A later function's definition of a name replaces an earlier one in its
  // place (as schema[defs][k] = v does); found by a hash index, since a
  // lookup in an ordered_json object scans its keys.
  for (const char* defs : {"$defs", "definitions"}) {
    ojson merged = ojson::object();
    ojson::object_t::Container& items = merged.get_ref<ojson::object_t&>();
    std::unordered_map<std::string, size_t> index;
    for (ojson& c : calls) {
      const auto d = c.find(defs);
      if (d == c.end() || !d->is_object()) continue;
      for (auto& [k, v] : d->items()) {
        const auto [it, fresh] = index.try_emplace(k, items.size());
        if (fresh) {
          items.emplace_back(k, v);
        } else {
          items[it->second].second = v;
        }
      }
    }
    if (!items.empty()) schema[defs] = std::move(merged);
  }
  std::string gbnf;
  LARDER_ASSIGN_OR_RETURN(gbnf, json_schema_to_gbnf(schema, &budget));
  // The converter's start rule becomes `call`; ours wraps it.
  const std::string head = "root ::= ";
  if (gbnf.rfind(head, 0) != 0) return Status::internal("tool call grammar: unexpected converter output");
  gbnf = "call ::= " + gbnf.substr(head.size());
  std::string root;
  switch (syntax) {
    case ToolCallSyntax::kHermes:
      // Up to 3 spaces, tabs or newlines around the call, as the parser
      // takes them (found in hostile testing: a lazy grammar fired by a
      // token "<tool_call>{" refused it, and the call went unchecked).
      root = "block ::= \"<tool_call>\" tcws call tcws \"</tool_call>\"\ntcws ::= [ \\t\\n]{0,3}\nroot ::= block";
      if (parallel) root += " ( \"\\n\" block )*";
      break;
    case ToolCallSyntax::kJsonEnvelope:
      root = parallel ? "root ::= \"{\\\"tool_calls\\\": [\" call ( \", \" call )* \"]}\""
                      : "root ::= \"{\\\"tool_call\\\": \" call \"}\"";
      break;
    case ToolCallSyntax::kMistral:
      root = "root ::= \"[\" call";
      if (parallel) root += " ( \", \" call )*";
      root += " \"]\"";
      break;
    default:  // kLlama3Json, kGeneric: one bare call object
      root = "root ::= call";
      break;
  }
  return root + "\n" + gbnf;
}

Result<std::shared_ptr<const CompiledGrammar>> ToolGrammarCache::get(ToolCallSyntax syntax,
                                                                     const nlohmann::ordered_json& tools,
                                                                     const std::string& forced, bool parallel) {
  std::string key = std::to_string(int(syntax)) + (parallel ? "p" : "s") + forced;
  key += '\0';
  key += tools.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (Entry& e : entries_) {
      if (e.key == key) {
        e.last_use = ++tick_;
        return e.grammar;
      }
    }
  }
  // Compiled outside the lock (two threads may both compile one set).
  Result<std::shared_ptr<const CompiledGrammar>> out = [&]() -> Result<std::shared_ptr<const CompiledGrammar>> {
    std::string gbnf;
    LARDER_ASSIGN_OR_RETURN(gbnf, tool_call_gbnf(syntax, tools, forced, parallel));
    Grammar g;
    LARDER_ASSIGN_OR_RETURN(g, parse_gbnf(gbnf));
    return compile_grammar(g);
  }();
  std::lock_guard<std::mutex> lock(mu_);
  ++n_compiled_;
  if (entries_.size() >= kEntries) {
    auto oldest = std::min_element(entries_.begin(), entries_.end(),
                                   [](const Entry& a, const Entry& b) { return a.last_use < b.last_use; });
    entries_.erase(oldest);
  }
  entries_.push_back(Entry{std::move(key), out, ++tick_});
  return out;
}

int64_t ToolGrammarCache::n_compiled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return n_compiled_;
}

std::vector<GrammarTrigger> tool_call_triggers(ToolCallSyntax syntax) {
  const GrammarTrigger bare_call[] = {{"{\"name\"", true, false}, {"{ \"name\"", true, false}};
  switch (syntax) {
    case ToolCallSyntax::kHermes: return {{"<tool_call>", false, false}};
    case ToolCallSyntax::kLlama3Json:
    case ToolCallSyntax::kGeneric: return {std::begin(bare_call), std::end(bare_call)};
    // The parser takes [TOOL_CALLS] only where the answer opens with it
    // (found in hostile testing: a tag mid-answer was forced into a call
    // that then came back as content).
    case ToolCallSyntax::kMistral: return {{"[TOOL_CALLS]", true, true}, {"[{\"name\"", true, false}};
    case ToolCallSyntax::kJsonEnvelope:
    case ToolCallSyntax::kNone: break;
  }
  return {};
}

}  // namespace larder
