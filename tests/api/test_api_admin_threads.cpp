// Admin calls that block (pin, unpin, evict, reload) run one at a time on
// the admin routes' own thread (api/serial_worker.h), never on libuv's pool
// threads that chat requests build their prompts on; SIGHUP storms cost one
// reload more. Against the FakeGenerator and its admin gate.
#include <csignal>
#include <thread>

#include <catch2/catch.hpp>

#include "tests/api/test_client.h"

using nlohmann::json;
using namespace larder;
using namespace larder::testing;

namespace {

const std::string kChatHi = R"({"model":"fake-model","messages":[{"role":"user","content":"Hi"}]})";

std::string raw_post(const std::string& method, const std::string& path, const std::string& body) {
  return method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

struct AdminGateGuard {
  FakeGenerator& fake;
  ~AdminGateGuard() { fake.open_admin_gate(); }
};

}  // namespace

// Seen in hostile testing: admin calls that block (a pin waits for its
// prompt to be computed behind other requests; a reload of a config file
// that cannot be read to its end) ran on libuv's four pool threads, which
// every chat request needs to build its prompt: four of them and every new
// chat request hung until they returned.
TEST_CASE("admin calls that block hold none of the pool threads chat requests need", "[api][admin]") {
  TestServer ts;
  AdminGateGuard guard{ts.fake()};
  ts.fake().close_admin_gate();
  const std::string pin_body = R"({"prompt":")" + std::string(40, 'x') + R"("})";
  std::vector<std::unique_ptr<TestClient>> admins;
  for (int i = 0; i < 6; ++i) {
    admins.push_back(std::make_unique<TestClient>(ts.port()));
    const char* method = i % 3 == 2 ? "DELETE" : "POST";
    const std::string path = i % 3 == 1 ? "/admin/cache/evict" : "/admin/cache/pin";
    REQUIRE(admins.back()->send_raw(raw_post(i % 3 == 1 ? "POST" : method, path, pin_body)));
  }
  REQUIRE(ts.fake().wait_at_admin_gate(1, std::chrono::milliseconds(5000)));

  // Chat requests (their prompts are built on the pool) and the report
  // (on the pool too) are answered while all six admin calls wait.
  for (int i = 0; i < 3; ++i) {
    auto chat = http(ts.port(), "POST", "/v1/chat/completions", kChatHi);
    REQUIRE(chat);
    CHECK(chat->status == 200);
  }
  auto report = http(ts.port(), "GET", "/admin/cache");
  REQUIRE(report);
  CHECK(report->status == 200);
  // They run one at a time, in order.
  CHECK(ts.fake().n_at_admin_gate() == 1);

  ts.fake().open_admin_gate();
  for (size_t i = 0; i < admins.size(); ++i) {
    auto r = admins[i]->read_response();
    REQUIRE(r);
    CHECK(r->status == 200);
  }
  const auto calls = ts.fake().admin_calls();
  REQUIRE(calls.size() == 6);
  const std::vector<std::string> order = {"pin", "evict", "unpin", "pin", "evict", "unpin"};
  for (size_t i = 0; i < calls.size(); ++i) CHECK(calls[i].op == order[i]);
}

TEST_CASE("a storm of SIGHUPs costs one reload more, not one per signal", "[api][admin]") {
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  int n_calls = 0;
  ServerOptions o;
  o.handle_signals = true;
  o.reload = [&]() -> Result<ReloadReport> {
    std::unique_lock<std::mutex> lock(mu);
    ++n_calls;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
    return ReloadReport{};
  };
  TestServer ts(o);
  REQUIRE(::raise(SIGHUP) == 0);
  {
    std::unique_lock<std::mutex> lock(mu);
    REQUIRE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return n_calls == 1; }));
  }
  // Nine more while the first reload runs: one more reload is queued (the
  // file may have changed after the first one read it), the rest add nothing.
  for (int i = 0; i < 9; ++i) REQUIRE(::raise(SIGHUP) == 0);
  // The loop has handled the signals once it answers a request after them
  // (the signal pipe is read before the next poll's sockets, but give it time).
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto health = http(ts.port(), "GET", "/health");
  REQUIRE(health);
  CHECK(health->status == 200);
  {
    std::unique_lock<std::mutex> lock(mu);
    CHECK(n_calls == 1);  // the others are not running beside it
    release = true;
    cv.notify_all();
    REQUIRE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return n_calls >= 2; }));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::lock_guard<std::mutex> lock(mu);
  CHECK(n_calls == 2);
}

// Found in hostile testing: pins cut by a shutdown were answered 503 "try
// again" but had been applied, and were kept across the restart. A change
// already running now says its outcome is unknown; one still queued is
// withdrawn (it never runs).
TEST_CASE("shutdown: a running admin change says it may have been applied, a queued one is withdrawn",
          "[api][admin]") {
  ServerOptions o;
  o.shutdown_grace_s = 0.2;
  TestServer ts(o);
  AdminGateGuard guard{ts.fake()};
  ts.fake().close_admin_gate();
  TestClient running(ts.port()), queued(ts.port());
  REQUIRE(running.send_raw(raw_post("POST", "/admin/cache/pin", R"({"prompt": "first"})")));
  REQUIRE(ts.fake().wait_at_admin_gate(1, std::chrono::seconds(10)));
  REQUIRE(queued.send_raw(raw_post("POST", "/admin/cache/pin", R"({"prompt": "second"})")));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the second is read and queued
  ts.server().request_stop();
  auto r1 = running.read_response();
  auto r2 = queued.read_response();
  REQUIRE(r1);
  REQUIRE(r2);
  CHECK(r1->status == 503);
  CHECK(r2->status == 503);
  CHECK_THAT(r1->json()["error"]["message"].get<std::string>(), Catch::Contains("may have been applied"));
  CHECK(r2->json()["error"]["message"] == "the server is shutting down; try again");
  ts.fake().open_admin_gate();
  CHECK(ts.stop(std::chrono::seconds(10)));
  // Only the first pin reached the engine (once past the gate).
  for (int i = 0; i < 500 && ts.fake().admin_calls().empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // room for a second, which must not come
  const auto calls = ts.fake().admin_calls();
  REQUIRE(calls.size() == 1);
  CHECK(calls[0].tokens.size() == 1 + 5);  // the fake's BOS, then a token per byte of "first"
  CHECK(calls[0].tokens.back() == int32_t('t'));
}
