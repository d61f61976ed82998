// reference.json through the HTTP API: a real Engine behind a real HttpServer
// on an ephemeral port, /v1/completions with the prompt as token ids.
//
// Expected values: reference.json (float64 numpy re-implementation of
// llama2.c; llama.cpp agrees, see ../shared/models/README.md).
// - F32 and F16 files: all 48 greedy tokens and the text equal the reference.
// - Q8_0 file: 8-bit weights move logits by ~1e-2, so tokens are compared up
//   to the step of reference.json's smallest top-1/top-2 logit margin when
//   that margin is below 0.02 (punct_digits: step 31, non_ascii: step 21),
//   else all 48. (llama.cpp itself diverges from the reference at those
//   near-ties on this file.)
// The top-5 logits at the last prompt position are not exposed over HTTP;
// tests/engine/test_engine.cpp checks them through the engine (F32, 1e-4
// relative) and tests/cpu/ for F16 and Q8_0.
#include <catch2/catch.hpp>

#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "api/http_server.h"
#include "engine/engine.h"
#include "tests/api/test_client.h"
#include "tests/e2e/live_server.h"
#include "tests/support/test_models.h"

using namespace larder;
using namespace larder::testing;
using nlohmann::json;

namespace {

json reference() {
  std::ifstream f(*test_models_dir() + "/reference.json");
  return json::parse(f);
}

}  // namespace

TEST_CASE("reference.json greedy continuations token for token over HTTP", "[e2e]") {
  for (const char* file : {"stories260K.gguf", "stories260K-f16.gguf", "stories260K-q8_0.gguf"}) {
    auto path = test_model_path(file);
    if (!path) LARDER_MISSING_MODEL(file);
    const bool q8 = std::string(file).find("q8_0") != std::string::npos;
    LiveServer live(*path);
    TestClient client(live.server->port());
    REQUIRE(client.connected());
    const json ref = reference();
    for (const auto& c : ref["cases"]) {
      INFO(file << " case " << c["name"].get<std::string>());
      json body = {{"model", "ignored-when-absent"},
                   {"prompt", c["prompt_tokens"]},
                   {"max_tokens", 48},
                   {"temperature", 0},
                   {"return_tokens", true},
                   {"ignore_eos", true}};
      body.erase("model");
      auto resp = client.request("POST", "/v1/completions", body.dump());
      REQUIRE(resp);
      REQUIRE(resp->status == 200);
      json r = resp->json();
      auto got = r["choices"][0]["tokens"].get<std::vector<int>>();
      auto want = c["greedy_tokens"].get<std::vector<int>>();
      REQUIRE(got.size() == 48);
      CHECK(r["usage"]["prompt_tokens"] == c["n_prompt_tokens"]);
      CHECK(r["usage"]["completion_tokens"] == 48);
      CHECK(r["choices"][0]["finish_reason"] == "length");
      size_t n_compare = 48;
      if (q8) {
        const auto& m = c["greedy_min_top1_top2_logit_margin"];
        if (m["margin"].get<double>() < 0.02) n_compare = m["step"].get<size_t>();
      }
      CHECK(std::vector<int>(got.begin(), got.begin() + long(n_compare)) ==
            std::vector<int>(want.begin(), want.begin() + long(n_compare)));
      if (!q8) CHECK(r["choices"][0]["text"] == c["greedy_text"]);
    }
  }
}
