#include "engine/draft_model.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include <spdlog/spdlog.h>

#include "engine/sampling/logprobs.h"
#include "engine/sampling/sampler.h"

namespace larder {

Status DraftModel::check_vocabulary(const std::string& path, const Tokenizer& mine, const Tokenizer& target) {
  if (mine.n_vocab() != target.n_vocab()) {
    return Status::invalid_argument("engine.draft_model: " + path + ": its vocabulary has " +
                                    std::to_string(mine.n_vocab()) + " tokens, the served model's " +
                                    std::to_string(target.n_vocab()) +
                                    "; a draft model must share the served model's vocabulary");
  }
  for (int32_t id = 0; id < target.n_vocab(); ++id) {
    if (mine.token_text(id) != target.token_text(id)) {
      return Status::invalid_argument("engine.draft_model: " + path + ": token " + std::to_string(id) + " is '" +
                                      mine.token_text(id) + "' there and '" + target.token_text(id) +
                                      "' in the served model; a draft model must share the served model's vocabulary");
    }
  }
  return Status::ok();
}

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
    return Status(tok.status().code(), "engine.draft_model: " + path + ": " + tok.status().message());
  }
  const LlamaHparams& hp = d->model_->hparams();
  const Tokenizer& mine = *tok.value();
  LARDER_RETURN_IF_ERROR(check_vocabulary(path, mine, target));
  if (hp.n_vocab != mine.n_vocab()) {
    return Status::corruption("engine.draft_model: " + path + ": its vocabulary has " +
                              std::to_string(mine.n_vocab()) + " tokens but its output layer " +
                              std::to_string(hp.n_vocab) + " rows");
  }
  d->n_vocab_ = hp.n_vocab;
  if (dtype == KvDtype::kQ8_0 && hp.kv_dim() % 32 != 0) dtype = KvDtype::kF16;
  spdlog::info("draft model {}: vocabulary checked, preparing its weights", path);
  BackendOptions bopt;
  bopt.device = "cpu";
  bopt.layout = KvLayout{hp.n_layer, hp.kv_dim(), page_size, dtype};
  bopt.n_pages = n_pages;
  bopt.n_threads = n_threads;
  Result<std::unique_ptr<Backend>> backend = create_backend(*d->model_, bopt);
  if (!backend.is_ok()) {
    return Status(backend.status().code(), "engine.draft_model: " + path + ": " + backend.status().message());
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

bool DraftModel::forward(std::span<const BatchToken> batch, std::span<const SeqBlockTable> tables) {
  size_t rows = 0;
  for (const BatchToken& t : batch) rows += t.want_logits ? 1 : 0;
  logits_.resize(std::max<size_t>(rows, 1) * size_t(n_vocab_));
  // The GEMM path when some sequence feeds more than one token.
  const bool prefill = batch.size() > tables.size();
  Status st = backend_->forward(batch, tables, prefill, logits_.data());
  if (!st.is_ok()) {
    log_limited_.log(spdlog::level::warn, "draft-forward", "draft model: " + st.to_string() + "; no draft this step");
    return false;
  }
  return true;
}

std::vector<std::vector<int32_t>> DraftModel::propose(std::span<const Request> requests) {
  std::vector<std::vector<int32_t>> out(requests.size());
  struct Drafting {
    size_t request;
    SeqState* s;
    int len;        // the sequence's tokens; draft token j (1-based) goes to position len + j - 1
    int max_draft;
  };
  struct Fed {
    SeqState* s;
    std::span<const int32_t> tokens;  // fed at positions s->fed.size()..
  };
  std::vector<BatchToken> batch;
  std::vector<SeqBlockTable> tables;
  std::vector<Drafting> drafting;
  std::vector<Fed> fed;
  std::unordered_set<uint64_t> seen;
  int budget = kMaxCatchUp;
  for (size_t i = 0; i < requests.size() && budget > 0; ++i) {
    const Request& r = requests[i];
    if (r.max_draft <= 0 || r.tokens.empty() || !seen.insert(r.seq_id).second) continue;
    SeqState& s = seqs_[r.seq_id];
    // The window: the draft model sees tokens[start ..) at positions 0..;
    // once that passes 2 kWindow tokens it starts again at the last kWindow.
    const int n_tokens = int(r.tokens.size());
    if (s.start > n_tokens - 1 || n_tokens - s.start > 2 * kWindow) {
      const int start = std::max(0, n_tokens - kWindow);
      if (start != s.start) {
        s.start = start;
        s.fed.clear();
      }
    }
    const std::span<const int32_t> tokens = r.tokens.subspan(size_t(s.start));
    const int len = int(tokens.size());
    // Keep the K/V of the common prefix, less the last token, which is fed
    // again for the logits after it.
    const size_t common =
        size_t(std::mismatch(s.fed.begin(), s.fed.end(), tokens.begin(), tokens.end()).first - s.fed.begin());
    const int keep = std::min(int(common), len - 1);
    s.fed.resize(size_t(keep));
    const bool drafts = len - keep <= budget;  // else: catch up, draft in a later call
    const int n_feed = drafts ? len - keep : budget;
    if (!ensure_pages(s, keep + n_feed)) continue;
    int max_draft = r.max_draft;
    // Positions written: one per draft token but the last.
    while (drafts && max_draft > 1 && !ensure_pages(s, len + max_draft - 1)) --max_draft;
    budget -= n_feed;
    const int32_t seq = int32_t(tables.size());
    tables.push_back(SeqBlockTable{std::span<const int32_t>(s.pages)});
    for (int j = 0; j < n_feed; ++j) {
      batch.push_back(BatchToken{tokens[size_t(keep + j)], keep + j, seq, drafts && j + 1 == n_feed});
    }
    fed.push_back(Fed{&s, tokens.subspan(size_t(keep), size_t(n_feed))});
    if (drafts) drafting.push_back(Drafting{i, &s, len, max_draft});
  }
  if (batch.empty() || !forward(batch, tables)) return out;
  for (const Fed& f : fed) f.s->fed.insert(f.s->fed.end(), f.tokens.begin(), f.tokens.end());
  // Row k of logits_ is drafting[k]'s; each pass feeds the draft tokens of
  // the sequences still drafting, one each.
  while (!drafting.empty()) {
    std::vector<Drafting> next;
    batch.clear();
    tables.clear();
    for (size_t k = 0; k < drafting.size(); ++k) {
      const Drafting& a = drafting[k];
      const std::span<const float> row(logits_.data() + k * size_t(n_vocab_), size_t(n_vocab_));
      // Greedy: the sampler's own pick (the first of the largest logits),
      // and its softmax probability.
      const int32_t best = sampling::argmax(row);
      const double p = std::exp(double(row[size_t(best)]) - logprobs::log_sum_exp(row));
      std::vector<int32_t>& d = out[a.request];
      if (!d.empty() && !(p >= kMinProb)) continue;
      d.push_back(best);
      if (int(d.size()) == a.max_draft) continue;
      const int32_t seq = int32_t(tables.size());
      tables.push_back(SeqBlockTable{std::span<const int32_t>(a.s->pages)});
      batch.push_back(BatchToken{d.back(), a.len + int(d.size()) - 1, seq, true});
      next.push_back(a);
    }
    if (next.empty() || !forward(batch, tables)) break;  // the drafts so far stand
    for (const Drafting& a : next) a.s->fed.push_back(out[a.request].back());
    drafting = std::move(next);
  }
  return out;
}

}  // namespace larder
