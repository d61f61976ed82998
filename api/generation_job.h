// The bridge between the engine thread and the libuv loop for one request.
//
//   engine thread: QueueSink::on_event() pushes the event under a mutex and
//                  wakes the loop through the server's LoopWaker (uv_async).
//   loop thread:   the connection calls GenerationJob::pump(), which takes
//                  the queued events and writes them as one JSON body or as
//                  SSE chunks.
//
// Destroying an unfinished job (client gone, shutdown) cancels its sink; the
// engine then ends the request with FinishReason::kCancelled and the sink
// drops whatever still arrives.
#pragma once

#include <uv.h>

#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include "api/http_message.h"
#include "api/metrics.h"
#include "api/openai_response.h"
#include "api/response_logprobs.h"
#include "api/reasoning.h"
#include "api/tool_calls.h"
#include "engine/generation.h"

namespace larder {

// Wakes the loop from any thread. detach() (loop thread, before the async
// handle closes) turns later wake() calls into no-ops, so sinks that outlive
// the server stay harmless.
class LoopWaker {
 public:
  explicit LoopWaker(uv_async_t* async) : async_(async) {}
  void wake();
  void detach();

 private:
  std::mutex mu_;
  uv_async_t* async_;  // guarded by mu_
};

// The GenerationSink handed to the engine. Each event is stamped with the
// time it arrived (on the engine thread: when the token was made), for the
// latency metrics.
class QueueSink : public GenerationSink {
 public:
  using Clock = std::chrono::steady_clock;
  struct Timed {
    GenerationEvent event;
    Clock::time_point at;
  };
  explicit QueueSink(std::shared_ptr<LoopWaker> waker) : waker_(std::move(waker)) {}
  void on_event(GenerationEvent event) override;  // any thread
  std::deque<GenerationEvent> take();             // loop thread: everything queued so far
  std::deque<Timed> take_timed();                 // the same, with arrival times
  void detach();                                  // drop all later events

 private:
  std::shared_ptr<LoopWaker> waker_;
  std::mutex mu_;
  std::deque<Timed> queue_;   // guarded by mu_
  bool detached_ = false;     // guarded by mu_
};

// A response that completes later, driven by pump() on the loop thread.
class ResponseJob {
 public:
  virtual ~ResponseJob() = default;
  // Writes whatever is ready; may start/finish the response.
  virtual void pump(ResponseWriter& writer) = 0;
  // True once the response is complete (the connection may move on).
  virtual bool done() const = 0;
  // At shutdown, before a 503 "try again": whether the request has had no
  // lasting effect and now will not. False for a change that already began
  // (an admin pin, evict or reload running), whose outcome the 503 then
  // says is unknown. Generation has no lasting effect but the cache.
  virtual bool withdraw() { return true; }
};

// A handler either answers at once or hands back a job that answers as the
// engine's events arrive.
using HandlerResult = std::variant<HttpResponse, std::unique_ptr<ResponseJob>>;

// The choices of one response: n_prompts prompts (a completion's prompt
// array) times n choices each; choice index i * n + j is prompt i's choice j
// (GenerationEvent::choice).
struct ChoiceLayout {
  int n_prompts = 1;
  int n = 1;
  int n_choices() const { return n_prompts * n; }
};

template <typename T>
class PoolTask;  // api/pool_task.h

class GenerationJob : public ResponseJob {
 public:
  // stream: SSE chunks; include_usage: a usage chunk before [DONE].
  // tools.syntax != kNone (chat with tools offered): tool calls in each
  // answer become message.tool_calls / delta.tool_calls (api/tool_calls.h),
  // with ids drawn from `tool_call_id_seed`.
  // metrics: counts the tokens and latencies (api/metrics.h); may be null.
  // choices: the events of every choice arrive on `sink`; the body lists
  // them in index order, streamed chunks carry their choice's index (a role
  // chunk per choice first, a finish chunk per choice when it ends), and
  // usage counts each prompt once and the completions of every choice. The
  // first choice to fail (error, cancelled) fails the whole response.
  GenerationJob(CompletionMeta meta, bool stream, bool include_usage, std::shared_ptr<QueueSink> sink,
                ToolCallOptions tools = {}, uint64_t tool_call_id_seed = 0,
                std::shared_ptr<ApiMetrics> metrics = nullptr, ChoiceLayout choices = {});
  ~GenerationJob() override;  // unfinished: cancel + detach the sink

  // Chat with a reasoning model: the thinking goes to reasoning_content
  // (api/reasoning.h). Call before the first pump().
  void set_reasoning(ReasoningOptions options) {
    for (Choice& c : choices_) c.reasoning = ReasoningStream(options);
  }

  // A non-streamed body is built (logprobs shaped, JSON written) on `loop`'s
  // thread pool rather than in pump(): for n choices of many long prompts
  // with echo and logprobs it is tens of MB, seconds of the loop thread
  // (found in hostile testing: /health waited 2.4 s). Without this call it
  // is built in pump() (tests).
  void assemble_on(uv_loop_t* loop, std::shared_ptr<LoopWaker> waker) {
    assembly_loop_ = loop;
    assembly_waker_ = std::move(waker);
  }

  void pump(ResponseWriter& writer) override;
  bool done() const override { return done_; }

 private:
  // What one choice has produced so far.
  struct Choice {
    explicit Choice(const ToolCallOptions& tools) : tool_stream(tools) {}
    std::string text;             // non-streaming: the whole completion so far
    ToolCallStream tool_stream;   // streaming with tools: holds back text that may be a call
    std::optional<GenerationEvent> final;  // its final event, once it ended
    std::optional<QueueSink::Clock::time_point> last_output;  // the previous text event's arrival
    std::optional<ResponseLogprobs> logprobs;  // meta_.logprobs: its entries (api/response_logprobs.h)
    ReasoningStream reasoning;    // splits off the thinking (a no-op unless set_reasoning)
    std::string reasoning_text;   // non-streaming: the whole reasoning so far
    std::string raw_reasoning;    // non-streaming, reasoning_format "none": the block, put before the content
  };
  void on_event(ResponseWriter& writer, GenerationEvent& event);
  void on_final(ResponseWriter& writer, int index, GenerationEvent& event);
  void start_stream(ResponseWriter& writer);
  void finish_with_error(ResponseWriter& writer, const ApiError& error);
  void write_text_chunk(ResponseWriter& writer, int index, const std::string& text);
  // A piece of choice `index`'s answer split by its reasoning stream:
  // streamed, or kept for the body.
  void take_text(ResponseWriter& writer, int index, ReasoningSplit part);
  std::vector<ToolCall> with_ids(std::vector<ParsedToolCall> calls);
  // What a non-streamed body is built from, moved out of the job.
  struct Body {
    CompletionMeta meta;
    ToolCallOptions tools;
    std::mt19937_64 id_rng;
    std::vector<Choice> choices;
    GenerationEvent usage;
    bool reasoning = false;
    int reasoning_tokens = 0;
  };
  static HttpResponse build_body(Body& body);
  // The usage of all choices: each prompt's tokens once (from its first
  // choice), the completion tokens of every choice, the longest times.
  GenerationEvent total_usage() const;
  // The reasoning tokens of all choices.
  int reasoning_tokens() const;
  // Counts the event's tokens and latencies (metrics_).
  void observe(const QueueSink::Timed& t);
  // A streamed chunk as JSON text; with meta_.logprobs and entries of c not
  // sent yet, its choices[0].logprobs holds them (an ordered object:
  // api/response_logprobs.h).
  std::string dump_chunk(const nlohmann::json& chunk, Choice& c);

  CompletionMeta meta_;
  bool stream_;
  bool include_usage_;
  std::shared_ptr<QueueSink> sink_;
  ToolCallOptions tools_;
  std::mt19937_64 id_rng_;
  std::shared_ptr<ApiMetrics> metrics_;
  ChoiceLayout layout_;
  std::vector<Choice> choices_;  // by index
  int n_finished_ = 0;           // choices whose final event came
  QueueSink::Clock::time_point submitted_ = QueueSink::Clock::now();
  bool had_output_ = false;      // the time to first token was observed
  bool started_ = false;    // streaming: head and role chunks sent
  bool done_ = false;
  uv_loop_t* assembly_loop_ = nullptr;          // assemble_on
  std::shared_ptr<LoopWaker> assembly_waker_;
  std::unique_ptr<PoolTask<HttpResponse>> assembly_;  // the body being built
};

}  // namespace larder
