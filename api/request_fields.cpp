#include "api/request_fields.h"

#include <string>

namespace larder {

using namespace request_json;

namespace {

constexpr unsigned kChat = 1, kCompletion = 2, kBoth = kChat | kCompletion;

enum class Use { kRead, kIgnored };
// The JSON type an ignored field must have (read fields check their own).
enum class Kind { kAny, kString, kBool, kObject };

struct KnownField {
  const char* name;
  unsigned endpoints;  // kChat | kCompletion
  Use use;
  Kind kind = Kind::kAny;
};

// Every top-level field either endpoint takes. OpenAI's API reference for
// chat completions and (legacy) completions, plus llama.cpp's server
// extensions and vLLM's cache_salt. Keep the README's list of ignored fields
// in step with the kIgnored entries.
constexpr KnownField kKnownFields[] = {
    // The request itself.
    {"model", kBoth, Use::kRead},
    {"messages", kChat, Use::kRead},
    {"prompt", kCompletion, Use::kRead},
    {"stream", kBoth, Use::kRead},
    {"stream_options", kBoth, Use::kRead},
    // Length and stopping.
    {"max_tokens", kBoth, Use::kRead},
    {"max_completion_tokens", kBoth, Use::kRead},
    {"n_predict", kBoth, Use::kRead},  // llama.cpp's name for max_tokens
    {"stop", kBoth, Use::kRead},
    {"ignore_eos", kBoth, Use::kRead},
    // Sampling.
    {"temperature", kBoth, Use::kRead},
    {"top_p", kBoth, Use::kRead},
    {"top_k", kBoth, Use::kRead},
    {"min_p", kBoth, Use::kRead},
    {"presence_penalty", kBoth, Use::kRead},
    {"frequency_penalty", kBoth, Use::kRead},
    {"repeat_penalty", kBoth, Use::kRead},
    {"repeat_last_n", kBoth, Use::kRead},
    {"seed", kBoth, Use::kRead},
    {"logit_bias", kBoth, Use::kRead},
    {"n", kBoth, Use::kRead},
    {"best_of", kBoth, Use::kRead},
    // Constrained output and tools.
    {"grammar", kBoth, Use::kRead},
    {"json_schema", kBoth, Use::kRead},
    {"response_format", kBoth, Use::kRead},
    {"tools", kChat, Use::kRead},
    {"tool_choice", kChat, Use::kRead},
    {"parallel_tool_calls", kChat, Use::kRead},
    {"functions", kBoth, Use::kRead},
    {"function_call", kBoth, Use::kRead},
    // Token probabilities and the prompt echo.
    {"logprobs", kBoth, Use::kRead},
    {"top_logprobs", kBoth, Use::kRead},
    {"n_probs", kBoth, Use::kRead},
    {"echo", kBoth, Use::kRead},
    {"suffix", kBoth, Use::kRead},
    // The chat template and reasoning.
    {"chat_template_kwargs", kChat, Use::kRead},
    {"reasoning_format", kChat, Use::kRead},
    {"reasoning_effort", kBoth, Use::kRead},
    {"verbosity", kBoth, Use::kRead},
    // Tokens and caching.
    {"parse_special", kBoth, Use::kRead},
    {"return_tokens", kBoth, Use::kRead},
    {"cache_salt", kBoth, Use::kRead},
    // llama.cpp sampler and input options larder refuses by name
    // (kUnsupportedFields below) unless they hold their off
    // value; those fields are known to both endpoints, so that their off
    // value passes wherever a client sends it.
    {"mirostat", kBoth, Use::kRead},
    {"typical_p", kBoth, Use::kRead},
    {"tfs_z", kBoth, Use::kRead},
    {"dynatemp_range", kBoth, Use::kRead},
    {"xtc_probability", kBoth, Use::kRead},
    {"dry_multiplier", kBoth, Use::kRead},
    {"samplers", kBoth, Use::kRead},
    {"image_data", kBoth, Use::kRead},
    {"lora", kBoth, Use::kRead},
    {"audio", kBoth, Use::kRead},
    {"modalities", kBoth, Use::kRead},
    {"web_search_options", kBoth, Use::kRead},
    // Accepted and ignored on purpose: nothing they ask for changes the answer.
    {"user", kBoth, Use::kIgnored, Kind::kString},               // end-user id for abuse monitoring
    {"safety_identifier", kBoth, Use::kIgnored, Kind::kString},  // the same, its newer name
    {"metadata", kBoth, Use::kIgnored, Kind::kObject},           // tags for stored completions
    {"store", kBoth, Use::kIgnored, Kind::kBool},                // nothing is stored
    {"service_tier", kBoth, Use::kIgnored, Kind::kString},       // one tier
    {"prompt_cache_key", kBoth, Use::kIgnored, Kind::kString},   // larder's prefix cache needs no key
    {"prompt_cache_retention", kBoth, Use::kIgnored, Kind::kString},
    {"cache_prompt", kBoth, Use::kIgnored, Kind::kBool},         // llama.cpp: cached KV gives the same output
    {"prediction", kChat, Use::kIgnored, Kind::kObject},         // a speed hint: no speculative decoding
};

const KnownField* find_field(std::string_view name, RequestEndpoint endpoint) {
  const unsigned bit = endpoint == RequestEndpoint::kChat ? kChat : kCompletion;
  for (const KnownField& f : kKnownFields) {
    if ((f.endpoints & bit) != 0 && name == f.name) return &f;
  }
  return nullptr;
}

bool has_kind(const json& v, Kind kind) {
  switch (kind) {
    case Kind::kString: return v.is_string();
    case Kind::kBool: return v.is_boolean();
    case Kind::kObject: return v.is_object();
    case Kind::kAny: break;
  }
  return true;
}

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::kString: return "a string";
    case Kind::kBool: return "a boolean";
    case Kind::kObject: return "an object";
    case Kind::kAny: break;
  }
  return "any value";
}

// Fields of the OpenAI API or of llama.cpp's server that larder does not
// implement yet. Each is refused with a 400 naming it when it asks for
// something (a value other than its "off" value), rather than being ignored.
struct UnsupportedField {
  const char* name;
  bool (*is_off)(const json& v);  // the value changes nothing
  const char* what;               // completes "'<name>' is not supported: ..."
};

bool is_number(const json& v, double off) { return v.is_number() && v.get<double>() == off; }
bool never_off(const json&) { return false; }

const UnsupportedField kUnsupportedFields[] = {
  {"suffix", is_empty_string, "no fill-in-the-middle suffix yet"},
  {"best_of", [](const json& v) { return is_number(v, 1); }, "only best_of = 1"},
  {"functions", never_off, "the legacy function-calling fields are not supported; use 'tools'"},
  {"function_call", never_off, "the legacy function-calling fields are not supported; use 'tool_choice'"},
  {"n_probs", [](const json& v) { return is_number(v, 0); },
   "llama.cpp's probability format is not offered; use 'logprobs' with 'top_logprobs' (chat) or 'logprobs': N (completions)"},
  {"reasoning_effort", never_off, "no reasoning effort control"},
  {"verbosity", [](const json& v) { return v == "medium"; }, "only the model's own verbosity (\"medium\")"},
  {"web_search_options", never_off, "no web search"},
  {"mirostat", [](const json& v) { return is_number(v, 0); }, "no mirostat sampling"},
  {"typical_p", [](const json& v) { return is_number(v, 1); }, "no locally typical sampling"},
  {"tfs_z", [](const json& v) { return is_number(v, 1); }, "no tail-free sampling"},
  {"dynatemp_range", [](const json& v) { return is_number(v, 0); }, "no dynamic temperature"},
  {"xtc_probability", [](const json& v) { return is_number(v, 0); }, "no XTC sampling"},
  {"dry_multiplier", [](const json& v) { return is_number(v, 0); }, "no DRY sampling"},
  {"samplers", never_off, "the sampler chain is fixed (penalties, temperature, top-k, top-p, min-p)"},
  {"audio", never_off, "no audio output"},
  {"modalities", [](const json& v) { return v.is_array() && v.size() == 1 && v[0] == "text"; }, "text output only"},
  {"image_data", is_empty_object, "no image input"},
  {"lora", is_empty_object, "no LoRA adapters"},
};

}  // namespace

bool is_known_field(std::string_view name, RequestEndpoint endpoint) { return find_field(name, endpoint) != nullptr; }

std::optional<ApiError> check_known_fields(const json& obj, RequestEndpoint endpoint) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    const std::string& key = it.key();
    const KnownField* f = find_field(key, endpoint);
    if (f == nullptr) {
      // The key as JSON text: it may hold anything (quotes, control bytes).
      std::string shown = show(json(key));
      shown = shown.substr(1, shown.size() - 2);  // without the quotes
      if (shown.size() > 128) shown = shown.substr(0, 128) + "...";
      return ApiError::invalid("Unrecognized request argument supplied: " + shown,
                               key.size() <= 128 ? key : key.substr(0, 128));
    }
    if (f->use == Use::kIgnored && !it->is_null() && !has_kind(*it, f->kind)) {
      return ApiError::invalid("'" + key + "' must be " + kind_name(f->kind), key);
    }
  }
  return std::nullopt;
}

std::optional<ApiError> refuse_unsupported(const json& obj) {
  for (const UnsupportedField& f : kUnsupportedFields) {
    const json* v = field(obj, f.name);
    if (v && !f.is_off(*v)) {
      std::string message(1, '\'');  // appended: GCC 12 warns falsely (-Wrestrict) on "'" + ...
      message += f.name;
      message += "' is not supported: ";
      message += f.what;
      return ApiError::invalid(message, f.name);
    }
  }
  return std::nullopt;
}

}  // namespace larder
