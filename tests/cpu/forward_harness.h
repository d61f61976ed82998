// Test harness for the CPU forward pass on a real GGUF model: a model, a page
// pool, a CpuForward, and sequences with their block tables.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "engine/cpu/forward.h"

namespace larder::testing {

struct ForwardHarness {
  std::unique_ptr<Model> model;
  std::unique_ptr<PagePool> pool;
  std::unique_ptr<CpuForward> fwd;
  std::vector<std::vector<int32_t>> pages;  // per sequence

  ForwardHarness(const std::string& path, KvDtype dtype, int n_threads, int n_pages = 256,
                 size_t embd_copy_bytes = CpuForwardOptions{}.embd_copy_bytes) {
    auto m = Model::load(path);
    REQUIRE(m.is_ok());
    model = std::move(m).value();
    const LlamaHparams& hp = model->hparams();
    KvLayout lay{hp.n_layer, hp.kv_dim(), 16, dtype};
    auto p = PagePool::create(lay, n_pages);
    REQUIRE(p.is_ok());
    pool = std::move(p).value();
    CpuForwardOptions o;
    o.n_threads = n_threads;
    o.embd_copy_bytes = embd_copy_bytes;
    auto f = CpuForward::create(*model, *pool, o);
    REQUIRE(f.is_ok());
    fwd = std::move(f).value();
  }
  ~ForwardHarness() {
    for (auto& s : pages)
      for (int32_t pg : s) pool->release(pg);
  }
  int n_vocab() const { return model->hparams().n_vocab; }

  // A new sequence whose block table covers positions [0, n_pos).
  int new_seq(int n_pos) {
    std::vector<int32_t> t;
    for (int i = 0; i < (n_pos + 15) / 16; ++i) {
      auto pg = pool->allocate();
      REQUIRE(pg.has_value());
      t.push_back(*pg);
    }
    pages.push_back(std::move(t));
    return int(pages.size()) - 1;
  }
  // The record bytes (PagePool::read_page) of page i of seq.
  std::vector<uint8_t> page_record(int seq, int i) const {
    std::vector<uint8_t> r(pool->layout().page_bytes());
    pool->read_page(pages[size_t(seq)][size_t(i)], r.data());
    return r;
  }
  std::vector<SeqBlockTable> tables() const {
    std::vector<SeqBlockTable> v;
    for (const auto& s : pages) v.push_back(SeqBlockTable{s});
    return v;
  }

  // Prefills tokens at positions start.. of seq; returns the last row's logits.
  std::vector<float> prefill(int seq, const std::vector<int32_t>& tokens, int start = 0) {
    std::vector<BatchToken> batch;
    for (size_t i = 0; i < tokens.size(); ++i)
      batch.push_back({tokens[i], start + int(i), seq, i + 1 == tokens.size()});
    std::vector<float> logits(n_vocab());
    auto tabs = tables();
    const Status st = fwd->forward(batch, tabs, /*prefill=*/true, logits.data());
    REQUIRE(st.is_ok());
    return logits;
  }

  // One decode step for several sequences: (seq, token, pos) each; logits
  // rows in the same order.
  std::vector<float> decode(const std::vector<BatchToken>& batch) {
    std::vector<float> logits(batch.size() * n_vocab());
    auto tabs = tables();
    const Status st = fwd->forward(batch, tabs, /*prefill=*/false, logits.data());
    REQUIRE(st.is_ok());
    return logits;
  }
};

// Greedy choice: argmax, ties to the lowest id.
inline int32_t argmax(const float* logits, int n) {
  int32_t best = 0;
  for (int i = 1; i < n; ++i)
    if (logits[i] > logits[best]) best = i;
  return best;
}

}  // namespace larder::testing
