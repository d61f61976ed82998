#include "api/generation_job.h"

namespace larder {

void LoopWaker::wake() {
  std::lock_guard<std::mutex> lock(mu_);
  if (async_) uv_async_send(async_);
}

void LoopWaker::detach() {
  std::lock_guard<std::mutex> lock(mu_);
  async_ = nullptr;
}

void QueueSink::on_event(GenerationEvent event) {
  const Clock::time_point at = Clock::now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (detached_) return;
    queue_.push_back(Timed{std::move(event), at});
  }
  waker_->wake();
}

std::deque<QueueSink::Timed> QueueSink::take_timed() {
  std::lock_guard<std::mutex> lock(mu_);
  std::deque<Timed> out;
  out.swap(queue_);
  return out;
}

std::deque<GenerationEvent> QueueSink::take() {
  std::deque<GenerationEvent> out;
  for (Timed& t : take_timed()) out.push_back(std::move(t.event));
  return out;
}

void QueueSink::detach() {
  std::lock_guard<std::mutex> lock(mu_);
  detached_ = true;
  queue_.clear();
}

GenerationJob::GenerationJob(CompletionMeta meta, bool stream, bool include_usage,
                             std::shared_ptr<QueueSink> sink, ToolCallOptions tools, uint64_t tool_call_id_seed,
                             std::shared_ptr<ApiMetrics> metrics)
    : meta_(std::move(meta)),
      stream_(stream),
      include_usage_(include_usage),
      sink_(std::move(sink)),
      tools_(tools),
      tool_stream_(std::move(tools)),
      id_rng_(tool_call_id_seed),
      metrics_(std::move(metrics)) {}

void GenerationJob::observe(const QueueSink::Timed& t) {
  if (!metrics_) return;
  const GenerationEvent& e = t.event;
  const auto seconds = [](QueueSink::Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  if (e.done) {
    if (e.finish == FinishReason::kError) return;
    // A generation whose first output is its end (no text was sent).
    if (!last_output_ && e.completion_tokens > 0) metrics_->observe_time_to_first_token(seconds(t.at - submitted_));
    metrics_->count_generation(e);
    return;
  }
  if (e.text.empty()) return;
  if (!last_output_) {
    metrics_->observe_time_to_first_token(seconds(t.at - submitted_));
  } else {
    metrics_->observe_inter_token_latency(seconds(t.at - *last_output_));
  }
  last_output_ = t.at;
}

void GenerationJob::write_text_chunk(ResponseWriter& writer, const std::string& text) {
  if (text.empty()) return;
  start_stream(writer);
  writer.write_stream(sse_event(dump_json(text_chunk_json(meta_, text))));
}

std::vector<ToolCall> GenerationJob::with_ids(std::vector<ParsedToolCall> calls) {
  std::vector<ToolCall> out;
  for (ParsedToolCall& c : calls) {
    out.push_back({make_tool_call_id(tools_.syntax == ToolCallSyntax::kMistral, id_rng_), std::move(c.name),
                   std::move(c.arguments)});
  }
  return out;
}

GenerationJob::~GenerationJob() {
  if (!done_) sink_->cancel();
  sink_->detach();
}

void GenerationJob::pump(ResponseWriter& writer) {
  if (done_) return;
  std::deque<QueueSink::Timed> events = sink_->take_timed();
  for (QueueSink::Timed& t : events) {
    observe(t);
    on_event(writer, t.event);
    if (done_) break;
  }
}

void GenerationJob::start_stream(ResponseWriter& writer) {
  if (started_) return;
  started_ = true;
  writer.start_stream(200, "text/event-stream");
  if (meta_.kind == CompletionKind::kChat) writer.write_stream(sse_event(dump_json(role_chunk_json(meta_))));
}

void GenerationJob::finish_with_error(ResponseWriter& writer, const ApiError& error) {
  done_ = true;
  if (!started_) {
    writer.send(error_response(error));
    return;
  }
  // Mid-stream: the status line is gone already; report in-band.
  writer.write_stream(sse_event(dump_json(error_json(error))));
  writer.write_stream(kSseDone);
  writer.end_stream();
}

void GenerationJob::on_event(ResponseWriter& writer, GenerationEvent& e) {
  if (!e.done) {
    if (stream_) {
      if (e.text.empty()) return;
      write_text_chunk(writer, tool_stream_.push(e.text));
    } else {
      text_ += e.text;
    }
    return;
  }
  // The final event may carry a last piece of text.
  if (!e.text.empty()) {
    GenerationEvent piece;
    piece.text = std::move(e.text);
    on_event(writer, piece);
  }
  if (e.finish == FinishReason::kError) {
    finish_with_error(writer, ApiError::server(e.error.empty() ? "generation failed" : e.error));
    return;
  }
  if (e.finish == FinishReason::kCancelled) {
    // The client is still here (else this job would be gone): the engine
    // gave up on the request (shutting down).
    finish_with_error(writer, ApiError::server("generation was cancelled"));
    return;
  }
  done_ = true;
  if (!stream_) {
    ToolCallParse parsed = parse_tool_calls(tools_, text_);
    writer.send(json_response(200, completion_json(meta_, parsed.content, e, with_ids(std::move(parsed.calls)))));
    return;
  }
  ToolCallParse rest = tool_stream_.finish();
  write_text_chunk(writer, rest.content);
  std::vector<ToolCall> calls = with_ids(std::move(rest.calls));
  start_stream(writer);
  for (size_t i = 0; i < calls.size(); ++i) {
    writer.write_stream(sse_event(dump_json(tool_call_chunk_json(meta_, static_cast<int>(i), calls[i]))));
  }
  writer.write_stream(sse_event(dump_json(finish_chunk_json(meta_, e, !calls.empty()))));
  if (include_usage_) writer.write_stream(sse_event(dump_json(usage_chunk_json(meta_, e))));
  writer.write_stream(kSseDone);
  writer.end_stream();
}

}  // namespace larder
