// Real KV page records for the disk-tier benchmarks: runs the engine on a
// GGUF model (the test model stories260K by default) with a disk tier,
// decodes a few prompts with greedy sampling so their pages are sealed and
// written, stops the engine (flushing the writes), then reads every record
// back from the RocksDB store it wrote. Exits the program on any failure.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "storage/open_tiers.h"
#include "storage/rocksdb_store.h"

namespace larder::bench {

struct RealPages {
  std::vector<std::string> records;  // encoded page records, as stored
  int64_t bytes = 0;                 // their total size
};

// kv_dtype: "f32" or "f16". n_requests prompts (the reference "long" text
// cut at different places) decode max_tokens tokens each.
inline RealPages real_page_records(const std::string& model_path, const std::string& kv_dtype,
                                   int n_requests, int max_tokens, int n_threads) {
  TempDir dir("larder-bench-pages");
  const std::string text = reference_prompt(reference_path(model_path), "long");
  {
    EngineOptions opt;
    opt.model_path = model_path;
    opt.cache.disk.dir = dir.str();
    opt.cache.kv_dtype = kv_dtype;
    opt.open_tiers = tier_factory();
    opt.n_threads = n_threads;
    auto engine = make_engine(opt);
    const std::vector<int32_t> all = engine->tokenize(text, false);
    for (int r = 0; r < n_requests; ++r) {
      // Different prefixes: a different start per request (no shared pages).
      const size_t start = (size_t(r) * 37) % (all.size() / 2);
      std::vector<int32_t> prompt(all.begin() + ptrdiff_t(start), all.end());
      GenerationRequest req = greedy(std::move(prompt), max_tokens);
      req.sampling.temperature = 0.8f;  // varied continuations
      req.sampling.seed = uint64_t(r + 1);
      (void)run_request(*engine, std::move(req));
    }
    engine->flush_storage();
    engine->stop();
  }
  RocksDbStoreOptions so;
  so.dir = dir.str();
  auto store = RocksDbPageStore::open(so);
  if (!store.is_ok()) {
    std::fprintf(stderr, "open %s: %s\n", so.dir.c_str(), store.status().to_string().c_str());
    std::exit(1);
  }
  RealPages out;
  for (const PageKey& k : (*store)->keys()) {
    auto r = (*store)->get(k);
    if (!r.is_ok() || !r->has_value()) {
      std::fprintf(stderr, "read back %s: %s\n", k.to_hex().c_str(), r.status().to_string().c_str());
      std::exit(1);
    }
    out.bytes += int64_t((*r)->size());
    out.records.push_back(std::move(**r));
  }
  if (out.records.empty()) {
    std::fprintf(stderr, "the engine wrote no page records to %s\n", so.dir.c_str());
    std::exit(1);
  }
  return out;
}

}  // namespace larder::bench
