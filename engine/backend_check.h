// The start-up check of an accelerator backend against the CPU: a backend
// that has never been seen to produce a token is not trusted blind.
//
// Before larderd serves on CUDA, create_backend (engine/backend.h) runs a
// short fixed prompt through the candidate backend and through two CPU
// reference passes that read the weights in place and dequantize them to f32
// a few rows at a time (CpuForwardOptions::reference: the same f32 kernels
// on every build, no copy of the weights): `reference` on the activations
// rounded as the serving CPU quantizes them to int8, `f32_reference` on f32
// activations. It compares:
//   1. logits: every prompt row and one decode step, the candidate against
//      f32_reference (a GPU's F16 / F32 arithmetic is nearer to it);
//   2. pages: the candidate's pages holding the prompt's first 16 positions
//      are read out twice (read_pages, the spill path), written into other
//      pages (write_pages, the restore path) and read back, all of which
//      must give the same bytes (rows past position 15 of a partly filled
//      last page poisoned with NaN before the restore); then the rest of the
//      prompt is prefilled over the restored pages, and its logits are
//      compared with the candidate's cold prefill of the same rows.
// The tolerance follows the model: the spread, how far the two CPU
// references lie apart, says how much two legitimate arithmetics move this
// model's logits (little for a trained model, several per cent for a
// random-weight one, whose logits are nearly flat); the candidate may differ
// by max(max_rel_l2, spread_factor x the spread) and show at most
// max(min_argmax_allowed, spread_factor x the spread's) greedy-token
// differences against the CPU, spread_factor x the spread's over restored
// pages (see BackendCheckOptions).
// In `auto` mode a failed check logs these numbers and runs on the CPU; in
// `cuda` mode larderd refuses to start (docs/gpu.md). [engine] device_check
// = false skips it.
//
// The prompt: 24 token ids (whatever the page size: its cost at start stays
// that of a 24-token prefill), id_i = 1 + (i * 2654435761 mod 2^32) mod
// (n_vocab - 1) for the 16 restored positions (Knuth's multiplicative hash:
// spread over the vocabulary, the same on every run), then the first 8 of
// them again, so that a model that copies (induction heads) looks back into
// the restored pages. Their text does not matter: every backend sees the
// same ids.
#pragma once

#include <span>
#include <string>

#include "engine/backend.h"
#include "storage/status.h"

namespace larder {

// How two logits matrices [n_rows][n_vocab] differ, row by row.
struct LogitsDiff {
  int n_rows = 0;
  // max over rows of ||cand - ref||_2 / ||ref||_2 (+inf when a value of
  // either is not finite; 0 / 0 counts as 0), and the row where it is.
  double worst_rel_l2 = 0;
  int worst_row = -1;
  // Rows whose argmax differs, not counting near-ties: a row counts when the
  // reference's logit at the candidate's argmax is below the reference's
  // maximum by more than 2 x the row's RMS difference, sqrt(mean((cand -
  // ref)^2)): a swap the rounding alone could make is no mismatch.
  int argmax_differ = 0;
};

// Compares cand with ref, both [n_rows][n_vocab] f32. Sizes that differ or
// are not a multiple of n_vocab (or n_vocab <= 0) give worst_rel_l2 = +inf.
LogitsDiff compare_logits(std::span<const float> ref, std::span<const float> cand, int n_vocab);

struct BackendCheckOptions {
  int prompt_tokens = 24;
  int restored_tokens = 16;  // the first positions, spilled and restored (< prompt_tokens)
  // The tolerance, per logits row (rel. L2), for the candidate against the
  // CPU and for restored against cold on the candidate: max(max_rel_l2,
  // spread_factor x the worst row of the spread between the two CPU
  // references). Measured spreads (2026-12-06, tests and docs/gpu.md): 0 to
  // 2.2e-2 on the stories260K files, 3.9e-2 and 6.4e-2 on the random-weight
  // 1B-shaped Q8_0 and Q4_K_M files. A wrong kernel, a page in the wrong
  // place or a lost copy is off by O(1). The [gpu] tests allow 2e-2 for F16
  // weights on stories260K.
  double max_rel_l2 = 5e-2;
  double spread_factor = 2;
  // Greedy-token differences (beyond near-ties) against the CPU allowed at
  // least: one top-2 swap among the 25 rows can be F16 rounding where the
  // spread shows none. Restored against cold, on one device: no floor.
  int min_argmax_allowed = 1;
  // A spread above this fails the check: the model's logits move so much
  // with the arithmetic that no tolerance would tell a wrong device from a
  // right one.
  double max_spread = 0.25;
};

struct BackendCheck {
  bool passed = false;
  std::string failure;  // why it did not pass, in words; empty when it did
  int n_tokens = 0;     // prompt tokens
  int n_restored = 0;   // of them, the first ones, in the restored page(s)
  LogitsDiff spread;    // the CPU on int8 vs on f32 activations, the prompt rows
  double tolerance = 0;  // the rel. L2 bound applied (see BackendCheckOptions)
  int argmax_allowed = 0;          // greedy-token differences allowed against the CPU
  int restore_argmax_allowed = 0;  // and over restored pages (BackendCheckOptions)
  LogitsDiff logits;    // candidate vs the CPU on f32 activations, every row
  LogitsDiff restore;   // candidate over restored pages vs its cold prefill, rows n_restored..
  bool pages_compared = false;    // the page bytes were compared (a failure can cut the check short)
  bool pages_round_trip = false;  // bytes read twice, written elsewhere and read back were equal
  double candidate_seconds = 0;   // the candidate's share of the check (forward passes and copies)
  double reference_seconds = 0;   // the two CPU reference passes
  // Every number above in one line ("not run" for a step a failure cut
  // short), for the log and for errors.
  std::string numbers() const;
  // "passed: " or "FAILED: ", the numbers, and the failure in parentheses.
  std::string summary() const;
};

// Pages one sequence of the check takes at this page size: the reference
// needs this many free pages, the candidate twice as many.
int backend_check_pages(int page_size, const BackendCheckOptions& options = {});

// Runs the check (see the top of this file). The three backends must have the
// same KV layout; each reference needs backend_check_pages free pages, the
// candidate twice as many; the pages it takes are released before it
// returns. A candidate that fails a forward pass or a
// page copy gives passed = false with the error in `failure`.
// Errors: kInvalidArgument (layouts differ, page_size < 1, n_vocab < 2,
// restored_tokens not in [1, prompt_tokens), too few free pages), kInternal
// (the references' logits are not finite: the model itself), and the
// references' own errors, named as the CPU's.
Result<BackendCheck> check_backend(Backend& candidate, Backend& reference, Backend& f32_reference, int n_vocab,
                                   const BackendCheckOptions& options = {});

}  // namespace larder
