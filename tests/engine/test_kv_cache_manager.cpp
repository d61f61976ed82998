// KvCacheManager over a fake backend that counts its page copies: pages
// the device evicts go down to the host tier in one batched copy out of
// the device, not one call per page (issue "the cache as the product",
// item 4), and the records that arrive hold exactly the bytes and tokens
// each page had.
#include <cstring>
#include <numeric>

#include <catch2/catch.hpp>

#include "engine/backend.h"
#include "engine/kv/kv_cache_manager.h"
#include "engine/kv/prefix_hash.h"
#include "storage/memory_store.h"
#include "storage/tier_chain.h"

using namespace larder;

namespace {

// Page bytes in a host pool; forward() is never called here.
class CountingBackend final : public Backend {
 public:
  CountingBackend(const KvLayout& layout, int n_pages) : pool_(PagePool::create(layout, n_pages).value()) {}

  const char* name() const override { return "counting"; }
  std::string describe() const override { return "counting"; }
  std::string numerics_id() const override { return "counting"; }
  PagePool& pages() override { return *pool_; }
  const PagePool& pages() const override { return *pool_; }
  Status forward(std::span<const BatchToken>, std::span<const SeqBlockTable>, bool, float*) override {
    return Status::unsupported("no forward pass in this test");
  }
  Status read_pages(std::span<const int32_t> pages, std::span<uint8_t> out) override {
    read_calls.push_back(int(pages.size()));
    const size_t pb = pool_->layout().page_bytes();
    REQUIRE(out.size() == pages.size() * pb);
    for (size_t i = 0; i < pages.size(); ++i) pool_->read_page(pages[i], out.data() + i * pb);
    return Status::ok();
  }
  Status write_pages(std::span<const int32_t> pages, std::span<const uint8_t> in) override {
    const size_t pb = pool_->layout().page_bytes();
    REQUIRE(in.size() == pages.size() * pb);
    for (size_t i = 0; i < pages.size(); ++i) pool_->write_page(pages[i], in.data() + i * pb);
    return Status::ok();
  }

  std::vector<int> read_calls;  // pages per read_pages call, in order

 private:
  std::unique_ptr<PagePool> pool_;
};

}  // namespace

TEST_CASE("pages the device evicts go down to the host tier in one batched copy", "[engine][kv]") {
  KvLayout layout;
  layout.n_layer = 1;
  layout.kv_dim = 4;
  layout.page_size = 16;  // 1 layer * 2 * 16 * 4 * 4 bytes = 512 bytes a page
  REQUIRE(layout.page_bytes() == 512);
  CountingBackend backend(layout, 4);
  auto host = std::shared_ptr<MemoryPageStore>(MemoryPageStore::create({}).value());
  TierChain chain({TierSlot{host, /*persistent=*/false}}, TierChainOptions{});
  PageRecordMeta meta;
  meta.n_layers = 1;
  meta.page_size = 16;
  meta.kv_dim = 4;
  KvCacheManager kv(backend, meta, &chain, /*write_through=*/true);

  // Sequence A: 64 tokens (ids 0..63) in all 4 pages; page j's bytes are
  // all 0x10 + j, written before sealing.
  std::vector<int32_t> tokens_a(64);
  std::iota(tokens_a.begin(), tokens_a.end(), 0);
  SeqPages a;
  a.root = PageKey{1, 2};
  REQUIRE(kv.ensure_pages(a, 64));
  REQUIRE(a.block_table.size() == 4);
  for (int j = 0; j < 4; ++j) {
    std::vector<uint8_t> bytes(512, uint8_t(0x10 + j));
    REQUIRE(backend.write_page(a.block_table[size_t(j)], bytes).is_ok());
  }
  kv.commit(a, tokens_a, 64);
  const std::vector<PageKey> keys_a = a.keys;
  REQUIRE(keys_a.size() == 4);
  kv.release(a);
  REQUIRE(kv.n_resident() == 4);
  backend.read_calls.clear();

  // Sequence B needs all 4 pages: every page of A is evicted, and the four
  // are copied out in one call before B owns them.
  SeqPages b;
  b.root = PageKey{3, 4};
  REQUIRE(kv.ensure_pages(b, 64));
  CHECK(backend.read_calls == std::vector<int>{4});
  CHECK(kv.stats().pages_demoted == 4);
  CHECK(kv.n_resident() == 0);
  // B writes its pages; what reached the host tier is still A's.
  for (int page : b.block_table) REQUIRE(backend.write_page(page, std::vector<uint8_t>(512, 0xEE)).is_ok());
  chain.flush();
  for (int j = 0; j < 4; ++j) {
    INFO("page " << j);
    Result<std::optional<std::string>> record = host->get(keys_a[size_t(j)]);
    REQUIRE(record.is_ok());
    REQUIRE(record->has_value());
    std::vector<uint8_t> payload(512);
    std::span<const int32_t> page_tokens(tokens_a.data() + 16 * j, 16);
    REQUIRE(decode_page_record(**record, keys_a[size_t(j)], meta, page_tokens, payload).is_ok());
    CHECK(payload == std::vector<uint8_t>(512, uint8_t(0x10 + j)));
  }
  kv.release(b);
}

TEST_CASE("fork shares the full pages by reference and copies the partial last one", "[engine][kv]") {
  KvLayout layout;
  layout.n_layer = 1;
  layout.kv_dim = 4;
  layout.page_size = 16;  // 512-byte pages
  CountingBackend backend(layout, 5);
  PageRecordMeta meta;
  meta.n_layers = 1;
  meta.page_size = 16;
  meta.kv_dim = 4;
  KvCacheManager kv(backend, meta, nullptr, /*write_through=*/false);

  // The parent: 40 positions = 2 full pages + 8 positions of a third; page
  // j's bytes are all 0x20 + j.
  std::vector<int32_t> tokens(40);
  std::iota(tokens.begin(), tokens.end(), 100);
  SeqPages parent;
  parent.root = PageKey{3, 4};
  REQUIRE(kv.ensure_pages(parent, 40));
  for (int j = 0; j < 3; ++j) {
    std::vector<uint8_t> bytes(512, uint8_t(0x20 + j));
    REQUIRE(backend.write_page(parent.block_table[size_t(j)], bytes).is_ok());
  }
  kv.commit(parent, tokens, 40);
  REQUIRE(parent.keys.size() == 2);
  REQUIRE(kv.n_free() == 2);

  SeqPages child;
  child.root = parent.root;
  REQUIRE(kv.fork(parent, child, 40));
  REQUIRE(child.block_table.size() == 3);
  CHECK(child.block_table[0] == parent.block_table[0]);
  CHECK(child.block_table[1] == parent.block_table[1]);
  CHECK(child.block_table[2] != parent.block_table[2]);
  CHECK(child.keys == parent.keys);
  CHECK(kv.device().ref_count(parent.block_table[0]) == 2);
  CHECK(kv.device().ref_count(parent.block_table[2]) == 1);
  CHECK(kv.n_free() == 1);  // one page taken: the copy
  std::vector<uint8_t> copied(512);
  REQUIRE(backend.read_page(child.block_table[2], copied).is_ok());
  CHECK(copied == std::vector<uint8_t>(512, 0x22));
  CHECK(kv.stats().pages_shared_fork == 2);
  CHECK(kv.stats().pages_copied_fork == 1);
  // Neither holds the other's partial page, and the child's pages are its own to release.
  CHECK(kv.n_exclusive(child) == 1);

  // One free page left: a second child gets it, a third none (unchanged).
  SeqPages second, third;
  REQUIRE(kv.fork(parent, second, 40));
  CHECK_FALSE(kv.fork(parent, third, 40));
  CHECK(third.block_table.empty());
  CHECK(kv.device().ref_count(parent.block_table[0]) == 3);

  kv.release(child);
  kv.release(second);
  CHECK(kv.device().ref_count(parent.block_table[0]) == 1);
  CHECK(kv.n_free() == 2);
  // On a page boundary there is nothing to copy.
  SeqPages aligned;
  REQUIRE(kv.fork(parent, aligned, 32));
  CHECK(aligned.block_table.size() == 2);
  CHECK(kv.n_free() == 2);
  CHECK(kv.stats().pages_copied_fork == 2);
}
