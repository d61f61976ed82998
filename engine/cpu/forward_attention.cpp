// CpuForward's attention of a batch over the threads: tiles of consecutive
// tokens of one sequence, split by heads, or, in a decode step at a long
// context, by chunks of positions (attention.h).
#include <algorithm>

#include "engine/cpu/attention.h"
#include "engine/cpu/forward_impl.h"

namespace larder {

bool CpuForward::Impl::attention_split(std::span<const BatchToken> batch, std::span<const SeqBlockTable> seqs,
                                       int layer, int64_t macs) {
  // Split-K attention (attention.h, kAttentionChunk): in a decode step with
  // fewer tokens than threads, each token's chunks of positions go to the
  // threads as items of whole kv heads (up to kAttentionDecodeHeads query
  // heads a run), and each run's chunk states are folded after, in order:
  // every thread streams K/V rows of its own pages (whole rows in AVX-512
  // builds), where splitting the heads had every thread read a slice of every
  // row. Same bits as one pass. At 16k positions (1B-shaped F16 K/V, 2
  // threads) a step's attention took 0.81-0.87x as long this way in AVX-512
  // builds, 0.87-0.9x in AVX2 ones (docs/cpu-kernels.md). Runs are cut smaller
  // where the chunks alone would leave threads idle (below); any run of
  // whole kv heads gives the same bits.
  const AttentionShape shape{hp.n_head, hp.n_head_kv, hp.head_dim};
  const int n_threads = threads.n_threads();
  if (n_threads == 1 || macs < kParallelMinMacs || int64_t(tiles.size()) >= n_threads ||
      !attention_splits(shape, pool.layout().dtype))
    return false;
  bool long_context = false;
  for (const Tile& tile : tiles) long_context = long_context || attention_chunks(batch[tile.first].pos) > 1;
  if (!long_context) return false;
  const int group = hp.n_head / hp.n_head_kv, n_tiles = int(tiles.size());
  const int per_tile = (n_threads + n_tiles - 1) / n_tiles;  // items wanted per token
  split_items.clear();
  size_t at = 0;
  for (int ti = 0; ti < n_tiles; ++ti) {
    const int pos = batch[tiles[size_t(ti)].first].pos, n_chunks = attention_chunks(pos);
    // The most kv heads a run takes such that one whole chunk of it is at
    // most a thread's share of the token's work (pos + 1 positions x
    // n_head_kv kv heads over per_tile threads), so that a short last chunk
    // leaves no thread idle: at 16k on 2 threads, all 8 kv heads of a 1B
    // model; at 1.1k, 4 (runs of 4 x chunks of 1024 and 77 positions).
    const int kv_per_run = int(std::clamp<int64_t>(
        int64_t(pos + 1) * hp.n_head_kv / (int64_t(per_tile) * kAttentionChunk), 1,
        std::min(hp.n_head_kv, std::max(1, kAttentionDecodeHeads / group))));
    const int run_heads = kv_per_run * group;
    for (int h0 = 0; h0 < hp.n_head; h0 += run_heads) {
      const int h1 = std::min(hp.n_head, h0 + run_heads);
      const size_t per_chunk = attention_partial_floats(shape, h1 - h0);
      for (int c = 0; c < n_chunks; ++c) split_items.push_back({ti, h0, h1, c, at + size_t(c) * per_chunk});
      at += size_t(n_chunks) * per_chunk;
    }
  }
  grow(partials, at);
  ++split_calls;
  threads.parallel_for(int64_t(split_items.size()), 1, [&](int64_t b, int64_t e, int thread) {
    float* sc = scores.data() + size_t(thread) * scores_stride;
    for (int64_t i = b; i < e; ++i) {
      const SplitItem& it = split_items[size_t(i)];
      const Tile& tile = tiles[size_t(it.tile)];
      const BatchToken& t = batch[tile.first];
      attend_token_chunk(pool, layer, seqs[t.seq].pages, t.pos, it.chunk, shape,
                         q.data() + size_t(tile.first) * hp.q_dim(), partials.data() + it.at, sc, it.h0, it.h1);
    }
  });
  // The fold: a few hundred bytes a head and chunk, on this thread.
  for (const SplitItem& it : split_items) {
    if (it.chunk != 0) continue;
    const Tile& tile = tiles[size_t(it.tile)];
    attend_token_merge(partials.data() + it.at, attention_chunks(batch[tile.first].pos), shape, pool.layout().dtype,
                       att.data() + size_t(tile.first) * hp.q_dim(), scores.data(), it.h0, it.h1);
  }
  return true;
}

void CpuForward::Impl::attention(std::span<const BatchToken> batch,
                                 std::span<const SeqBlockTable> seqs, int layer) {
  const AttentionShape shape{hp.n_head, hp.n_head_kv, hp.head_dim};
  const int n = int(batch.size());
  int64_t macs = 0;
  for (const BatchToken& t : batch) macs += int64_t(t.pos + 1) * 2 * hp.q_dim();
  // Tiles: runs of batch tokens of one sequence at consecutive positions (a
  // prefill chunk), up to kAttentionTileTokens each; a decode step's tokens are tiles
  // of one. Head chunks: up to kAttentionGroupHeads query heads of one kv head.
  tiles.clear();
  for (int i = 0; i < n; ++i) {
    const bool extends = !tiles.empty() && tiles.back().n < kAttentionTileTokens &&
                         batch[i].seq == batch[i - 1].seq && batch[i].pos == batch[i - 1].pos + 1;
    if (extends) {
      ++tiles.back().n;
    } else {
      tiles.push_back({i, 1});
    }
  }
  const int group = hp.n_head / hp.n_head_kv;
  const int64_t n_tiles = int64_t(tiles.size());
  // Items are (head chunk, tile) pairs, chunk-major: consecutive items read
  // the same kv head's K/V. A chunk is up to kAttentionGroupHeads query heads
  // of one kv head; in a decode step (every tile one token) it is instead a
  // run of whole kv heads (up to kAttentionDecodeHeads query heads), as few
  // runs as keep the threads busy, so that attend_tokens reads a page's K/V
  // rows once for all of them rather than one kv head's slice per pass.
  bool decode_step = true;
  for (const Tile& tile : tiles) decode_step = decode_step && tile.n == 1;
  if (decode_step && attention_split(batch, seqs, layer, macs)) return;
  // A span: the query heads of one kv head (prefill) or of one run of whole
  // kv heads (decode), cut into chunks of up to chunk_heads.
  int span = group, chunk_heads = std::min(group, kAttentionGroupHeads);
  if (decode_step) {
    const int64_t per_tile = std::max<int64_t>(1, (threads.n_threads() + n_tiles - 1) / n_tiles);
    const int kv_per_run = std::clamp(int((hp.n_head_kv + per_tile - 1) / per_tile), 1,
                                      std::max(1, kAttentionDecodeHeads / group));
    span = chunk_heads = kv_per_run * group;
  }
  const int chunks_per_span = (span + chunk_heads - 1) / chunk_heads;
  const int n_chunks = (hp.n_head + span - 1) / span * chunks_per_span;
  auto run = [&](int64_t b, int64_t e, int thread) {
    float* sc = scores.data() + size_t(thread) * scores_stride;
    for (int64_t it = b; it < e; ++it) {
      const int chunk = int(it / n_tiles);
      const Tile& tile = tiles[size_t(it % n_tiles)];
      const int h0 = chunk / chunks_per_span * span + chunk % chunks_per_span * chunk_heads;
      const int h1 = std::min({h0 + chunk_heads, (chunk / chunks_per_span + 1) * span, hp.n_head});
      const BatchToken& t = batch[tile.first];
      attend_tokens(pool, layer, seqs[t.seq].pages, t.pos, tile.n, shape,
                    q.data() + size_t(tile.first) * hp.q_dim(), att.data() + size_t(tile.first) * hp.q_dim(), sc,
                    h0, h1);
    }
  };
  const int64_t items = int64_t(n_chunks) * n_tiles;
  if (macs < kParallelMinMacs || threads.n_threads() == 1) {
    run(0, items, 0);
  } else {
    threads.parallel_for(items, 1, run);
  }
}

}  // namespace larder
