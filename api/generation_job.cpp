#include "api/generation_job.h"

#include <algorithm>

#include "api/pool_task.h"

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
                             std::shared_ptr<ApiMetrics> metrics, ChoiceLayout choices)
    : meta_(std::move(meta)),
      stream_(stream),
      include_usage_(include_usage),
      sink_(std::move(sink)),
      tools_(std::move(tools)),
      id_rng_(tool_call_id_seed),
      metrics_(std::move(metrics)),
      layout_(choices) {
  choices_.reserve(size_t(std::max(1, layout_.n_choices())));
  for (int i = 0; i < std::max(1, layout_.n_choices()); ++i) choices_.emplace_back(tools_);
  if (meta_.logprobs) {
    for (Choice& c : choices_) c.logprobs.emplace(meta_.kind);
  }
}

std::string GenerationJob::dump_chunk(const nlohmann::json& chunk, Choice& c) {
  if (!c.logprobs || !c.logprobs->has_pending() || !chunk.contains("choices") || chunk["choices"].empty()) {
    return dump_json(chunk);
  }
  nlohmann::ordered_json out = chunk;  // the chunk's keys stay as they were (sorted)
  out["choices"][0]["logprobs"] = c.logprobs->take();
  return dump_json(out);
}

void GenerationJob::observe(const QueueSink::Timed& t) {
  if (!metrics_) return;
  const GenerationEvent& e = t.event;
  if (e.choice < 0 || size_t(e.choice) >= choices_.size()) return;
  Choice& c = choices_[size_t(e.choice)];
  const auto seconds = [](QueueSink::Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  if (e.done) {
    if (e.finish == FinishReason::kError) return;
    // A generation whose first output is its end (no text was sent).
    if (!had_output_ && e.completion_tokens > 0) {
      metrics_->observe_time_to_first_token(seconds(t.at - submitted_));
      had_output_ = true;
    }
    metrics_->count_generation(e, /*count_prompt=*/e.choice % std::max(1, layout_.n) == 0);
    return;
  }
  if (e.text.empty() || e.echo) return;  // the echoed prompt is not output
  // The response's first output; then the gaps within each choice.
  if (!had_output_) {
    metrics_->observe_time_to_first_token(seconds(t.at - submitted_));
    had_output_ = true;
  } else if (c.last_output) {
    metrics_->observe_inter_token_latency(seconds(t.at - *c.last_output));
  }
  c.last_output = t.at;
}

void GenerationJob::write_text_chunk(ResponseWriter& writer, int index, const std::string& text) {
  if (text.empty()) return;
  start_stream(writer);
  writer.write_stream(
      sse_event(dump_chunk(with_choice_index(text_chunk_json(meta_, text), index), choices_[size_t(index)])));
}

void GenerationJob::take_text(ResponseWriter& writer, int index, ReasoningSplit part) {
  Choice& c = choices_[size_t(index)];
  if (c.reasoning.raw()) {
    // reasoning_format "none": the block is content, but never tool calls.
    if (!stream_) {
      c.raw_reasoning += part.reasoning;
    } else {
      write_text_chunk(writer, index, part.reasoning);
    }
    part.reasoning.clear();
  }
  if (!stream_) {
    c.reasoning_text += part.reasoning;
    c.text += part.content;
    return;
  }
  if (!part.reasoning.empty()) {
    // The thinking tokens' logprobs go out with their chunk, as the text's do.
    start_stream(writer);
    writer.write_stream(
        sse_event(dump_chunk(with_choice_index(reasoning_chunk_json(meta_, part.reasoning), index), c)));
  }
  if (!part.content.empty()) write_text_chunk(writer, index, c.tool_stream.push(part.content));
}

namespace {

std::vector<ToolCall> calls_with_ids(std::vector<ParsedToolCall> calls, const ToolCallOptions& tools,
                                     std::mt19937_64& rng) {
  std::vector<ToolCall> out;
  for (ParsedToolCall& c : calls) {
    out.push_back({make_tool_call_id(tools.syntax == ToolCallSyntax::kMistral, rng), std::move(c.name),
                   std::move(c.arguments)});
  }
  return out;
}

HttpResponse assembly_failed(const std::string& what) { return error_response(ApiError::server(what)); }

// Whether the answer was cut short for tool-call parsing (api/tool_calls.h):
// max_tokens or the context, or a stop string (found in hostile testing: a
// stop string inside a call left its markup as content).
bool cut_short(const GenerationEvent& e) { return e.finish == FinishReason::kLength || e.stopped_by_string; }

}  // namespace

std::vector<ToolCall> GenerationJob::with_ids(std::vector<ParsedToolCall> calls) {
  return calls_with_ids(std::move(calls), tools_, id_rng_);
}

HttpResponse GenerationJob::build_body(Body& b) {
  nlohmann::json body_choices = nlohmann::json::array();
  for (size_t i = 0; i < b.choices.size(); ++i) {
    ToolCallParse parsed = parse_tool_calls(b.tools, b.choices[i].text, cut_short(*b.choices[i].final));
    nlohmann::json choice = choice_json(b.meta, int(i), b.choices[i].raw_reasoning + parsed.content,
                                        *b.choices[i].final, calls_with_ids(std::move(parsed.calls), b.tools, b.id_rng));
    if (b.reasoning) add_reasoning_json(choice, b.choices[i].reasoning_text, 0);
    body_choices.push_back(std::move(choice));
  }
  nlohmann::json body = completion_body_json(b.meta, std::move(body_choices), b.usage);
  if (b.reasoning) add_reasoning_json(body, "", b.reasoning_tokens);
  if (!b.meta.logprobs) return json_response(200, body);
  // The logprobs, by far the largest part with top_logprobs, are written as
  // text entry by entry (ResponseLogprobs::take_text, which also keeps
  // their keys' order) where a placeholder stands in the rest of the body:
  // a DOM of them all took 7-12x the body's bytes (found in hostile
  // testing). The placeholder holds a control character and a random
  // number, so no generated text spells it.
  const std::string tag = "\u0001larder-logprobs-" + std::to_string(b.id_rng()) + "-";
  for (size_t i = 0; i < b.choices.size(); ++i) body["choices"][i]["logprobs"] = tag + std::to_string(i);
  const std::string skeleton = dump_json(body);
  body = nlohmann::json();
  std::string out;
  size_t pos = 0;
  for (size_t i = 0; i < b.choices.size(); ++i) {
    const std::string quoted = dump_json(nlohmann::json(tag + std::to_string(i)));  // as the skeleton spells it
    const size_t at = skeleton.find(quoted, pos);
    if (at == std::string::npos) return error_response(ApiError::server("assembling the logprobs of the response failed"));
    out.append(skeleton, pos, at - pos);
    out += b.choices[i].logprobs->take_text();  // straight into the body: no second copy of them all
    pos = at + quoted.size();
  }
  out.append(skeleton, pos, std::string::npos);
  return json_text_response(200, std::move(out));
}

GenerationJob::~GenerationJob() {
  if (!done_) sink_->cancel();
  sink_->detach();
}

void GenerationJob::pump(ResponseWriter& writer) {
  if (done_) return;
  if (assembly_) {
    if (assembly_->finished()) {
      done_ = true;
      writer.send(assembly_->take());
    }
    return;
  }
  std::deque<QueueSink::Timed> events = sink_->take_timed();
  for (QueueSink::Timed& t : events) {
    observe(t);
    on_event(writer, t.event);
    if (done_ || assembly_) break;
  }
}

void GenerationJob::start_stream(ResponseWriter& writer) {
  if (started_) return;
  started_ = true;
  writer.start_stream(200, "text/event-stream");
  if (meta_.kind != CompletionKind::kChat) return;
  for (size_t i = 0; i < choices_.size(); ++i) {
    writer.write_stream(sse_event(dump_json(with_choice_index(role_chunk_json(meta_), int(i)))));
  }
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

GenerationEvent GenerationJob::total_usage() const {
  if (choices_.size() == 1) return *choices_[0].final;
  GenerationEvent total;
  for (size_t i = 0; i < choices_.size(); ++i) {
    const GenerationEvent& e = *choices_[i].final;
    if (i % size_t(std::max(1, layout_.n)) == 0) {
      total.prompt_tokens += e.prompt_tokens;
      total.cached_tokens += e.cached_tokens;
    }
    total.completion_tokens += e.completion_tokens;
    total.prefill_ms = std::max(total.prefill_ms, e.prefill_ms);
    total.decode_ms = std::max(total.decode_ms, e.decode_ms);
  }
  return total;
}

void GenerationJob::on_event(ResponseWriter& writer, GenerationEvent& e) {
  if (e.choice < 0 || size_t(e.choice) >= choices_.size() || choices_[size_t(e.choice)].final) {
    finish_with_error(writer, ApiError::server("the engine sent an event for choice " + std::to_string(e.choice) +
                                               " of " + std::to_string(choices_.size())));
    return;
  }
  const int index = e.choice;
  Choice& c = choices_[size_t(index)];
  if (!e.done) {
    if (c.logprobs) c.logprobs->add(e);
    if (!e.text.empty()) take_text(writer, index, c.reasoning.push(e.text, e.tokens.size()));
    return;
  }
  // The final event may carry a last piece of text.
  if (!e.text.empty()) {
    GenerationEvent piece;
    piece.choice = index;
    piece.text = std::move(e.text);
    piece.tokens = std::move(e.tokens);
    on_event(writer, piece);
  }
  if (c.logprobs) c.logprobs->add(e);  // the final event's entries (its text went above)
  if (e.finish == FinishReason::kError) {
    const std::string message = e.error.empty() ? "generation failed" : e.error;
    finish_with_error(writer, e.request_fault ? ApiError::invalid(message) : ApiError::server(message));
    return;
  }
  if (e.finish == FinishReason::kCancelled) {
    // The client is still here (else this job would be gone): the engine
    // gave up on the request (shutting down).
    finish_with_error(writer, ApiError::server("generation was cancelled"));
    return;
  }
  on_final(writer, index, e);
}

int GenerationJob::reasoning_tokens() const {
  int n = 0;
  for (const Choice& c : choices_) n += c.reasoning.reasoning_tokens();
  return n;
}

void GenerationJob::on_final(ResponseWriter& writer, int index, GenerationEvent& e) {
  Choice& c = choices_[size_t(index)];
  ++n_finished_;
  const bool last = n_finished_ == int(choices_.size());
  take_text(writer, index, c.reasoning.finish());
  const bool reasoning = c.reasoning.active();
  if (!stream_) {
    c.final = std::move(e);
    if (!last) return;
    const GenerationEvent usage = total_usage();
    const int n_reasoning = reasoning_tokens();
    auto body = std::make_shared<Body>(Body{meta_, tools_, id_rng_, std::move(choices_), usage, reasoning, n_reasoning});
    choices_.clear();
    if (assembly_loop_ == nullptr) {
      done_ = true;
      writer.send(build_body(*body));
      return;
    }
    assembly_ = std::make_unique<PoolTask<HttpResponse>>(assembly_loop_, assembly_waker_,
                                                         [body] { return build_body(*body); }, &assembly_failed);
    pump(writer);  // sent there once built (a failure to queue: at once)
    return;
  }
  ToolCallParse rest = c.tool_stream.finish(cut_short(e));
  write_text_chunk(writer, index, rest.content);
  std::vector<ToolCall> calls = with_ids(std::move(rest.calls));
  start_stream(writer);
  for (size_t i = 0; i < calls.size(); ++i) {
    writer.write_stream(
        sse_event(dump_json(with_choice_index(tool_call_chunk_json(meta_, static_cast<int>(i), calls[i]), index))));
  }
  writer.write_stream(sse_event(dump_chunk(with_choice_index(finish_chunk_json(meta_, e, !calls.empty()), index), c)));
  c.final = std::move(e);
  if (!last) return;
  done_ = true;
  if (include_usage_) {
    nlohmann::json usage = usage_chunk_json(meta_, total_usage());
    if (reasoning) add_reasoning_json(usage, "", reasoning_tokens());
    writer.write_stream(sse_event(dump_json(usage)));
  }
  writer.write_stream(kSseDone);
  writer.end_stream();
}

}  // namespace larder
