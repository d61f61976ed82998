#include "engine/draft_model.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include <spdlog/spdlog.h>

namespace larder {

Result<std::unique_ptr<DraftModel>> DraftModel::load(const std::string& path, const Tokenizer& target,
                                                     KvDtype dtype, int page_size, int n_pages,
                                                     int n_threads) {
  std::unique_ptr<DraftModel> d(new DraftModel());
  d->path_ = path;
  Result<std::unique_ptr<Model>> model = Model::load(path);
  if (!model.is_ok()) {
    return Status(model.status().code(), "engine.draft_model: " + model.status().message());
  }
  d->model_ = std::move(model).value();
  Result<std::unique_ptr<Tokenizer>> tok = Tokenizer::from_gguf(d->model_->gguf());
  if (!tok.is_ok()) {
    return Status(tok.status().code(), "engine.draft_model " + path + ": " + tok.status().message());
  }
  const LlamaHparams& hp = d->model_->hparams();
  const Tokenizer& mine = *tok.value();
  if (mine.n_vocab() != target.n_vocab() || hp.n_vocab != target.n_vocab()) {
    return Status::invalid_argument("engine.draft_model " + path + ": its vocabulary has " +
                                    std::to_string(mine.n_vocab()) + " tokens (the model " +
                                    std::to_string(hp.n_vocab) + "), the served model's " +
                                    std::to_string(target.n_vocab()) +
                                    "; a draft model must share the served model's vocabulary");
  }
  for (int32_t id = 0; id < target.n_vocab(); ++id) {
    if (mine.token_text(id) != target.token_text(id)) {
      return Status::invalid_argument("engine.draft_model " + path + ": token " + std::to_string(id) + " is '" +
                                      mine.token_text(id) + "' there and '" + target.token_text(id) +
                                      "' in the served model; a draft model must share the served model's vocabulary");
    }
  }
  d->n_vocab_ = hp.n_vocab;
  if (dtype == KvDtype::kQ8_0 && hp.kv_dim() % 32 != 0) dtype = KvDtype::kF16;
  BackendOptions bopt;
  bopt.device = "cpu";
  bopt.layout = KvLayout{hp.n_layer, hp.kv_dim(), page_size, dtype};
  bopt.n_pages = n_pages;
  bopt.n_threads = n_threads;
  Result<std::unique_ptr<Backend>> backend = create_backend(*d->model_, bopt);
  if (!backend.is_ok()) {
    return Status(backend.status().code(), "engine.draft_model " + path + ": " + backend.status().message());
  }
  d->backend_ = std::move(backend).value();
  d->logits_.resize(size_t(d->n_vocab_));
  return d;
}

std::string DraftModel::describe() const {
  const LlamaHparams& hp = model_->hparams();
  const KvLayout& lay = backend_->kv_layout();
  return path_ + ": " + std::to_string(hp.n_layer) + " layers, n_embd " + std::to_string(hp.n_embd) +
         ", vocab " + std::to_string(hp.n_vocab) + "; " + std::to_string(backend_->n_pages()) +
         " KV pages of " + std::to_string(lay.page_size) + " tokens (" +
         std::to_string(size_t(backend_->n_pages()) * lay.page_bytes()) + " bytes, " +
         kv_dtype_name(lay.dtype) + "), " + backend_->describe();
}

int DraftModel::n_free_pages() const { return backend_->pages().n_free(); }

bool DraftModel::ensure_pages(SeqState& s, int n_positions) {
  const int ps = backend_->kv_layout().page_size;
  while (int(s.pages.size()) * ps < n_positions) {
    std::optional<int> p = backend_->pages().allocate();
    if (!p) return false;
    s.pages.push_back(int32_t(*p));
  }
  return true;
}

void DraftModel::release(SeqState& s) {
  for (int32_t p : s.pages) backend_->pages().release(p);
  s.pages.clear();
  s.fed.clear();
}

void DraftModel::retain_only(std::span<const uint64_t> live) {
  const std::unordered_set<uint64_t> keep(live.begin(), live.end());
  for (auto it = seqs_.begin(); it != seqs_.end();) {
    if (keep.count(it->first) != 0) {
      ++it;
      continue;
    }
    release(it->second);
    it = seqs_.erase(it);
  }
}

bool DraftModel::feed(SeqState& s, std::span<const int32_t> tokens, int from) {
  std::vector<BatchToken> batch;
  batch.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    batch.push_back(BatchToken{tokens[i], from + int(i), 0, i + 1 == tokens.size()});
  }
  const SeqBlockTable table{std::span<const int32_t>(s.pages)};
  Status st = backend_->forward(batch, std::span<const SeqBlockTable>(&table, 1), tokens.size() > 1, logits_.data());
  if (!st.is_ok()) {
    log_limited_.log(spdlog::level::warn, "draft-forward", "draft model: " + st.to_string() + "; no draft this step");
    s.fed.resize(size_t(std::min<int>(int(s.fed.size()), from)));
    return false;
  }
  s.fed.resize(size_t(from));
  s.fed.insert(s.fed.end(), tokens.begin(), tokens.end());
  return true;
}

std::vector<int32_t> DraftModel::propose(uint64_t seq_id, std::span<const int32_t> tokens, int max_draft) {
  const int len = int(tokens.size());
  if (max_draft <= 0 || len == 0) return {};
  SeqState& s = seqs_[seq_id];
  // Keep the K/V of the common prefix, less the last token, which is fed
  // again for the logits after it.
  const size_t common = size_t(std::mismatch(s.fed.begin(), s.fed.end(), tokens.begin(), tokens.end()).first - s.fed.begin());
  const int keep = std::min(int(common), len - 1);
  s.fed.resize(size_t(keep));
  if (len - keep > kMaxCatchUp) {  // catch up first, draft in a later step
    if (ensure_pages(s, keep + kMaxCatchUp)) feed(s, tokens.subspan(size_t(keep), kMaxCatchUp), keep);
    return {};
  }
  // Positions written: up to len - 1 now, then one per draft token but the last.
  if (!ensure_pages(s, len)) return {};
  while (max_draft > 1 && !ensure_pages(s, len + max_draft - 1)) --max_draft;
  if (!feed(s, tokens.subspan(size_t(keep)), keep)) return {};
  std::vector<int32_t> draft;
  for (;;) {
    // Greedy: the first of the largest logits (as the sampler's greedy pick).
    const auto best = std::max_element(logits_.begin(), logits_.end());
    const float top = *best;
    double sum = 0;
    for (float l : logits_) sum += std::exp(double(l) - double(top));
    const double p = 1.0 / sum;  // softmax probability of the top token
    if (!draft.empty() && p < kMinProb) break;
    draft.push_back(int32_t(best - logits_.begin()));
    if (int(draft.size()) == max_draft) break;
    if (!feed(s, std::span<const int32_t>(&draft.back(), 1), len + int(draft.size()) - 1)) break;
  }
  return draft;
}

}  // namespace larder
