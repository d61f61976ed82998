// The admin endpoints (api/admin_routes.h) against the FakeGenerator:
// routing, JSON bodies field by field, errors, the admin token, admin off,
// CORS, reload, and /metrics in the Prometheus text format (read back with
// a small parser written from the format's description, not our code).
#include <condition_variable>
#include <csignal>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include <catch2/catch.hpp>

#include "tests/api/test_client.h"

using nlohmann::json;
using namespace larder;
using namespace larder::testing;

namespace {

const std::string kChatHi = R"({"model":"fake-model","messages":[{"role":"user","content":"Hi"}]})";

// code "": any (or none).
void check_error(const std::optional<ClientResponse>& r, int status, const std::string& code) {
  REQUIRE(r);
  CHECK(r->status == status);
  const json body = json::parse(r->body, nullptr, false);
  REQUIRE(body.is_object());
  if (!code.empty()) CHECK(body["error"]["code"] == code);
  CHECK(!body["error"]["message"].get<std::string>().empty());
}

// The fake's tokens for a prompt text: BOS then one per byte.
std::vector<int32_t> fake_tokens(const std::string& text) {
  std::vector<int32_t> out = {FakeGenerator::kBos};
  for (unsigned char c : text) out.push_back(c);
  return out;
}

CacheReport sample_report() {
  CacheReport r;
  r.page_size = 16;
  r.page_bytes = 20480;
  r.pool_pages = 64;
  r.budget_pages = 48;
  r.free_pages = 30;
  r.queue_length = 2;
  r.running = 3;
  r.preemptions = 4;
  r.chose_restore = 7;
  r.chose_recompute = 8;
  r.prefill_tokens = 299;
  r.choice_pages_shared = 54;
  r.choice_pages_copied = 3;
  r.requests_total = 99;
  r.pinned_prefixes = 1;
  r.pinned_pages = 18;
  CacheTierReport d;
  d.name = "device";
  d.policy = "lru";
  d.budget_bytes = 48 * 20480;
  d.bytes_used = 20 * 20480;
  d.entries = 20;
  d.pinned = 18;
  d.hits = 36;
  d.misses = 54;
  d.bytes_restored = 81920;
  d.bytes_spilled = 123456;
  d.restore_seconds = 0.5;
  d.spill_seconds = 0.25;
  d.evictions = {7, 0, 18, 0};
  CacheTierReport k = d;
  k.name = "disk";
  k.policy = "lfu";
  k.persistent = true;
  k.evictions = {1, 2, 3, 4};
  k.writes_failed = 6;
  k.puts_skipped = 5;
  r.tiers = {d, k};
  return r;
}

// One sample of the text format: name{labels} value.
struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};
struct Exposition {
  std::map<std::string, std::string> type;  // "# TYPE name kind"
  std::map<std::string, std::string> help;
  std::vector<Sample> samples;
  std::vector<std::string> bad_lines;

  // The value of the sample with this name whose labels include `want`.
  std::optional<double> value(const std::string& name, const std::map<std::string, std::string>& want = {}) const {
    for (const Sample& s : samples) {
      if (s.name != name) continue;
      bool match = true;
      for (const auto& [k, v] : want) {
        auto it = s.labels.find(k);
        if (it == s.labels.end() || it->second != v) match = false;
      }
      if (match) return s.value;
    }
    return std::nullopt;
  }
};

// Prometheus text format 0.0.4: "# HELP name text", "# TYPE name type",
// and "name{k="v",...} value" with \\, \" and \n escaped in label values.
Exposition parse_exposition(const std::string& text) {
  Exposition out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) {
      const std::string rest = line.substr(7);
      const size_t sp = rest.find(' ');
      (line[2] == 'H' ? out.help : out.type)[rest.substr(0, sp)] = sp == std::string::npos ? "" : rest.substr(sp + 1);
      continue;
    }
    if (line[0] == '#') continue;
    Sample s;
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') s.name.push_back(line[i++]);
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        std::string k, v;
        while (i < line.size() && line[i] != '=') k.push_back(line[i++]);
        if (line.compare(i, 2, "=\"") != 0) break;
        i += 2;
        while (i < line.size() && line[i] != '"') {
          if (line[i] == '\\' && i + 1 < line.size()) {
            ++i;
            v.push_back(line[i] == 'n' ? '\n' : line[i]);
          } else {
            v.push_back(line[i]);
          }
          ++i;
        }
        ++i;  // the closing quote
        s.labels[k] = v;
        if (i < line.size() && line[i] == ',') ++i;
      }
      ++i;  // '}'
    }
    if (i >= line.size() || line[i] != ' ') {
      out.bad_lines.push_back(line);
      continue;
    }
    const std::string v = line.substr(i + 1);
    s.value = v == "+Inf" ? INFINITY : std::stod(v);
    out.samples.push_back(std::move(s));
  }
  return out;
}

}  // namespace

TEST_CASE("GET /admin/cache: the report as JSON, field by field", "[api][admin]") {
  TestServer ts;
  ts.fake().set_cache_report(sample_report());
  auto r = http(ts.port(), "GET", "/admin/cache");
  REQUIRE(r);
  CHECK(r->status == 200);
  CHECK(r->header("content-type") == "application/json");
  const json tier_device = {{"name", "device"},       {"policy", "lru"},         {"persistent", false},
                            {"budget_bytes", 983040}, {"bytes_used", 409600},    {"entries", 20},
                            {"pinned", 18},           {"hits", 36},              {"misses", 54},
                            {"bytes_restored", 81920}, {"bytes_spilled", 123456}, {"restore_seconds", 0.5},
                            {"spill_seconds", 0.25},  {"puts_skipped", 0},       {"writes_failed", 0},
                            {"evictions", {{"budget", 7}, {"ttl", 0}, {"admin", 18}, {"corrupt", 0}}}};
  json tier_disk = tier_device;
  tier_disk["name"] = "disk";
  tier_disk["policy"] = "lfu";
  tier_disk["persistent"] = true;
  tier_disk["puts_skipped"] = 5;
  tier_disk["writes_failed"] = 6;
  tier_disk["evictions"] = {{"budget", 1}, {"ttl", 2}, {"admin", 3}, {"corrupt", 4}};
  const json expected = {{"page_size", 16},
                         {"page_bytes", 20480},
                         {"device_pages", {{"pool", 64}, {"budget", 48}, {"available", 30}}},
                         {"queue_length", 2},
                         {"running", 3},
                         {"preemptions", 4},
                         {"requests_total", 99},
                         {"restore_decisions", {{"restore", 7}, {"recompute", 8}}},
                         {"pins", {{"prefixes", 1}, {"pages", 18}}},
                         {"tiers", {tier_device, tier_disk}}};
  CHECK(r->json() == expected);
  // HEAD: the head only.
  TestClient c(ts.port());
  auto head = c.request("HEAD", "/admin/cache");
  REQUIRE(head);
  CHECK(head->status == 200);
  CHECK(head->body.empty());
}

TEST_CASE("POST and DELETE /admin/cache/pin: prompt or messages, salt, answers", "[api][admin]") {
  TestServer ts;
  // "Hello world, this is a pin." is 27 bytes: 28 fake tokens, 1 page of 16.
  auto r = http(ts.port(), "POST", "/admin/cache/pin", R"({"prompt": "Hello world, this is a pin.", "cache_salt": "t1"})");
  REQUIRE(r);
  CHECK(r->status == 200);
  CHECK(r->json() == json{{"pinned", true},
                          {"pages", 1},
                          {"tokens", 16},
                          {"prompt_tokens", 28},
                          {"cached_tokens", 16},
                          {"already_pinned", false}});
  // Messages are rendered and tokenized like a chat request: "user: Hi\n".
  r = http(ts.port(), "DELETE", "/admin/cache/pin", R"({"messages": [{"role": "user", "content": "Hi"}]})");
  REQUIRE(r);
  CHECK(r->status == 200);
  CHECK(r->json() == json{{"unpinned", true}, {"pages", 0}, {"tokens", 0}});
  // Token ids, as /v1/completions takes them.
  r = http(ts.port(), "POST", "/admin/cache/pin", R"({"prompt": [1, 2, 3]})");
  REQUIRE(r);
  CHECK(r->status == 200);
  const auto calls = ts.fake().admin_calls();
  REQUIRE(calls.size() == 3);
  CHECK(calls[0].op == "pin");
  CHECK(calls[0].tokens == fake_tokens("Hello world, this is a pin."));
  CHECK(calls[0].cache_salt == "t1");
  CHECK(calls[1].op == "unpin");
  CHECK(calls[1].tokens == fake_tokens("user: Hi\n"));
  CHECK(calls[1].cache_salt.empty());
  CHECK(calls[2].tokens == std::vector<int32_t>{1, 2, 3});
}

TEST_CASE("POST /admin/cache/evict: everything, or a prompt's pages; typos are refused", "[api][admin]") {
  TestServer ts;
  for (const char* everything : {"", "{}", R"({"all": true})", "  \n"}) {
    INFO(everything);
    auto r = http(ts.port(), "POST", "/admin/cache/evict", everything);
    REQUIRE(r);
    CHECK(r->status == 200);
    CHECK(r->json() == json{{"evicted", {{"device", 7}, {"disk", 5}}}, {"device_pages_in_use", 1}});
  }
  auto r = http(ts.port(), "POST", "/admin/cache/evict", R"({"prompt": "abc", "cache_salt": "s"})");
  REQUIRE(r);
  CHECK(r->status == 200);
  auto calls = ts.fake().admin_calls();
  REQUIRE(calls.size() == 5);
  CHECK(calls[0].all);
  CHECK_FALSE(calls[4].all);
  CHECK(calls[4].tokens == fake_tokens("abc"));
  CHECK(calls[4].cache_salt == "s");
  // Never "everything" by accident.
  check_error(http(ts.port(), "POST", "/admin/cache/evict", R"({"promt": "abc"})"), 400, "");
  check_error(http(ts.port(), "POST", "/admin/cache/evict", R"({"all": true, "prompt": "abc"})"), 400, "");
  check_error(http(ts.port(), "POST", "/admin/cache/evict", R"({"all": "yes"})"), 400, "");
  check_error(http(ts.port(), "POST", "/admin/cache/evict", R"({"all": false})"), 400, "");
  // Found in hostile testing: this evicted every salt's pages.
  auto salted = http(ts.port(), "POST", "/admin/cache/evict", R"({"all": true, "cache_salt": "C"})");
  check_error(salted, 400, "");
  CHECK_THAT(salted->body, Catch::Contains("of every cache_salt"));
  check_error(http(ts.port(), "POST", "/admin/cache/evict", R"({"all": true, "model": "x"})"), 400, "");
  CHECK(ts.fake().admin_calls().size() == 5);
}

TEST_CASE("admin requests: bad bodies, methods, paths and engine errors", "[api][admin]") {
  ServerOptions o;
  o.max_body_bytes = 4096;
  TestServer ts(o);
  for (const char* body : {"", "{", "[1]", R"("x")", R"({"prompt": "a", "messages": []})", R"({"all": true})",
                           R"({"prompt": 5})", R"({"messages": [{"role": "robot", "content": "x"}]})", "{}",
                           R"({"prompt": ["a", "b"]})", R"({"prompt": [[1, 2], [3]]})"}) {
    INFO(body);
    auto r = http(ts.port(), "POST", "/admin/cache/pin", body);
    REQUIRE(r);
    CHECK(r->status == 400);
  }
  check_error(http(ts.port(), "POST", "/admin/cache/pin", std::string(200, '[') + std::string(200, ']')), 400, "");
  auto big = http(ts.port(), "POST", "/admin/cache/pin", R"({"prompt": ")" + std::string(5000, 'x') + "\"}");
  REQUIRE(big);
  CHECK(big->status == 413);
  CHECK(ts.fake().admin_calls().empty());

  // The fake's context is 64 tokens: a pin of 64 is refused as the engine refuses it.
  check_error(http(ts.port(), "POST", "/admin/cache/pin", R"({"prompt": ")" + std::string(63, 'x') + "\"}"), 400,
              "context_length_exceeded");
  ts.fake().set_admin_status(Status::not_found("this prompt's prefix is not pinned"));
  check_error(http(ts.port(), "DELETE", "/admin/cache/pin", R"({"prompt": "abc"})"), 404, "not_pinned");
  ts.fake().set_admin_status(Status::resource_exhausted("at most 7 may be pinned"));
  check_error(http(ts.port(), "POST", "/admin/cache/pin", R"({"prompt": "abc"})"), 400, "cache_too_small");
  ts.fake().set_admin_status(Status::cancelled("the engine is stopped"));
  check_error(http(ts.port(), "POST", "/admin/cache/evict", "{}"), 503, "unavailable");

  auto m = http(ts.port(), "GET", "/admin/cache/pin");
  REQUIRE(m);
  CHECK(m->status == 405);
  CHECK(m->header("allow") == "POST, DELETE");
  m = http(ts.port(), "POST", "/admin/cache");
  REQUIRE(m);
  CHECK(m->status == 405);
  m = http(ts.port(), "DELETE", "/metrics");
  REQUIRE(m);
  CHECK(m->status == 405);
  check_error(http(ts.port(), "GET", "/admin/nothing"), 404, "unknown_url");
  check_error(http(ts.port(), "GET", "/v1/admin/cache"), 404, "unknown_url");  // not under /v1

  ts.fake().set_admin_supported(false);
  ts.fake().set_admin_status(Status::ok());
  check_error(http(ts.port(), "GET", "/admin/cache"), 501, "not_implemented");
  // /metrics still answers, without the cache's families.
  auto metrics = http(ts.port(), "GET", "/metrics");
  REQUIRE(metrics);
  CHECK(metrics->status == 200);
  CHECK(metrics->body.find("larder_cache_hits_total") == std::string::npos);
}

TEST_CASE("admin = off: every admin path is an unknown endpoint", "[api][admin]") {
  ServerOptions o;
  o.admin_enabled = false;
  TestServer ts(o);
  for (const char* path : {"/admin/cache", "/metrics", "/admin/reload"}) {
    INFO(path);
    check_error(http(ts.port(), "GET", path), 404, "unknown_url");
    check_error(http(ts.port(), "POST", path, "{}"), 404, "unknown_url");
  }
  CHECK(ts.fake().admin_calls().empty());
}

TEST_CASE("admin_token: the admin endpoints need it, and API keys do not open them", "[api][admin]") {
  ServerOptions o;
  o.api_keys = {"sk-user"};
  o.admin_token = "adm-secret";
  TestServer ts(o);
  const std::string user = "Authorization: Bearer sk-user\r\n";
  const std::string admin = "Authorization: Bearer adm-secret\r\n";
  for (const char* path : {"/admin/cache", "/metrics"}) {
    INFO(path);
    check_error(http(ts.port(), "GET", path), 401, "invalid_api_key");
    check_error(http(ts.port(), "GET", path, "", user), 401, "invalid_api_key");
    check_error(http(ts.port(), "GET", path, "", "Authorization: Bearer adm-secreT\r\n"), 401, "invalid_api_key");
    auto ok = http(ts.port(), "GET", path, "", admin);
    REQUIRE(ok);
    CHECK(ok->status == 200);
    auto x = http(ts.port(), "GET", path, "", "X-Api-Key: adm-secret\r\n");
    REQUIRE(x);
    CHECK(x->status == 200);
  }
  // The admin token is for admin endpoints only.
  check_error(http(ts.port(), "GET", "/v1/models", "", admin), 401, "invalid_api_key");
  auto models = http(ts.port(), "GET", "/v1/models", "", user);
  REQUIRE(models);
  CHECK(models->status == 200);

  // Without an admin token the API keys rule applies to them too.
  ServerOptions keys_only;
  keys_only.api_keys = {"sk-user"};
  TestServer ts2(keys_only);
  check_error(http(ts2.port(), "GET", "/admin/cache"), 401, "invalid_api_key");
  auto ok = http(ts2.port(), "GET", "/admin/cache", "", user);
  REQUIRE(ok);
  CHECK(ok->status == 200);
  // A token that cannot be sent in a header stops the server at start.
  ServerOptions bad;
  bad.admin_token = "has space";
  CHECK_FALSE(HttpServer::create(bad, ts.fake()).is_ok());
}

TEST_CASE("admin endpoints are never CORS-enabled, not even for allowed origins", "[api][admin][access]") {
  ServerOptions o;
  o.cors_origins = {"http://localhost:3000"};
  TestServer ts(o);
  const std::string origin = "Origin: http://localhost:3000\r\n";
  // A web page's POST: refused before anything runs.
  check_error(http(ts.port(), "POST", "/admin/cache/evict", "{}", origin), 403, "origin_not_allowed");
  check_error(http(ts.port(), "DELETE", "/admin/cache/pin", R"({"prompt": "abc"})", origin), 403,
              "origin_not_allowed");
  CHECK(ts.fake().admin_calls().empty());
  // Its preflight: refused.
  auto pre = http(ts.port(), "OPTIONS", "/admin/cache/pin", "",
                  origin + "Access-Control-Request-Method: DELETE\r\n");
  REQUIRE(pre);
  CHECK(pre->status == 403);
  CHECK(pre->header("access-control-allow-origin").empty());
  // A GET is answered, but without CORS headers: the page cannot read it.
  auto get = http(ts.port(), "GET", "/admin/cache", "", origin);
  REQUIRE(get);
  CHECK(get->status == 200);
  CHECK(get->header("access-control-allow-origin").empty());
  auto metrics = http(ts.port(), "GET", "/metrics", "", origin);
  REQUIRE(metrics);
  CHECK(metrics->header("access-control-allow-origin").empty());
  // The same origin does get CORS on the OpenAI endpoints.
  auto models = http(ts.port(), "GET", "/v1/models", "", origin);
  REQUIRE(models);
  CHECK(models->header("access-control-allow-origin") == "http://localhost:3000");
}

TEST_CASE("POST /admin/reload: the callback's report, errors, and the sampling defaults it sets", "[api][admin]") {
  std::atomic<int> n_calls{0};
  std::atomic<bool> fail{false};
  ServerOptions o;
  o.reload = [&]() -> Result<ReloadReport> {
    ++n_calls;
    if (fail) return Status::invalid_argument("config error: sampling.temperature = 5.0: must be a number between 0 and 2");
    ReloadReport r;
    r.config_path = "larder.toml";
    r.changed = {"sampling.temperature: 0.8 -> 0.25"};
    r.restart_needed = {"server.port: 8080 -> 9000"};
    r.default_sampling.temperature = 0.25f;
    r.default_max_tokens = 7;
    return r;
  };
  TestServer ts(o);
  auto r = http(ts.port(), "POST", "/admin/reload");
  REQUIRE(r);
  CHECK(r->status == 200);
  CHECK(r->json() == json{{"reloaded", true},
                          {"config_file", "larder.toml"},
                          {"changed", {"sampling.temperature: 0.8 -> 0.25"}},
                          {"restart_needed", {"server.port: 8080 -> 9000"}}});
  // New requests get the reloaded defaults.
  REQUIRE(http(ts.port(), "POST", "/v1/chat/completions", kChatHi));
  auto reqs = ts.fake().requests();
  REQUIRE(reqs.size() == 1);
  CHECK(reqs[0].sampling.temperature == 0.25f);
  CHECK(reqs[0].max_tokens == 7);

  fail = true;
  auto bad = http(ts.port(), "POST", "/admin/reload");
  check_error(bad, 400, "invalid_config");
  CHECK_THAT(bad->json()["error"]["message"].get<std::string>(), Catch::Contains("sampling.temperature"));
  REQUIRE(http(ts.port(), "POST", "/v1/chat/completions", kChatHi));
  CHECK(ts.fake().requests().back().sampling.temperature == 0.25f);  // the old configuration stays
  CHECK(n_calls == 2);

  auto get = http(ts.port(), "GET", "/admin/reload");
  REQUIRE(get);
  CHECK(get->status == 405);
  TestServer plain;
  check_error(http(plain.port(), "POST", "/admin/reload"), 501, "not_implemented");
}

TEST_CASE("SIGHUP runs the reload in the background", "[api][admin]") {
  std::atomic<int> n_calls{0};
  ServerOptions o;
  o.handle_signals = true;
  o.reload = [&]() -> Result<ReloadReport> {
    ++n_calls;
    return ReloadReport{};
  };
  TestServer ts(o);
  REQUIRE(::raise(SIGHUP) == 0);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (n_calls == 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  CHECK(n_calls == 1);
  auto health = http(ts.port(), "GET", "/health");
  REQUIRE(health);
  CHECK(health->status == 200);
}

TEST_CASE("GET /metrics: Prometheus text with request, token, latency and cache metrics", "[api][admin][metrics]") {
  TestServer ts;
  ts.fake().set_cache_report(sample_report());
  FakeScript script;
  script.cached_tokens = 4;
  ts.fake().set_script(script);
  auto chat = http(ts.port(), "POST", "/v1/chat/completions", kChatHi);
  REQUIRE(chat);
  REQUIRE(chat->status == 200);
  REQUIRE(http(ts.port(), "GET", "/v1/nope"));
  auto r = http(ts.port(), "GET", "/metrics");
  REQUIRE(r);
  CHECK(r->status == 200);
  CHECK(r->header("content-type") == "text/plain; version=0.0.4; charset=utf-8");
  const Exposition e = parse_exposition(r->body);
  CHECK(e.bad_lines.empty());
  // Every sample's family has HELP and TYPE; counters end in _total.
  for (const Sample& s : e.samples) {
    std::string family = s.name;
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string suf = suffix;
      if (family.size() > suf.size() && family.ends_with(suf) && !e.type.count(family)) {
        family.resize(family.size() - suf.size());
      }
    }
    INFO(s.name);
    REQUIRE(e.type.count(family) == 1);
    CHECK(e.help.count(family) == 1);
    if (e.type.at(family) == "counter") CHECK(family.ends_with("_total"));
  }
  CHECK(e.type.at("larder_http_requests_total") == "counter");
  CHECK(e.value("larder_http_requests_total", {{"endpoint", "/v1/chat/completions"}, {"code", "200"}}) == 1);
  CHECK(e.value("larder_http_requests_total", {{"endpoint", "other"}, {"code", "404"}}) == 1);
  CHECK_FALSE(e.value("larder_http_requests_total", {{"endpoint", "/metrics"}}));  // counted once it is sent
  // The fake's answer: 10 prompt tokens, 4 cached, 3 generated.
  CHECK(e.value("larder_prompt_tokens_total") == 10);
  CHECK(e.value("larder_prompt_cached_tokens_total") == 4);
  CHECK(e.value("larder_generation_tokens_total") == 3);
  // One first token, two gaps between the three text events.
  CHECK(e.type.at("larder_time_to_first_token_seconds") == "histogram");
  CHECK(e.value("larder_time_to_first_token_seconds_count") == 1);
  CHECK(e.value("larder_time_to_first_token_seconds_bucket", {{"le", "+Inf"}}) == 1);
  CHECK(e.value("larder_inter_token_latency_seconds_count") == 2);
  CHECK(e.value("larder_inter_token_latency_seconds_bucket", {{"le", "+Inf"}}) == 2);
  // Buckets are cumulative.
  double last = 0;
  for (const Sample& s : e.samples) {
    if (s.name != "larder_inter_token_latency_seconds_bucket") continue;
    CHECK(s.value >= last);
    last = s.value;
  }
  // The cache's, from the report.
  CHECK(e.value("larder_cache_hits_total", {{"tier", "device"}}) == 36);
  CHECK(e.value("larder_cache_misses_total", {{"tier", "disk"}}) == 54);
  CHECK(e.value("larder_cache_spilled_bytes_total", {{"tier", "device"}}) == 123456);
  CHECK(e.value("larder_cache_restored_bytes_total", {{"tier", "disk"}}) == 81920);
  CHECK(e.value("larder_cache_restore_seconds_total", {{"tier", "device"}}) == 0.5);
  CHECK(e.value("larder_cache_spill_seconds_total", {{"tier", "device"}}) == 0.25);
  CHECK(e.value("larder_cache_evictions_total", {{"tier", "disk"}, {"reason", "ttl"}}) == 2);
  CHECK(e.value("larder_cache_evictions_total", {{"tier", "device"}, {"reason", "admin"}}) == 18);
  CHECK(e.value("larder_cache_used_bytes", {{"tier", "device"}}) == 409600);
  CHECK(e.value("larder_cache_budget_bytes", {{"tier", "device"}}) == 983040);
  CHECK(e.type.at("larder_cache_used_bytes") == "gauge");
  CHECK(e.value("larder_queue_length") == 2);
  CHECK(e.value("larder_running_sequences") == 3);
  CHECK(e.value("larder_preemptions_total") == 4);
  CHECK(e.value("larder_cache_restore_decisions_total", {{"choice", "restore"}}) == 7);
  CHECK(e.value("larder_cache_restore_decisions_total", {{"choice", "recompute"}}) == 8);
  CHECK(e.type.at("larder_cache_restore_decisions_total") == "counter");
  CHECK(e.value("larder_prefill_tokens_total") == 299);
  CHECK(e.value("larder_choice_pages_shared_total") == 54);
  CHECK(e.value("larder_choice_pages_copied_total") == 3);
  CHECK(e.type.at("larder_choice_pages_shared_total") == "counter");
  CHECK(e.value("larder_pinned_prefixes") == 1);

  // A second scrape counts the first.
  auto again = http(ts.port(), "GET", "/metrics");
  REQUIRE(again);
  CHECK(parse_exposition(again->body).value("larder_http_requests_total", {{"endpoint", "/metrics"}, {"code", "200"}}) ==
        1);
}
