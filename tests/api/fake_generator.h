// FakeGenerator: a scripted Generator for the API tests.
//   tokenize:     a BOS (id 256) then one token per byte
//   render_chat:  "tools: <tools_json>\n" when tools are offered, then
//                 "role: content\n" per message (roles system/developer/user/
//                 assistant/tool), each tool call as "role: content call(id name args)\n";
//                 it keeps the last ChatRequest it got
//   tokenize_text / token_piece: one token per byte (BOS only with
//                 add_special); a byte token's piece is that byte, BOS's "<s>"
//   tool_call_syntax: kHermes unless set_tool_call_syntax() says otherwise
//   reasoning_syntax: kNone unless set_reasoning(); chat_prompt's info says
//                 the prompt opens a reasoning block when set_reasoning(.., true)
//   submit:       answers on its own thread with the scripted text pieces, then
//                 a final event with usage numbers, for each of the request's
//                 n choices (see answer()); honours cancel().
//   cache admin:  cache_report returns the report set with set_cache_report();
//                 pin / unpin / evict record their calls and answer
//                 n_pages = tokens / 16 (or the status set with
//                 set_admin_status()); pin refuses a prompt of n_ctx tokens
//                 or more with kOutOfRange, as the engine does. After
//                 set_admin_supported(false) they all answer kUnsupported
//                 (Generator's defaults). While the admin gate is closed
//                 (close_admin_gate()), pin / unpin / evict wait, as a
//                 pin whose prompt is computed behind other requests does.
// It records every request it got.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/generation.h"

namespace larder::testing {

struct FakeScript {
  std::vector<std::string> pieces = {"Hel", "lo", " world"};
  int delay_ms = 0;                      // before each piece
  FinishReason finish = FinishReason::kStop;
  bool stopped_by_string = false;        // with finish == kStop (GenerationEvent::stopped_by_string)
  std::string error;                     // with finish == kError
  bool request_fault = false;            // with finish == kError (GenerationEvent::request_fault)
  int cached_tokens = 0;
  double prefill_ms = 12.5;
  double decode_ms = 30.25;
  // Optional: the logprob entries each piece's event carries (index = piece).
  std::vector<std::vector<TokenLogprob>> logprobs;
};

class FakeGenerator : public Generator {
 public:
  static constexpr int32_t kBos = 256;

  FakeGenerator() {
    info_.id = "fake-model";
    info_.n_ctx = 64;
    info_.n_vocab = 257;
    info_.created = 1700000000;
  }
  ~FakeGenerator() override {
    for (auto& t : threads_) t.join();
  }

  // Call before the first request (tools make long prompts: 1 token per byte).
  void set_n_ctx(int n_ctx) { info_.n_ctx = n_ctx; }

  void set_script(FakeScript script) {
    std::lock_guard<std::mutex> lock(mu_);
    script_ = std::move(script);
  }

  const ModelInfo& model_info() const override { return info_; }

  std::vector<int32_t> tokenize(const std::string& text, bool parse_special) const override {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (gate_only_.empty() || text.find(gate_only_) != std::string::npos) pass_gate(lock);
      parse_special_seen_.push_back(parse_special);
    }
    std::vector<int32_t> out = {kBos};
    for (unsigned char c : text) out.push_back(c);
    return out;
  }

  // /tokenize: one token per byte, BOS first when add_special. Pieces: a
  // byte token is that byte, BOS is "<s>".
  std::vector<int32_t> tokenize_text(const std::string& text, bool add_special, bool parse_special) const override {
    std::vector<int32_t> out = tokenize(text, parse_special);
    if (!add_special) out.erase(out.begin());
    return out;
  }
  std::string token_piece(int32_t id) const override { return id == kBos ? "<s>" : std::string(1, char(id)); }

  // A slow prompt: while the gate is closed, render_chat and tokenize wait
  // (as a huge template rendering would) until open_prompt_gate().
  // only_text_containing: only tokenize calls whose text contains it wait.
  void close_prompt_gate(std::string only_text_containing = "") {
    std::lock_guard<std::mutex> lock(mu_);
    gate_closed_ = true;
    gate_only_ = std::move(only_text_containing);
  }
  void open_prompt_gate() {
    std::lock_guard<std::mutex> lock(mu_);
    gate_closed_ = false;
    cv_.notify_all();
  }
  // True when `n` callers wait at the closed gate within `timeout`.
  bool wait_at_gate(size_t n, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return n_at_gate_ >= n; });
  }

  void close_admin_gate() {
    std::lock_guard<std::mutex> lock(mu_);
    admin_gate_closed_ = true;
  }
  void open_admin_gate() {
    std::lock_guard<std::mutex> lock(mu_);
    admin_gate_closed_ = false;
    cv_.notify_all();
  }
  // True when `n` admin calls wait at the closed admin gate within `timeout`.
  bool wait_at_admin_gate(size_t n, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return n_at_admin_gate_ >= n; });
  }
  size_t n_at_admin_gate() const {
    std::lock_guard<std::mutex> lock(mu_);
    return n_at_admin_gate_;
  }

  Result<std::string> render_chat(const ChatRequest& request) const override {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (gate_only_.empty()) pass_gate(lock);
      last_chat_ = request;
    }
    std::string out;
    if (!request.tools_json.empty()) {
      if (syntax_ == ToolCallSyntax::kNone) return Status::unsupported("no tools here");
      out += "tools: " + request.tools_json + "\n";
    }
    for (const auto& m : request.messages) {
      if (m.role != "system" && m.role != "developer" && m.role != "user" && m.role != "assistant" &&
          m.role != "tool") {
        return Status::invalid_argument("unknown role '" + m.role + "'");
      }
      out += m.role + ": " + m.content;
      for (const ToolCall& c : m.tool_calls) out += " call(" + c.id + " " + c.name + " " + c.arguments + ")";
      out += "\n";
    }
    return out;
  }

  ToolCallSyntax tool_call_syntax() const override { return syntax_; }
  void set_tool_call_syntax(ToolCallSyntax s) { syntax_ = s; }
  ReasoningSyntax reasoning_syntax() const override { return reasoning_; }
  void set_reasoning(ReasoningSyntax s, bool opens = false) {
    reasoning_ = s;
    opens_reasoning_ = opens;
  }
  using Generator::chat_prompt;
  Result<std::vector<int32_t>> chat_prompt(const ChatRequest& request, ChatPromptInfo* info) const override {
    info->opens_reasoning = opens_reasoning_;
    return chat_prompt(request);
  }
  ChatRequest last_chat() const {
    std::lock_guard<std::mutex> lock(mu_);
    return last_chat_;
  }

  bool chat_uses_special_tokens() const override { return true; }

  void submit(GenerationRequest request, std::shared_ptr<GenerationSink> sink) override {
    std::lock_guard<std::mutex> lock(mu_);
    requests_.push_back(request);
    threads_.emplace_back([this, script = script_, n_prompt = static_cast<int>(request.prompt_tokens.size()),
                           n = request.n, first = request.first_choice,
                           sink = std::move(sink)] { answer(script, n_prompt, n, first, sink); });
  }

  // ---- cache admin ----
  struct AdminCall {
    std::string op;               // "pin", "unpin", "evict"
    std::vector<int32_t> tokens;  // empty for an evict of everything
    bool all = false;             // evict of everything
    std::string cache_salt;
  };
  void set_admin_supported(bool on) { admin_supported_ = on; }
  void set_cache_report(CacheReport r) {
    std::lock_guard<std::mutex> lock(mu_);
    report_ = std::move(r);
  }
  void set_admin_status(Status st) {
    std::lock_guard<std::mutex> lock(mu_);
    admin_status_ = std::move(st);
  }
  std::vector<AdminCall> admin_calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return admin_calls_;
  }
  Result<CacheReport> cache_report() const override {
    if (!admin_supported_) return Generator::cache_report();
    std::lock_guard<std::mutex> lock(mu_);
    return report_;
  }
  Result<PinResult> pin(const std::vector<int32_t>& prompt, const std::string& salt) override {
    if (!admin_supported_) return Generator::pin(prompt, salt);
    return admin_pin("pin", prompt, salt);
  }
  Result<PinResult> unpin(const std::vector<int32_t>& prompt, const std::string& salt) override {
    if (!admin_supported_) return Generator::unpin(prompt, salt);
    return admin_pin("unpin", prompt, salt);
  }
  Result<EvictResult> evict(const std::vector<int32_t>* prompt, const std::string& salt) override {
    if (!admin_supported_) return Generator::evict(prompt, salt);
    std::unique_lock<std::mutex> lock(mu_);
    pass_admin_gate(lock);
    admin_calls_.push_back(AdminCall{"evict", prompt ? *prompt : std::vector<int32_t>{}, prompt == nullptr, salt});
    if (!admin_status_.is_ok()) return admin_status_;
    EvictResult r;
    r.evicted = {{"device", prompt ? int64_t(prompt->size() / 16) : 7}, {"disk", 5}};
    r.active_skipped = 1;
    return r;
  }

  std::vector<GenerationRequest> requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }
  std::vector<bool> parse_special_seen() const {
    std::lock_guard<std::mutex> lock(mu_);
    return parse_special_seen_;
  }
  // True when `n` generations saw cancel() within `timeout`.
  bool wait_cancelled(std::chrono::milliseconds timeout, int n = 1) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return n_cancelled_ >= n; });
  }
  // True when every submitted generation sent its final event within `timeout`.
  bool wait_all_finished(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return n_finished_ == requests_.size(); });
  }

 private:
  void pass_gate(std::unique_lock<std::mutex>& lock) const {
    if (!gate_closed_) return;
    ++n_at_gate_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return !gate_closed_; });
    --n_at_gate_;
  }

  void pass_admin_gate(std::unique_lock<std::mutex>& lock) {
    if (!admin_gate_closed_) return;
    ++n_at_admin_gate_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return !admin_gate_closed_; });
    --n_at_admin_gate_;
  }

  // Choice j of a request (GenerationRequest::n) gets the script's pieces,
  // the first one prefixed with "[j]" for j > 0; the choices' events are
  // interleaved piece by piece, each tagged with its choice index
  // (first_choice + j), and every choice ends with its own final event.
  void answer(FakeScript script, int n_prompt, int n, int first_choice, std::shared_ptr<GenerationSink> sink) {
    n = std::max(1, n);
    std::vector<GenerationEvent> finals(static_cast<size_t>(n));
    int n_sent = 0;
    for (size_t p = 0; p < script.pieces.size(); ++p) {
      // Sleep in small steps so that cancel() is seen quickly.
      auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(script.delay_ms);
      while (!sink->cancelled() && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      if (sink->cancelled()) break;
      for (int j = 0; j < n; ++j) {
        GenerationEvent e;
        e.choice = first_choice + j;
        if (p == 0 && j > 0) {
          e.text += '[';
          e.text += std::to_string(j);
          e.text += ']';
        }
        e.text += script.pieces[p];
        for (unsigned char c : e.text) e.tokens.push_back(c);
        if (p < script.logprobs.size()) e.logprobs = script.logprobs[p];
        GenerationEvent& f = finals[static_cast<size_t>(j)];
        f.output_tokens.insert(f.output_tokens.end(), e.tokens.begin(), e.tokens.end());
        sink->on_event(std::move(e));
      }
      ++n_sent;
    }
    const bool cancelled = sink->cancelled();
    for (int j = 0; j < n; ++j) {
      GenerationEvent& final_event = finals[static_cast<size_t>(j)];
      final_event.done = true;
      final_event.choice = first_choice + j;
      if (cancelled) {
        final_event.finish = FinishReason::kCancelled;
      } else {
        final_event.finish = script.finish;
        final_event.stopped_by_string = script.stopped_by_string;
        final_event.error = script.error;
        final_event.request_fault = script.request_fault;
      }
      final_event.prompt_tokens = n_prompt;
      final_event.cached_tokens = script.cached_tokens;
      final_event.completion_tokens = n_sent;
      final_event.prefill_ms = script.prefill_ms;
      final_event.decode_ms = script.decode_ms;
      sink->on_event(std::move(final_event));
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (cancelled) ++n_cancelled_;
    ++n_finished_;
    cv_.notify_all();
  }

  Result<PinResult> admin_pin(const char* op, const std::vector<int32_t>& prompt, const std::string& salt) {
    std::unique_lock<std::mutex> lock(mu_);
    pass_admin_gate(lock);
    admin_calls_.push_back(AdminCall{op, prompt, false, salt});
    if (!admin_status_.is_ok()) return admin_status_;
    if (std::string(op) == "pin" && static_cast<int>(prompt.size()) >= info_.n_ctx) {
      return Status::out_of_range("the prompt has " + std::to_string(prompt.size()) + " tokens");
    }
    PinResult r;
    r.n_prompt_tokens = static_cast<int>(prompt.size());
    r.n_pages = r.n_prompt_tokens / 16;
    r.n_tokens = r.n_pages * 16;
    r.n_cached_tokens = 16;
    r.changed = true;
    return r;
  }

  ModelInfo info_;
  std::atomic<bool> admin_supported_{true};
  CacheReport report_;
  Status admin_status_;
  std::vector<AdminCall> admin_calls_;
  std::atomic<ToolCallSyntax> syntax_{ToolCallSyntax::kHermes};
  std::atomic<ReasoningSyntax> reasoning_{ReasoningSyntax::kNone};
  std::atomic<bool> opens_reasoning_{false};
  mutable ChatRequest last_chat_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool gate_closed_ = false;
  std::string gate_only_;  // close_prompt_gate's only_text_containing
  mutable size_t n_at_gate_ = 0;
  bool admin_gate_closed_ = false;
  size_t n_at_admin_gate_ = 0;
  FakeScript script_;
  std::vector<GenerationRequest> requests_;
  mutable std::vector<bool> parse_special_seen_;
  std::vector<std::thread> threads_;
  int n_cancelled_ = 0;
  size_t n_finished_ = 0;
};

}  // namespace larder::testing
