// One request's state inside the engine thread: its tokens, block table,
// sampler, detokenizer and stop matcher. Private to engine/.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/generation.h"
#include "engine/sampling/sampler.h"
#include "engine/sampling/stop_matcher.h"
#include "engine/tokenizer/tokenizer.h"
#include "storage/page_store.h"

namespace larder {

enum class SeqState {
  kWaitingDisk,   // prefix pages being read by the storage threads
  kPrefill,       // prompt tokens [n_computed, n_prompt) still to run
  kDecode,        // one token per step
  kFinished,
};

struct Sequence {
  using Clock = std::chrono::steady_clock;

  Sequence(uint64_t id_, GenerationRequest req, std::shared_ptr<GenerationSink> sink_,
           const Tokenizer& tok, int n_vocab)
      : id(id_),
        request(std::move(req)),
        sink(std::move(sink_)),
        sampler(request.sampling, n_vocab),
        // The piece after a BOS loses its leading space, as SentencePiece
        // decodes the start of a text (reference.json's convention too).
        detok(tok, request.prompt_tokens.empty() ? -1 : request.prompt_tokens.back()),
        stop(request.stop) {}

  uint64_t id;
  GenerationRequest request;
  std::shared_ptr<GenerationSink> sink;
  Sampler sampler;
  IncrementalDetokenizer detok;
  StopMatcher stop;

  SeqState state = SeqState::kPrefill;
  std::vector<int32_t> tokens;       // prompt + generated, (n_tokens)
  int n_prompt = 0;
  int n_computed = 0;                // positions whose K/V are in the pages
  int n_cached = 0;                  // prompt positions restored from memory or disk
  int n_generated = 0;
  std::vector<int32_t> block_table;  // page ids, (ceil(n_computed / page_size))
  PageKey root;                      // chain root: the engine's, salted by request.cache_salt
  std::vector<PageKey> page_keys;    // keys of the sealed leading pages, in order
  std::vector<PageKey> disk_keys;    // keys being looked up on disk
  FinishReason finish = FinishReason::kNone;
  std::string error;
  std::vector<float> prompt_logits;  // (n_vocab) when request.return_prompt_logits
  std::string emitted_text;          // all text sent to the sink so far
  int cache_divergence_pos = -1;     // see GenerationEvent::cache_divergence_pos

  Clock::time_point t_admit = Clock::now();
  Clock::time_point t_first_token;
  bool have_first_token = false;
};

}  // namespace larder
