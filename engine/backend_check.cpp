// The start-up check of an accelerator backend against the CPU
// (backend_check.h).
#include "engine/backend_check.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

namespace larder {

LogitsDiff compare_logits(std::span<const float> ref, std::span<const float> cand, int n_vocab) {
  LogitsDiff d;
  if (n_vocab <= 0 || ref.size() != cand.size() || ref.size() % size_t(n_vocab) != 0) {
    d.worst_rel_l2 = std::numeric_limits<double>::infinity();
    return d;
  }
  d.n_rows = int(ref.size() / size_t(n_vocab));
  for (int r = 0; r < d.n_rows; ++r) {
    const float* a = ref.data() + size_t(r) * size_t(n_vocab);
    const float* b = cand.data() + size_t(r) * size_t(n_vocab);
    double num = 0, den = 0;
    bool finite = true;
    int ref_arg = 0, cand_arg = 0;
    for (int i = 0; i < n_vocab; ++i) {
      finite = finite && std::isfinite(b[i]);
      const double diff = double(b[i]) - double(a[i]);
      num += diff * diff;
      den += double(a[i]) * double(a[i]);
      if (a[i] > a[ref_arg]) ref_arg = i;
      if (b[i] > b[cand_arg]) cand_arg = i;
    }
    double rel = 0;
    if (!finite || !std::isfinite(num)) {
      rel = std::numeric_limits<double>::infinity();
    } else if (num > 0) {
      rel = den > 0 ? std::sqrt(num / den) : std::numeric_limits<double>::infinity();
    }
    if (d.worst_row < 0 || !(rel <= d.worst_rel_l2)) {
      d.worst_rel_l2 = rel;
      d.worst_row = r;
    }
    const double rms = std::sqrt(num / n_vocab);
    if (cand_arg != ref_arg && !(double(a[ref_arg]) - double(a[cand_arg]) <= 2 * rms)) ++d.argmax_differ;
  }
  return d;
}

namespace {
// "worst rel. L2 X (row R), N argmax differences", or "not run".
std::string diff_text(const LogitsDiff& d) {
  if (d.n_rows == 0) return "not run";
  char buf[128];
  std::snprintf(buf, sizeof buf, "worst rel. L2 %.3g (row %d), %d argmax differences", d.worst_rel_l2, d.worst_row,
                d.argmax_differ);
  return buf;
}
}  // namespace

std::string BackendCheck::numbers() const {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "%d prompt tokens + 1 decode step; the CPU on int8 vs f32 activations: worst rel. L2 %.3g, "
                "%d argmax differences; tolerance %.3g rel. L2, %d argmax differences (%d over restored pages); ",
                n_tokens, spread.worst_rel_l2, spread.argmax_differ, tolerance, argmax_allowed,
                restore_argmax_allowed);
  std::string s = buf;
  s += "logits vs the CPU: " + diff_text(logits) + "; the pages of the first " + std::to_string(n_restored) +
       " tokens read, written elsewhere and read back: ";
  s += !pages_compared ? "not run" : pages_round_trip ? "equal" : "NOT equal";
  s += "; prefill over the restored pages vs cold: " + diff_text(restore);
  std::snprintf(buf, sizeof buf, "; %.2f s on the candidate, %.2f s on the CPU", candidate_seconds,
                reference_seconds);
  return s + buf;
}

std::string BackendCheck::summary() const {
  std::string s = std::string(passed ? "passed: " : "FAILED: ") + numbers();
  if (!failure.empty()) s += " (" + failure + ")";
  return s;
}

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Pages taken from a backend's free list for the check, given back at the end.
class CheckPages {
 public:
  explicit CheckPages(Backend& b) : b_(b) {}
  ~CheckPages() {
    for (int32_t p : taken_) b_.pages().release(p);
  }
  CheckPages(const CheckPages&) = delete;
  CheckPages& operator=(const CheckPages&) = delete;
  // n pages, or nullopt when the pool has fewer free.
  std::optional<std::vector<int32_t>> take(int n) {
    std::vector<int32_t> v;
    for (int i = 0; i < n; ++i) {
      std::optional<int> p = b_.pages().allocate();
      if (!p) return std::nullopt;
      taken_.push_back(*p);
      v.push_back(*p);
    }
    return v;
  }

 private:
  Backend& b_;
  std::vector<int32_t> taken_;
};

// A prefill of tokens[from..) at positions from.. over `table`: every row's
// logits into `logits` (resized).
Status prefill(Backend& b, std::span<const int32_t> tokens, int from, std::span<const int32_t> table, int n_vocab,
               std::vector<float>& logits) {
  std::vector<BatchToken> batch;
  for (size_t i = size_t(from); i < tokens.size(); ++i) batch.push_back({tokens[i], int32_t(i), 0, true});
  const SeqBlockTable seq{table};
  logits.assign(batch.size() * size_t(n_vocab), 0.0f);
  return b.forward(batch, std::span<const SeqBlockTable>(&seq, 1), true, logits.data());
}

// One decode step of `token` at `pos` over `table`: its logits appended.
Status decode_step(Backend& b, int32_t token, int pos, std::span<const int32_t> table, int n_vocab,
                   std::vector<float>& logits) {
  const SeqBlockTable seq{table};
  const BatchToken step{token, int32_t(pos), 0, true};
  const size_t at = logits.size();
  logits.resize(at + size_t(n_vocab));
  return b.forward(std::span<const BatchToken>(&step, 1), std::span<const SeqBlockTable>(&seq, 1), false,
                   logits.data() + at);
}

}  // namespace

int backend_check_pages(int page_size, const BackendCheckOptions& options) {
  if (page_size < 1) return 0;
  return (options.prompt_tokens + 1 + page_size - 1) / page_size;  // the prompt and the decode step
}

Result<BackendCheck> check_backend(Backend& candidate, Backend& reference, Backend& f32_reference, int n_vocab,
                                   const BackendCheckOptions& options) {
  const KvLayout& lay = candidate.kv_layout();
  if (!(lay == reference.kv_layout()) || !(lay == f32_reference.kv_layout()))
    return Status::invalid_argument("backend check: the candidate's and the references' KV layouts differ");
  if (n_vocab < 2) return Status::invalid_argument("backend check: n_vocab " + std::to_string(n_vocab));
  const int ps = lay.page_size;
  BackendCheck c;
  if (ps < 1) return Status::invalid_argument("backend check: page_size " + std::to_string(ps));
  if (options.restored_tokens < 1 || options.restored_tokens >= options.prompt_tokens)
    return Status::invalid_argument("backend check: restored_tokens " + std::to_string(options.restored_tokens) +
                                    " not in [1, prompt_tokens " + std::to_string(options.prompt_tokens) + ")");
  c.n_tokens = options.prompt_tokens;
  c.n_restored = options.restored_tokens;
  // The pages holding positions 0 .. n_restored - 1; a last one only partly
  // filled is copied whole, and the rest of the prompt writes its other rows.
  const int n_restored_pages = (c.n_restored + ps - 1) / ps;
  const int seq_pages = backend_check_pages(ps, options);
  std::vector<int32_t> tokens(size_t(c.n_tokens));
  for (int i = 0; i < c.n_tokens; ++i) {
    const int j = i < c.n_restored ? i : i - c.n_restored;  // the rows after the restored ones repeat the first
    tokens[size_t(i)] = int32_t(1 + (uint32_t(j) * 2654435761u) % uint32_t(n_vocab - 1));
  }

  CheckPages ref_pages(reference), f32_pages(f32_reference), cand_pages(candidate);
  std::optional<std::vector<int32_t>> ref_table = ref_pages.take(seq_pages);
  std::optional<std::vector<int32_t>> f32_table = f32_pages.take(seq_pages);
  std::optional<std::vector<int32_t>> cold = cand_pages.take(seq_pages);
  std::optional<std::vector<int32_t>> restored = cand_pages.take(seq_pages);
  if (!ref_table || !f32_table || !cold || !restored)
    return Status::invalid_argument("backend check: needs " + std::to_string(seq_pages) +
                                    " free pages on each CPU reference and " + std::to_string(2 * seq_pages) +
                                    " on the candidate");

  // The CPU's logits, both ways: the prompt, then a decode step of the
  // served arithmetic's greedy token (what a chat would run next).
  std::vector<float> ref_logits, f32_logits;
  Clock::time_point t0 = Clock::now();
  Status ref_st = prefill(reference, tokens, 0, *ref_table, n_vocab, ref_logits);
  const auto last = ref_logits.end() - n_vocab;
  const int32_t next = int32_t(std::max_element(last, ref_logits.end()) - last);
  if (ref_st.is_ok()) ref_st = prefill(f32_reference, tokens, 0, *f32_table, n_vocab, f32_logits);
  if (ref_st.is_ok()) ref_st = decode_step(f32_reference, next, c.n_tokens, *f32_table, n_vocab, f32_logits);
  if (!ref_st.is_ok()) return Status(ref_st.code(), "backend check, the CPU reference: " + ref_st.message());
  c.reference_seconds = since(t0);
  // The spread over the prompt rows (the int8 pass runs no decode step: a
  // fourth pass over the weights for one row).
  c.spread = compare_logits(std::span<const float>(f32_logits.data(), ref_logits.size()), ref_logits, n_vocab);
  if (!std::isfinite(c.spread.worst_rel_l2))
    return Status::internal("backend check: the CPU reference's logits are not finite (the model's weights?)");
  c.tolerance = std::max(options.max_rel_l2, options.spread_factor * c.spread.worst_rel_l2);
  c.restore_argmax_allowed = int(options.spread_factor * c.spread.argmax_differ);
  c.argmax_allowed = std::max(options.min_argmax_allowed, c.restore_argmax_allowed);

  t0 = Clock::now();
  auto fail = [&](const std::string& why) {
    c.failure = why;
    c.passed = false;
    c.candidate_seconds = since(t0);
    return c;
  };
  std::vector<float> cand_logits;
  Status cand_st = prefill(candidate, tokens, 0, *cold, n_vocab, cand_logits);
  if (cand_st.is_ok()) cand_st = decode_step(candidate, next, c.n_tokens, *cold, n_vocab, cand_logits);
  if (!cand_st.is_ok()) return fail("forward pass: " + cand_st.to_string());
  c.logits = compare_logits(f32_logits, cand_logits, n_vocab);

  // Spill and restore of the pages of the first n_restored positions, then
  // the rest of the prompt over them.
  // The pages are read out twice, into buffers that start as two different
  // byte patterns, and must agree: a spill that writes nothing (or not all
  // of a page) shows, as does a restore that writes nothing when the
  // restored pages are read back into the second pattern. In the last page,
  // the rows past n_restored are poisoned (all bytes 0xFF: NaN in f32 and
  // f16, and a NaN scale in q8_0) before the restore: the prefill of the
  // rest must write its own K/V there, or its logits are not finite.
  const size_t bytes = size_t(n_restored_pages) * lay.page_bytes();
  std::vector<uint8_t> out(bytes, 0xA5), again(bytes, 0x5A), back(bytes, 0x5A);
  const std::span<const int32_t> from(cold->data(), size_t(n_restored_pages));
  const std::span<const int32_t> to(restored->data(), size_t(n_restored_pages));
  if (Status st = candidate.read_pages(from, out); !st.is_ok()) return fail("read_pages: " + st.to_string());
  if (Status st = candidate.read_pages(from, again); !st.is_ok()) return fail("read_pages: " + st.to_string());
  const bool read_twice_equal = std::memcmp(out.data(), again.data(), bytes) == 0;
  if (const int first = c.n_restored - (n_restored_pages - 1) * ps; first < ps) {
    uint8_t* page = out.data() + size_t(n_restored_pages - 1) * lay.page_bytes();
    for (int l = 0; l < lay.n_layer; ++l)
      for (int kv = 0; kv < 2; ++kv) {
        uint8_t* block = page + (size_t(l) * 2 + size_t(kv)) * lay.block_bytes();
        std::memset(block + size_t(first) * lay.row_bytes(), 0xFF, size_t(ps - first) * lay.row_bytes());
      }
  }
  if (Status st = candidate.write_pages(to, out); !st.is_ok()) return fail("write_pages: " + st.to_string());
  if (Status st = candidate.read_pages(to, back); !st.is_ok()) return fail("read_pages: " + st.to_string());
  c.pages_compared = true;
  c.pages_round_trip = read_twice_equal && std::memcmp(out.data(), back.data(), bytes) == 0;
  std::vector<float> rest;
  if (Status st = prefill(candidate, tokens, c.n_restored, *restored, n_vocab, rest); !st.is_ok())
    return fail("forward pass over restored pages: " + st.to_string());
  const size_t rest_rows = size_t(c.n_tokens - c.n_restored);
  c.restore = compare_logits(
      std::span<const float>(cand_logits.data() + size_t(c.n_restored) * size_t(n_vocab), rest_rows * size_t(n_vocab)),
      rest, n_vocab);
  c.candidate_seconds = since(t0);

  std::string why;
  auto need = [&](bool ok, const std::string& what) {
    if (ok) return;
    if (!why.empty()) why += "; ";
    why += what;
  };
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "the CPU's own two arithmetics differ by more than %.3g on this model: too much to tell a wrong "
                "device from a right one",
                options.max_spread);
  need(c.spread.worst_rel_l2 <= options.max_spread, buf);
  std::snprintf(buf, sizeof buf, "logits differ from the CPU's by more than %.3g", c.tolerance);
  need(c.logits.worst_rel_l2 <= c.tolerance, buf);
  need(c.logits.argmax_differ <= c.argmax_allowed, "greedy tokens differ from the CPU's");
  need(c.pages_round_trip, "a page read out twice, or written and read back, came back changed");
  std::snprintf(buf, sizeof buf, "logits over restored pages differ from a cold prefill by more than %.3g",
                c.tolerance);
  need(c.restore.worst_rel_l2 <= c.tolerance, buf);
  need(c.restore.argmax_differ <= c.restore_argmax_allowed,
       "greedy tokens over restored pages differ from a cold prefill");
  c.passed = why.empty();
  c.failure = why;
  return c;
}

}  // namespace larder
