// Packing of one forward() batch for the device, in plain C++ (no CUDA
// headers), so that it is tested on machines without a GPU.
//
// The CUDA kernels read everything about a batch from one int32 array that is
// uploaded with a single copy per step (PackedBatch): per token its id, its
// position and where its sequence's block table starts in the concatenated
// block tables; the attention tiles; the batch rows whose logits go to the
// host. A token at `pos` writes its K/V into page
// block_tables[table_start[t] + pos / page_size], slot pos % page_size, and
// attends over positions 0..pos of that table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/cpu/forward.h"
#include "storage/status.h"

namespace larder::cuda_plan {

// Batches of at most this many tokens use the GEMV kernels (weights read
// once, every token's dot products per weight row); larger ones cuBLAS GEMMs.
// Decode at batch <= 8 is memory-bound: a GEMM would read the same bytes
// with tensor-core tiles mostly empty.
constexpr int kGemvMaxTokens = 8;
enum class MatmulPath { kGemv, kGemm };
MatmulPath choose_matmul_path(int n_tokens);

// Query rows (token x query head of one KV head group) one attention block
// processes: 8 warps x 4 rows each.
constexpr int kAttnMaxRows = 32;
constexpr int kAttnMaxTileTokens = 16;
// Tokens per attention tile for a GQA group of `group` query heads per KV
// head: min(16, 32 / group); 0 when one token's group does not fit (group >
// 32: unsupported).
int attention_tile_tokens(int group);

// Consecutive tokens of one sequence with consecutive positions share one
// tile (they load each K/V chunk once). Tokens [first, first + n) of the
// batch; max_pos is the position of the last one.
struct AttentionTile {
  int32_t first_token = 0;
  int32_t n_tokens = 0;
  int32_t seq = 0;
  int32_t max_pos = 0;
};

struct BatchLimits {
  int n_vocab = 0;
  int page_size = 16;
  int n_pages = 0;
  int tile_tokens = 1;     // attention_tile_tokens(group)
};

struct DeviceBatchPlan {
  std::vector<int32_t> tokens;        // [n_tokens] token ids
  std::vector<int32_t> pos;           // [n_tokens] positions
  std::vector<int32_t> table_start;   // [n_tokens] offset of the token's block table in block_tables
  std::vector<int32_t> block_tables;  // concatenation of the sequences' tables (page ids)
  std::vector<int32_t> seq_table_offset;  // [n_seqs + 1] where each sequence's table starts
  std::vector<AttentionTile> tiles;
  std::vector<int32_t> logit_rows;    // batch indices of the tokens with want_logits, in order
  int32_t max_pos = 0;
  int n_tokens() const { return int(tokens.size()); }
};

// Validates and packs a batch (the checks of CpuForward::forward): token ids
// in [0, n_vocab), seq index valid, pos covered by the block table, page ids
// in [0, n_pages). Errors: kInvalidArgument naming the batch index.
Result<DeviceBatchPlan> plan_device_batch(std::span<const BatchToken> batch,
                                          std::span<const SeqBlockTable> seqs,
                                          const BatchLimits& limits);

// One int32 array holding the whole plan, and the offsets (in int32
// elements) of each part. Tiles take 4 int32 each (first, n, seq, max_pos).
struct PackedBatch {
  std::vector<int32_t> data;
  size_t tokens = 0, pos = 0, table_start = 0, tiles = 0, logit_rows = 0, block_tables = 0;
  int n_tokens = 0, n_tiles = 0, n_logit_rows = 0;
};
PackedBatch pack_batch(const DeviceBatchPlan& plan);

}  // namespace larder::cuda_plan
