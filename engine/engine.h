// Engine: loads a model, owns the engine thread (scheduler, KV page pool,
// prefix cache, forward pass) and implements Generator for the API layer.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "engine/generation.h"
#include "storage/cache_options.h"
#include "storage/status.h"

namespace larder {

class TierChain;  // storage/tier_chain.h

struct EngineOptions {
  std::string model_path;            // GGUF file (required)
  std::string model_id;              // shown by /v1/models; empty: the file's stem
  // The [cache] section: the engine reads page_size, kv_dtype, salt, the
  // write policy and the device tier (budget: the KV page pool's bytes).
  CacheOptions cache;
  int n_threads = 0;                 // 0: all cores
  int n_ctx = 0;                     // context length served; 0: the model's
  int max_running = 8;               // sequences decoded together (continuous batching)
  // Speculative decoding by prompt lookup (engine/engine_decode.cpp): at
  // most this many draft tokens per sequence and step, taken from what
  // followed an earlier occurrence of the sequence's last 2-4 tokens and
  // verified in the decode step's forward pass. The output is the same
  // token for token (greedy or sampled, seeded) as without; 0 (the
  // default: it measured no faster through the HTTP API on the machines
  // tried, see docs/cpu-kernels.md) turns it off.
  int draft_tokens = 0;
  // A GGUF file sharing the model's vocabulary whose greedy continuation
  // drafts tokens where prompt lookup finds none (engine/draft_model.h),
  // verified the same way (draft_tokens must be > 0). It runs on the CPU
  // with K/V pages of its own for the running sequences; a sequence whose
  // drafts from it keep missing asks it less often (engine_decode.cpp).
  // Empty: none.
  std::string draft_model;
  std::string device = "auto";       // "auto" | "cuda" | "cpu" (engine/backend.h)
  // The accelerator's start-up check against the CPU (engine/backend_check.h).
  bool device_check = true;
  // strftime_now(format) for chat templates (Llama 3.x print "Today Date");
  // empty: the local clock. Tests fix it to compare renderings.
  std::function<std::string(const std::string& format)> strftime_now;
  // Builds the tiers below the device (host, disk) from `cache`, called
  // once by create() after the model and the backend loaded, with the
  // keys of the pins stored in a persistent tier to pin there as it opens
  // (page_tier.h's PinsAtOpen); the daemon passes storage/open_tiers.h's
  // tier_factory(). Null: memory only. An error fails create().
  std::function<Result<std::shared_ptr<TierChain>>(const CacheOptions&, PinsAtOpen)> open_tiers;
};

class Engine : public Generator {
 public:
  // Loads the model, allocates the page pool, opens the disk tier and starts
  // the engine thread. Errors name the file or the option that failed. A
  // disk tier that cannot be opened for lack of space is no error: the
  // engine serves from memory and the store keeps trying to open.
  static Result<std::unique_ptr<Engine>> create(const EngineOptions& options);
  ~Engine() override;  // stop() if still running

  // Finishes every in-flight request (kCancelled), stops the engine thread
  // and flushes pending page writes to disk (a failed flush, e.g. on a full
  // disk, is logged, never fatal). Idempotent.
  void stop();

  const ModelInfo& model_info() const override;
  std::vector<int32_t> tokenize(const std::string& text, bool parse_special) const override;
  std::vector<int32_t> tokenize_text(const std::string& text, bool add_special, bool parse_special) const override;
  std::string token_piece(int32_t id) const override;
  Result<std::string> render_chat(const ChatRequest& request) const override;
  ToolCallSyntax tool_call_syntax() const override;
  bool chat_uses_special_tokens() const override;
  Result<std::vector<int32_t>> chat_prompt(const ChatRequest& request) const override;
  Result<std::vector<int32_t>> chat_prompt(const ChatRequest& request, ChatPromptInfo* info) const override;
  // kThinkTags when the chat template or the vocabulary has "<think>".
  ReasoningSyntax reasoning_syntax() const override;
  void submit(GenerationRequest request, std::shared_ptr<GenerationSink> sink) override;
  void submit_batch(std::vector<std::pair<GenerationRequest, std::shared_ptr<GenerationSink>>> batch) override;

  // Blocks until every queued page write has reached the store (tests, SIGTERM).
  void flush_storage();

  // ---- cache admin (engine/engine_admin.cpp; see Generator) ---------------
  // Pins are kept in the persistent tiers under a reserved key
  // (engine/kv/pin_record.h) and applied again by create().
  Result<CacheReport> cache_report() const override;
  Result<PinResult> pin(const std::vector<int32_t>& prompt, const std::string& cache_salt) override;
  Result<PinResult> unpin(const std::vector<int32_t>& prompt, const std::string& cache_salt) override;
  Result<EvictResult> evict(const std::vector<int32_t>* prompt, const std::string& cache_salt) override;

  // Applies `options` where they differ from those in force, without a
  // restart (engine/engine_reconfigure.cpp): each tier's budget (the
  // device's within the page pool allocated at start: a smaller one evicts
  // cached pages at once), each tier's policy (entries and pins move over,
  // recency kept) and the disk ttl. Blocks until done (the device part runs
  // on the engine thread between steps). Errors, with nothing applied:
  // kInvalidArgument naming the key (dotted, as in config/larder.toml) when
  // a key that needs a restart changed (page_size, kv_dtype, salt,
  // storage_threads, write_policy, disk.dir, disk.sync, disk.on_error, the
  // host tier turned on), when the device budget grows past the pool or
  // shrinks below one full context plus the pinned pages, or for an unknown
  // policy; kCancelled when the engine stopped or did not answer within 30 s.
  Status reconfigure(const CacheOptions& options);

  struct Stats {
    int64_t pages_resident = 0, pages_free = 0;
    int64_t pages_written = 0, pages_restored_disk = 0, pages_reused_memory = 0;
    int64_t pages_rewritten = 0;    // of pages_written, again after their write to disk failed or was skipped
    int64_t records_rejected = 0;   // failed verification, dropped
    int64_t requests_total = 0;
    int64_t preemptions = 0;        // sequences preempted when KV pages ran out
    // Restore or recompute: lookups of lower-tier pages made because a
    // restore was estimated faster, and ones skipped because prefill was.
    int64_t chose_restore = 0, chose_recompute = 0;
    // Prompt positions computed by prefill passes (first runs and resumes
    // after a preemption; not those a cache hit or a fork covered).
    int64_t prefill_tokens = 0;
    // Speculative decoding (EngineOptions::draft_tokens): draft tokens
    // verified, and those of them the target model agreed with (emitted).
    int64_t draft_tokens = 0, draft_tokens_accepted = 0;
    // Of those, the ones the draft model proposed (EngineOptions::draft_model).
    int64_t draft_model_tokens = 0, draft_model_tokens_accepted = 0;
    // n > 1 choices forked from their prompt's sequence: full pages they
    // share by reference, partial last pages copied (one per choice when
    // the prompt does not end on a page boundary).
    int64_t choice_pages_shared = 0, choice_pages_copied = 0;
    // Disk tier faults (storage/rocksdb_store.h "Disk faults"): writes
    // (pages, answer records, erases) that failed; times writes resumed or
    // a damaged store was replaced; records lost with stores moved aside.
    int64_t disk_writes_failed = 0, disk_recoveries = 0, disk_records_moved_aside = 0;
  };
  Stats stats() const;

 private:
  Engine();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace larder
