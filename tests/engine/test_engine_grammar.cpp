// Constrained decoding through the engine on the real stories260K model:
// whatever the sampler draws, the output stays inside the grammar, and
// generation stops where the grammar ends. Outputs are checked by
// nlohmann::json's parser and by hand, not by the grammar matcher.
#include <algorithm>
#include <cmath>
#include <set>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "engine/grammar/json_grammar.h"
#include "tests/engine/engine_test_util.h"
#include "tests/support/skip.h"

using namespace larder;
using namespace larder::testing;

namespace {

std::shared_ptr<const CompiledGrammar> compiled(std::string_view gbnf) {
  Result<Grammar> g = parse_gbnf(gbnf);
  INFO(g.status().to_string());
  REQUIRE(g.is_ok());
  return std::make_shared<const CompiledGrammar>(*g);
}

GenerationRequest sampled(const std::vector<int32_t>& prompt, int max_tokens, uint64_t seed) {
  GenerationRequest r = greedy_request(prompt, max_tokens);
  r.sampling.temperature = 1.0f;
  r.sampling.seed = seed;
  return r;
}

// A record whose string is bounded, so that every run ends well within
// max_tokens; its string takes any character JSON allows, multi-byte ones
// (from byte tokens) included.
const char* kRecordGbnf = R"(root ::= "{" ws "\"name\":" ws str ws "," ws "\"age\":" ws num ws "}"
str ::= "\"" [^"\\\x00-\x1F]{0,12} "\""
num ::= "0" | [1-9] [0-9]{0,2}
ws ::= [ \n]{0,3})";

}  // namespace

TEST_CASE("grammar: a choice of two words ends the generation after either", "[engine][grammar]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  auto engine = make_engine(options_for(model, ""));
  const std::vector<int32_t> prompt = engine->tokenize("Once upon a time", true);
  auto g = compiled(R"(root ::= "yes" | "no" | " maybe")");
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    GenerationRequest r = sampled(prompt, 50, seed);
    r.grammar = g;
    Generated out = generate(*engine, r);
    std::string ids;
    for (int32_t t : out.tokens) ids += std::to_string(t) + " ";
    INFO("seed " << seed << ": '" << out.text << "' ids " << ids);
    CHECK(out.final.finish == FinishReason::kStop);
    CHECK((out.text == "yes" || out.text == "no" || out.text == " maybe"));
  }
  // Greedy as well; and without a grammar the model says something else.
  GenerationRequest r = greedy_request(prompt, 8);
  r.grammar = g;
  const std::string constrained = generate(*engine, r).text;
  CHECK((constrained == "yes" || constrained == "no" || constrained == " maybe"));
  CHECK(generate(*engine, greedy_request(prompt, 8)).text != constrained);
}

TEST_CASE("grammar: sampled JSON records always parse (nlohmann::json) with the fields asked for",
          "[engine][grammar]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  auto engine = make_engine(options_for(model, ""));
  const std::vector<int32_t> prompt = engine->tokenize("Tom had a box with", true);
  auto g = compiled(kRecordGbnf);
  std::set<std::string> names;
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    GenerationRequest r = sampled(prompt, 400, seed);
    r.grammar = g;
    Generated out = generate(*engine, r);
    INFO("seed " << seed << ": " << out.text);
    REQUIRE(out.final.finish == FinishReason::kStop);
    const nlohmann::json doc = nlohmann::json::parse(out.text, nullptr, /*allow_exceptions=*/false);
    REQUIRE(doc.is_object());
    CHECK(doc.size() == 2);
    REQUIRE(doc.contains("name"));
    REQUIRE(doc["name"].is_string());
    CHECK(doc["name"].get<std::string>().size() <= 12 * 4);
    REQUIRE(doc.contains("age"));
    CHECK(doc["age"].is_number_unsigned());
    CHECK(doc["age"].get<int>() <= 999);
    names.insert(doc["name"].get<std::string>());
  }
  CHECK(names.size() >= 10);  // sampling, not one forced answer
}

TEST_CASE("grammar: the JSON grammar keeps a long sampled output a JSON prefix", "[engine][grammar]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  auto engine = make_engine(options_for(model, ""));
  const std::vector<int32_t> prompt = engine->tokenize("Tom had a box with", true);
  GenerationRequest r = sampled(prompt, 200, 7);
  r.grammar = compiled(kJsonObjectGbnf);
  Generated out = generate(*engine, r);
  REQUIRE(out.final.finish == FinishReason::kLength);
  // Closing what is open must give a document nlohmann::json parses: the
  // text is a prefix of some JSON object. Worked out from the text itself:
  // track strings (with escapes) and brackets.
  std::string closing;
  bool in_string = false, escaped = false;
  std::string open;
  for (char c : out.text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '{' || c == '[') open.push_back(c);
    else if (c == '}' || c == ']') open.pop_back();
  }
  INFO(out.text);
  REQUIRE(out.text[0] == '{');
  // Only the simple case is checked: cut inside a string value or key.
  if (in_string && !escaped) {
    std::string doc = out.text + "\"";
    // A key needs a value: if the last structural char before the string
    // is '{' or ',', this string is a key.
    size_t q = out.text.rfind('"', out.text.size() - 1);
    size_t k = q == std::string::npos ? 0 : q;
    while (k > 0 && (out.text[k - 1] == ' ' || out.text[k - 1] == '\n' || out.text[k - 1] == '\t')) --k;
    const char before = k > 0 ? out.text[k - 1] : '{';
    if (before == '{' || before == ',') doc += ":0";
    for (auto it = open.rbegin(); it != open.rend(); ++it) doc += *it == '{' ? '}' : ']';
    INFO(doc);
    CHECK_FALSE(nlohmann::json::parse(doc, nullptr, false).is_discarded());
  }
}

TEST_CASE("logit_bias banning every token that may come next ends the request with a request fault",
          "[engine][grammar]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  auto engine = make_engine(options_for(model, ""));
  const std::vector<int32_t> prompt = engine->tokenize("Once upon a time", true);
  // The tokens whose text starts with "x": all that the grammar allows first.
  std::vector<std::pair<int32_t, float>> ban_x, ban_all;
  for (int32_t id = 0; id < 512; ++id) {
    ban_all.push_back({id, -100.0f});
    if (engine->token_piece(id).starts_with("x")) ban_x.push_back({id, -100.0f});
  }
  REQUIRE_FALSE(ban_x.empty());
  for (float temperature : {0.0f, 1.0f}) {
    INFO("temperature " << temperature);
    GenerationRequest g = sampled(prompt, 5, 7);
    g.sampling.temperature = temperature;
    g.grammar = compiled(R"(root ::= "x")");
    g.logit_bias = ban_x;
    const Generated out = generate(*engine, g);
    CHECK(out.text.empty());  // greedy drew a token outside the grammar
    CHECK(out.final.finish == FinishReason::kError);
    CHECK(out.final.request_fault);
    GenerationRequest all = sampled(prompt, 5, 7);
    all.sampling.temperature = temperature;
    all.logit_bias = ban_all;
    const Generated none = generate(*engine, all);
    CHECK(none.tokens.empty());
    CHECK(none.final.finish == FinishReason::kError);
    CHECK(none.final.request_fault);
  }
}

TEST_CASE("logit_bias: greedy picks the argmax of logits + bias; -100 bans a token", "[engine][grammar]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  auto engine = make_engine(options_for(model, ""));
  const std::vector<int32_t> prompt = engine->tokenize("Once upon a time", true);
  GenerationRequest plain = greedy_request(prompt, 1);
  plain.return_prompt_logits = true;
  const Generated base = generate(*engine, plain);
  REQUIRE(base.tokens.size() == 1);
  const std::vector<float>& logits = base.final.prompt_logits;
  REQUIRE(logits.size() == 512);
  const int32_t top = base.tokens[0];
  // The argmax of the logits plus a bias, worked out here from the unbiased logits.
  auto argmax_with = [&](const std::vector<std::pair<int32_t, float>>& bias) {
    std::vector<float> l = logits;
    for (const auto& [id, b] : bias) l[size_t(id)] = b <= -100 ? -INFINITY : l[size_t(id)] + b;
    return int32_t(std::max_element(l.begin(), l.end()) - l.begin());
  };
  CHECK(argmax_with({}) == top);
  // Ban the greedy token: the runner-up comes out.
  GenerationRequest ban = greedy_request(prompt, 1);
  ban.logit_bias = {{top, -100.0f}};
  const int32_t second = generate(*engine, ban).tokens.at(0);
  CHECK(second != top);
  CHECK(second == argmax_with(ban.logit_bias));
  // A small push to a low-ranked token that is not enough, and a big one that is.
  const int32_t low = int32_t((top + 100) % 512);
  for (float b : {0.5f, 100.0f}) {
    GenerationRequest push = greedy_request(prompt, 1);
    push.logit_bias = {{low, b}};
    CHECK(generate(*engine, push).tokens.at(0) == argmax_with(push.logit_bias));
  }
}

TEST_CASE("grammar: sampled ids under fixed seeds are those the full-vocabulary masking drew", "[engine][grammar]") {
  // The expected ids were recorded from the engine before the mask was
  // applied to the allowed tokens only (it copied the logits and set every
  // forbidden one to -inf): the two must draw the same tokens for every
  // sampler setting, greedy, truncated and with penalties and logit_bias.
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  auto engine = make_engine(options_for(model, ""));
  const std::vector<int32_t> prompt = engine->tokenize("Tom had a box with", true);
  auto g = compiled(kRecordGbnf);
  struct Setting {
    float temperature;
    int top_k;
    float top_p, min_p, repeat_penalty;
    bool bias;
  };
  const std::vector<Setting> settings = {{1.0f, 0, 1.0f, 0.0f, 1.0f, false},   {0.8f, 40, 0.95f, 0.05f, 1.0f, false},
                                         {1.3f, 5, 1.0f, 0.0f, 1.2f, true},    {0.0f, 0, 1.0f, 0.0f, 1.1f, false},
                                         {1.0f, 200, 0.5f, 0.0f, 1.0f, true},  {2.0f, 0, 1.0f, 0.1f, 1.0f, false}};
  std::vector<std::vector<int32_t>> got;
  for (const Setting& st : settings) {
    for (uint64_t seed : {3, 4}) {
      GenerationRequest r = sampled(prompt, 60, seed);
      r.sampling.temperature = st.temperature;
      r.sampling.top_k = st.top_k;
      r.sampling.top_p = st.top_p;
      r.sampling.min_p = st.min_p;
      r.sampling.repeat_penalty = st.repeat_penalty;
      if (st.bias) r.logit_bias = {{10, 3.0f}, {20, -100.0f}, {30, 5.0f}};
      r.grammar = g;
      got.push_back(generate(*engine, r).tokens);
    }
  }
  std::string printed;
  for (const auto& ids : got) {
    printed += "{";
    for (size_t i = 0; i < ids.size(); ++i) printed += (i ? ", " : "") + std::to_string(ids[i]);
    printed += "},\n";
  }
  INFO(printed);
  const std::vector<std::vector<int32_t>> expected = {
      {126, 410, 13, 436, 416, 412, 423, 411, 436, 467, 313, 448, 415, 422, 267, 262, 354, 411, 450, 436, 13,
       13, 13, 432, 410, 13, 436, 412, 428, 411, 436, 467, 410, 13, 13, 487, 410, 13, 410, 128},
      {126, 410, 13, 436, 416, 412, 423, 411, 436, 467, 436, 336, 301, 314, 432, 313, 13, 13, 410, 432, 436,
       412, 428, 411, 436, 467, 410, 472, 475, 477, 410, 13, 13, 128},
      {126, 410, 13, 436, 416, 412, 423, 411, 436, 467, 436, 281, 261, 419, 355, 426, 313, 410, 13, 13, 432,
       410, 13, 436, 412, 428, 411, 436, 467, 410, 13, 13, 472, 410, 13, 410, 128},
      {126, 410, 13, 436, 416, 412, 423, 411, 436, 467, 313, 440, 411, 306, 414, 443, 436, 13, 410, 13, 432,
       410, 13, 436, 412, 428, 411, 436, 467, 410, 13, 13, 472, 410, 13, 13, 128},
      {126, 410, 13, 436, 416, 412, 423, 411, 436, 467, 313, 440, 411, 422, 443, 436, 13, 410, 410, 432, 410,
       13, 436, 412, 428, 411, 436, 467, 410, 13, 13, 479, 477, 410, 13, 410, 128},
      {126, 410, 13, 436, 416, 412, 423, 411, 436, 467, 436, 336, 265, 284, 411, 436, 410, 13, 410, 432, 436,
       412, 428, 411, 436, 467, 13, 410, 13, 472, 477, 410, 13, 410, 128},
      {126, 410, 13, 436, 416, 412, 423, 411, 436, 467, 313, 448, 415, 294, 439, 419, 263, 420, 289, 428, 436,
       410, 13, 410, 432, 410, 13, 436, 412, 428, 411, 436, 467, 410, 13, 13, 472, 410, 13, 13, 128},
      {126, 410, 13, 436, 416, 412, 423, 411, 436, 467, 313, 448, 415, 294, 439, 419, 263, 420, 289, 428, 436,
       410, 13, 410, 432, 410, 13, 436, 412, 428, 411, 436, 467, 410, 13, 13, 472, 410, 13, 13, 128},
      {126, 410, 13, 436, 416, 412, 423, 411, 436, 467, 436, 336, 265, 284, 412, 436, 410, 13, 13, 432, 410,
       13, 436, 412, 428, 411, 436, 467, 410, 13, 13, 472, 410, 13, 13, 128},
      {126, 410, 13, 436, 416, 412, 423, 411, 436, 467, 313, 442, 439, 423, 280, 420, 422, 299, 432, 436, 410,
       13, 13, 432, 410, 13, 436, 412, 428, 411, 436, 467, 410, 13, 13, 472, 410, 13, 13, 128},
      {126, 410, 313, 416, 412, 423, 411, 436, 467, 313, 434, 414, 364, 416, 402, 260, 416, 436, 432, 410, 13,
       436, 412, 428, 411, 436, 467, 410, 13, 13, 472, 410, 13, 13, 128},
      {126, 410, 313, 416, 412, 423, 411, 436, 467, 436, 345, 284, 380, 411, 426, 368, 436, 13, 410, 13, 432,
       410, 436, 412, 428, 411, 436, 467, 13, 13, 13, 472, 410, 13, 410, 128}};
  CHECK(got == expected);
}

// Found in hostile testing: a grammar of CJK characters cut by max_tokens
// after one byte of a character answered "\ufffd", outside the grammar.
TEST_CASE("grammar: a character cut unfinished by max_tokens is dropped, not sent as U+FFFD", "[engine][grammar]") {
  LARDER_REQUIRE_MODEL(model, "stories260K.gguf");
  auto engine = make_engine(options_for(model, ""));
  const std::vector<int32_t> prompt = engine->tokenize("Once upon a time", true);
  // U+4E2D (E4 B8 AD) has no token of its own in stories260K's 512: it is
  // written with three byte tokens.
  auto g = compiled(R"(root ::= "\u4E2D" "a")");
  for (int max_tokens = 1; max_tokens <= 3; ++max_tokens) {
    GenerationRequest r = greedy_request(prompt, max_tokens);
    r.grammar = g;
    Generated out = generate(*engine, r);
    INFO("max_tokens " << max_tokens);
    CHECK(out.final.finish == FinishReason::kLength);
    CHECK(out.final.completion_tokens == max_tokens);
    CHECK(out.text == (max_tokens < 3 ? "" : "\xE4\xB8\xAD"));
  }
}
