// The loop thread never waits for a prompt: parsing, template rendering and
// tokenizing run on libuv's thread pool (api/prompt_job.h). Seen in hostile
// testing before: 30,000 one-letter messages froze /health and every stream
// for 12 s while the template rendered them on the loop thread.
#include <uv.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include <catch2/catch.hpp>

#include "api/json_schema_grammar.h"
#include "api/pool_task.h"
#include "storage/cancel.h"
#include "tests/api/test_client.h"

using nlohmann::json;
using namespace larder;
using namespace larder::testing;
using namespace std::chrono_literals;

namespace {

constexpr auto kWait = std::chrono::milliseconds(5000);

std::string post(const std::string& path, const std::string& body) {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

// Opens the gate when the test leaves, so the server's loop can finish.
struct GateGuard {
  FakeGenerator& fake;
  ~GateGuard() { fake.open_prompt_gate(); }
};

}  // namespace

TEST_CASE("/health and other streams answer while a prompt is being built", "[api]") {
  TestServer ts;
  GateGuard guard{ts.fake()};
  ts.fake().close_prompt_gate();

  // Two slow requests (a chat and a completion) are stuck in their prompt.
  TestClient chat(ts.port()), text(ts.port());
  REQUIRE(chat.send_raw(post("/v1/chat/completions", R"({"messages":[{"role":"user","content":"Hi"}],"max_tokens":3})")));
  REQUIRE(text.send_raw(post("/v1/completions", R"({"prompt":"abc","max_tokens":3})")));
  REQUIRE(ts.fake().wait_at_gate(2, kWait));

  // The loop is free: /health, /v1/models and a bad request are answered
  // while both prompts are still held.
  auto health = http(ts.port(), "GET", "/health");
  REQUIRE(health);
  CHECK(health->status == 200);
  auto models = http(ts.port(), "GET", "/v1/models");
  REQUIRE(models);
  CHECK(models->status == 200);
  auto bad = http(ts.port(), "POST", "/v1/chat/completions", "{");
  REQUIRE(bad);
  CHECK(bad->status == 400);
  CHECK(ts.fake().requests().empty());

  ts.fake().open_prompt_gate();
  auto r1 = chat.read_response();
  auto r2 = text.read_response();
  REQUIRE(r1);
  REQUIRE(r2);
  CHECK(r1->status == 200);
  CHECK(r1->json()["choices"][0]["message"]["content"] == "Hello world");
  CHECK(r2->status == 200);
  CHECK(r2->json()["choices"][0]["text"] == "Hello world");
  CHECK(ts.fake().requests().size() == 2);
}

TEST_CASE("a client gone while its prompt is built: nothing reaches the engine", "[api]") {
  TestServer ts;
  GateGuard guard{ts.fake()};
  ts.fake().close_prompt_gate();
  {
    TestClient c(ts.port());
    REQUIRE(c.send_raw(post("/v1/chat/completions", R"({"messages":[{"role":"user","content":"Hi"}]})")));
    REQUIRE(ts.fake().wait_at_gate(1, kWait));
  }  // closed while the prompt is held
  // More requests than libuv's pool has threads (4) wait at the gate too;
  // their clients leave as well. Work that never started is cancelled.
  for (int i = 0; i < 8; ++i) {
    TestClient c(ts.port());
    REQUIRE(c.send_raw(post("/v1/completions", R"({"prompt":"abc"})")));
    c.close();
  }
  CHECK(http(ts.port(), "GET", "/health")->status == 200);
  ts.fake().open_prompt_gate();
  // The server still serves, and none of the abandoned requests was submitted.
  auto r = http(ts.port(), "POST", "/v1/completions", R"({"prompt":"x","max_tokens":2})");
  REQUIRE(r);
  CHECK(r->status == 200);
  auto reqs = ts.fake().requests();
  REQUIRE(reqs.size() == 1);
  CHECK(reqs[0].prompt_tokens == std::vector<int32_t>{FakeGenerator::kBos, 'x'});
}

TEST_CASE("stop while a prompt is being built: run() returns once the pool work ends", "[api]") {
  TestServer ts;
  GateGuard guard{ts.fake()};
  ts.fake().close_prompt_gate();
  TestClient c(ts.port());
  REQUIRE(c.send_raw(post("/v1/chat/completions", R"({"messages":[{"role":"user","content":"Hi"}],"max_tokens":3})")));
  REQUIRE(ts.fake().wait_at_gate(1, kWait));
  ts.server().request_stop();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ts.fake().open_prompt_gate();
  // The exchange in flight is answered (within the grace period) and the
  // server stops.
  auto r = c.read_response();
  REQUIRE(r);
  CHECK(r->status == 200);
  CHECK(ts.stop(kWait));
}

// Found in hostile testing: requests not answered yet when the grace period
// ended (queued, or their prompt still being built) got 0 bytes and a closed
// connection. They now get a 503 saying why.
TEST_CASE("shutdown grace over before an answer started: 503 shutting_down", "[api]") {
  ServerOptions o;
  o.shutdown_grace_s = 0.2;
  TestServer ts(o);
  GateGuard guard{ts.fake()};
  ts.fake().close_prompt_gate();
  TestClient c(ts.port());
  REQUIRE(c.send_raw(post("/v1/chat/completions", R"({"messages":[{"role":"user","content":"Hi"}],"max_tokens":3})")));
  REQUIRE(ts.fake().wait_at_gate(1, kWait));
  ts.server().request_stop();
  auto r = c.read_response();
  REQUIRE(r);
  CHECK(r->status == 503);
  CHECK(r->json()["error"]["code"] == "shutting_down");
  CHECK(r->header("retry-after") == "1");
  CHECK(r->header("connection") == "close");
  ts.fake().open_prompt_gate();
  CHECK(ts.stop(kWait));
  CHECK(ts.fake().requests().empty());
}

// Found in hostile testing: twenty 2 MB json_schema bodies held every pool
// thread, and a one-line chat waited behind their grammar compiles. Large
// bodies are prepared in a lane of the pool (4 threads in tests: 3 of them).
TEST_CASE("large bodies being prepared leave pool threads for small requests", "[api]") {
  TestServer ts;
  GateGuard guard{ts.fake()};
  ts.fake().close_prompt_gate("SLOW");
  const std::string large = R"({"prompt":"SLOW","max_tokens":2})" + std::string(100 << 10, ' ');
  constexpr int kLarge = 6;
  std::vector<std::unique_ptr<TestClient>> clients;
  for (int i = 0; i < kLarge; ++i) {
    clients.push_back(std::make_unique<TestClient>(ts.port()));
    REQUIRE(clients.back()->send_raw(post("/v1/completions", large)));
  }
  REQUIRE(ts.fake().wait_at_gate(3, kWait));
  // The others wait for the lane, not on the pool.
  CHECK_FALSE(ts.fake().wait_at_gate(4, 300ms));
  // A small request is prepared and answered meanwhile.
  auto small = http(ts.port(), "POST", "/v1/completions", R"({"prompt":"x","max_tokens":2})");
  REQUIRE(small);
  CHECK(small->status == 200);
  CHECK(small->json()["choices"][0]["text"] == "Hello world");
  // A large one whose client leaves while it waits for the lane leaves it.
  clients.back()->close();
  clients.pop_back();
  std::this_thread::sleep_for(100ms);  // the server sees the close
  ts.fake().open_prompt_gate();
  for (auto& c : clients) {
    auto r = c->read_response();
    REQUIRE(r);
    CHECK(r->status == 200);
  }
  CHECK(ts.fake().requests().size() == kLarge);  // kLarge - 1 large ones and the small one
}

// Found in hostile testing: bodies read whole and waiting for the lane were
// no longer counted anywhere (a hundred 8 MiB ones waited behind slow
// compiles). They are held to max_total_body_bytes too.
TEST_CASE("large bodies waiting for the lane are bounded: past max_total_body_bytes, 503 server_busy", "[api]") {
  ServerOptions o;
  o.max_total_body_bytes = 1 << 20;
  TestServer ts(o);
  GateGuard guard{ts.fake()};
  ts.fake().close_prompt_gate("SLOW");
  const std::string large = R"({"prompt":"SLOW","max_tokens":2})" + std::string(400 << 10, ' ');
  std::vector<std::unique_ptr<TestClient>> clients;
  for (int i = 0; i < 5; ++i) {  // 3 on the pool's lane threads, 2 waiting (800 KiB)
    clients.push_back(std::make_unique<TestClient>(ts.port()));
    REQUIRE(clients.back()->send_raw(post("/v1/completions", large)));
    if (i == 2) REQUIRE(ts.fake().wait_at_gate(3, kWait));
  }
  std::this_thread::sleep_for(200ms);  // the two waiting ones are read and queued
  auto busy = http(ts.port(), "POST", "/v1/completions", large);
  REQUIRE(busy);
  CHECK(busy->status == 503);
  CHECK(busy->header("retry-after") == "1");
  CHECK(busy->json()["error"]["code"] == "server_busy");
  // Small requests still pass.
  auto small = http(ts.port(), "POST", "/v1/completions", R"({"prompt":"x","max_tokens":2})");
  REQUIRE(small);
  CHECK(small->status == 200);
  ts.fake().open_prompt_gate();
  for (auto& c : clients) {
    auto r = c->read_response();
    REQUIRE(r);
    CHECK(r->status == 200);
  }
  // Nothing waits now: a large body passes again.
  auto again = http(ts.port(), "POST", "/v1/completions", large);
  REQUIRE(again);
  CHECK(again->status == 200);
}

TEST_CASE("a pool task destroyed while its work runs: the work sees cancel_requested() and can stop early",
          "[api]") {
  uv_loop_t loop;
  REQUIRE(uv_loop_init(&loop) == 0);
  CHECK_FALSE(cancel_requested());  // outside any pool work
  // Work that runs until it is cancelled (or 20 s pass), and says which.
  std::atomic<bool> started{false};
  auto spin = [&started] {
    started = true;
    const auto until = std::chrono::steady_clock::now() + 20s;
    while (!cancel_requested() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
    return cancel_requested() ? 1 : 0;
  };
  auto on_error = [](const std::string&) { return -1; };
  std::atomic<int> seen{-2};
  auto task = std::make_unique<PoolTask<int>>(&loop, nullptr, [&] { return seen = spin(); }, on_error);
  while (!started) std::this_thread::sleep_for(1ms);
  task.reset();                    // the client went away, or shutdown's grace ended
  uv_run(&loop, UV_RUN_DEFAULT);   // returns once the work's after() ran
  CHECK(seen == 1);

  // A task that stays is not cancelled: its work ends on its own.
  PoolTask<int> kept(&loop, nullptr, [] { return cancel_requested() ? 1 : 0; }, on_error);
  uv_run(&loop, UV_RUN_DEFAULT);
  REQUIRE(kept.finished());
  CHECK(kept.take() == 0);
  REQUIRE(uv_loop_close(&loop) == 0);
}

TEST_CASE("a cancelled JSON schema conversion stops with kCancelled", "[api]") {
  const nlohmann::ordered_json schema = {{"type", "object"}, {"properties", {{"a", {{"type", "string"}}}}}};
  std::atomic<bool> flag{true};
  {
    CancelScope scope(&flag);
    Result<std::string> g = json_schema_to_gbnf(schema);
    REQUIRE_FALSE(g.is_ok());
    CHECK(g.status().code() == StatusCode::kCancelled);
  }
  CHECK(json_schema_to_gbnf(schema).is_ok());  // the scope is over
}
