// DelegatingTier: a PageTier that forwards every call to another one, for
// test doubles that change one behaviour of a real tier (a read that
// fails for one key, a read that waits at a gate, stats that report a slow
// device) and keep the rest.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "storage/page_tier.h"

namespace larder::testing {

class DelegatingTier : public PageTier {
 public:
  DelegatingTier(std::shared_ptr<PageTier> inner, std::string name)
      : inner_(std::move(inner)), name_(std::move(name)) {}

  std::string_view name() const override { return name_; }
  std::vector<std::optional<std::string>> get_batch(std::span<const PageKey> keys, int64_t timeout_ms) override {
    return inner_->get_batch(keys, timeout_ms);
  }
  std::vector<bool> contains_batch(std::span<const PageKey> keys) const override { return inner_->contains_batch(keys); }
  int64_t entry_bytes(size_t record_bytes) const override { return inner_->entry_bytes(record_bytes); }
  Status set_budget(int64_t bytes) override { return inner_->set_budget(bytes); }
  Status set_policy(std::string_view policy) override { return inner_->set_policy(policy); }
  Status set_ttl(int64_t seconds) override { return inner_->set_ttl(seconds); }
  void pin(const PageKey& key) override { inner_->pin(key); }
  void unpin(const PageKey& key) override { inner_->unpin(key); }
  int64_t evict(std::span<const PageKey> keys) override { return inner_->evict(keys); }
  void set_evict_sink(EvictSink sink) override { inner_->set_evict_sink(std::move(sink)); }
  TierStats stats() const override { return inner_->stats(); }
  Status put(const PageKey& key, std::string_view record) override { return inner_->put(key, record); }
  Result<std::optional<std::string>> get(const PageKey& key) override { return inner_->get(key); }
  Status erase(const PageKey& key) override { return inner_->erase(key); }
  Status flush() override { return inner_->flush(); }

 protected:
  PageTier& inner() { return *inner_; }

 private:
  std::shared_ptr<PageTier> inner_;
  std::string name_;
};

}  // namespace larder::testing
