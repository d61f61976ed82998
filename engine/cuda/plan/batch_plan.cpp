#include "engine/cuda/plan/batch_plan.h"

#include <algorithm>
#include <string>

namespace larder::cuda_plan {

MatmulPath choose_matmul_path(int n_tokens) {
  return n_tokens <= kGemvMaxTokens ? MatmulPath::kGemv : MatmulPath::kGemm;
}

int attention_tile_tokens(int group) {
  if (group <= 0 || group > kAttnMaxRows) return 0;
  return std::min(kAttnMaxTileTokens, kAttnMaxRows / group);
}

Result<DeviceBatchPlan> plan_device_batch(std::span<const BatchToken> batch,
                                          std::span<const SeqBlockTable> seqs,
                                          const BatchLimits& limits) {
  DeviceBatchPlan plan;
  if (limits.tile_tokens <= 0) return Status::invalid_argument("attention tile of 0 tokens");
  plan.seq_table_offset.reserve(seqs.size() + 1);
  for (size_t s = 0; s < seqs.size(); ++s) {
    plan.seq_table_offset.push_back(int32_t(plan.block_tables.size()));
    for (int32_t p : seqs[s].pages) {
      if (p < 0 || p >= limits.n_pages)
        return Status::invalid_argument("seq " + std::to_string(s) + ": page id " + std::to_string(p) +
                                        " outside the pool");
      plan.block_tables.push_back(p);
    }
  }
  plan.seq_table_offset.push_back(int32_t(plan.block_tables.size()));

  const size_t n = batch.size();
  plan.tokens.reserve(n);
  plan.pos.reserve(n);
  plan.table_start.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const BatchToken& t = batch[i];
    if (t.token < 0 || t.token >= limits.n_vocab)
      return Status::invalid_argument("batch[" + std::to_string(i) + "]: token id " +
                                      std::to_string(t.token) + " outside [0, " +
                                      std::to_string(limits.n_vocab) + ")");
    if (t.seq < 0 || size_t(t.seq) >= seqs.size())
      return Status::invalid_argument("batch[" + std::to_string(i) + "]: seq index " +
                                      std::to_string(t.seq) + " outside [0, " +
                                      std::to_string(seqs.size()) + ")");
    if (t.pos < 0 || size_t(t.pos / limits.page_size) >= seqs[size_t(t.seq)].pages.size())
      return Status::invalid_argument("batch[" + std::to_string(i) + "]: pos " + std::to_string(t.pos) +
                                      " not covered by the block table of seq " + std::to_string(t.seq));
    plan.tokens.push_back(t.token);
    plan.pos.push_back(t.pos);
    plan.table_start.push_back(plan.seq_table_offset[size_t(t.seq)]);
    plan.max_pos = std::max(plan.max_pos, t.pos);
    if (t.want_logits) plan.logit_rows.push_back(int32_t(i));

    // Extend the current tile when this token continues it.
    if (!plan.tiles.empty()) {
      AttentionTile& last = plan.tiles.back();
      if (last.seq == t.seq && t.pos == last.max_pos + 1 && last.n_tokens < limits.tile_tokens &&
          size_t(last.first_token + last.n_tokens) == i) {
        ++last.n_tokens;
        last.max_pos = t.pos;
        continue;
      }
    }
    plan.tiles.push_back(AttentionTile{int32_t(i), 1, t.seq, t.pos});
  }
  return plan;
}

PackedBatch pack_batch(const DeviceBatchPlan& plan) {
  PackedBatch p;
  p.n_tokens = plan.n_tokens();
  p.n_tiles = int(plan.tiles.size());
  p.n_logit_rows = int(plan.logit_rows.size());
  auto append = [&](const std::vector<int32_t>& v) {
    const size_t at = p.data.size();
    p.data.insert(p.data.end(), v.begin(), v.end());
    return at;
  };
  p.tokens = append(plan.tokens);
  p.pos = append(plan.pos);
  p.table_start = append(plan.table_start);
  p.tiles = p.data.size();
  for (const AttentionTile& t : plan.tiles) {
    p.data.insert(p.data.end(), {t.first_token, t.n_tokens, t.seq, t.max_pos});
  }
  p.logit_rows = append(plan.logit_rows);
  p.block_tables = append(plan.block_tables);
  return p;
}

}  // namespace larder::cuda_plan
