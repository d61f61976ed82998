// Model::load: hyperparameters of the llama family (llama, qwen2, qwen3) from
// GGUF metadata (key names as in llama.cpp's llama-arch.cpp LLM_KV_*), weight
// views into the mapping, and the XXH3-128 model fingerprint.
#include "engine/model/model.h"

#include <xxhash.h>

#include <cstring>
#include <string_view>

namespace larder {

namespace {

constexpr int64_t kMaxHparam = int64_t(1) << 30;

// What differs between the supported architectures (llama.cpp llama-model.cpp:
// LLM_ARCH_LLAMA / QWEN2 / QWEN3 graphs and llama_model_rope_type()).
struct ArchTraits {
  std::string_view name;
  bool rope_neox;          // LLAMA_ROPE_TYPE_NEOX rather than NORM
  bool qkv_bias_required;  // attn_{q,k,v}.bias
  bool qk_norm_required;   // attn_{q,k}_norm.weight
};

constexpr ArchTraits kArchs[] = {
    {"llama", false, false, false},
    {"qwen2", true, true, false},
    {"qwen3", true, false, true},
};

const ArchTraits* find_arch(std::string_view name) {
  for (const ArchTraits& a : kArchs)
    if (a.name == name) return &a;
  return nullptr;
}

std::string shape_str(const int64_t* ne, int n) {
  std::string s = "[";
  for (int i = 0; i < n; ++i) {
    if (i) s += ", ";
    s += std::to_string(ne[i]);
  }
  return s + "]";
}

class Loader {
 public:
  Loader(const GgufFile& f, LlamaHparams* hp) : f_(f), hp_(hp) {}

  Status read_hparams();
  // Binds tensor `name` with the expected shape (1 or 2 dims) into *out.
  Status bind(const std::string& name, int64_t ne0, int64_t ne1, bool is_norm, WeightView* out);
  // Binds a 1-dim F32 vector when the file has it, or when `required`
  // (then a missing one is an error). Sets *present.
  Status bind_optional_vec(const std::string& name, int64_t ne0, bool required, WeightView* out,
                           bool* present);
  const ArchTraits& arch() const { return *arch_; }

 private:
  // An integer hparam in [1, 2^30]; `def` < 0 means required.
  Status get_dim(const std::string& key, int64_t def, int* out);

  Status read_rope_scaling(const std::string& a);

  const GgufFile& f_;
  LlamaHparams* hp_;
  const ArchTraits* arch_ = nullptr;
};

Status Loader::get_dim(const std::string& key, int64_t def, int* out) {
  const GgufValue* v = f_.find(key);
  int64_t x = def;
  if (v == nullptr) {
    if (def < 0) return Status::corruption(f_.path() + ": required metadata key '" + key + "' is absent");
  } else {
    LARDER_ASSIGN_OR_RETURN(x, f_.get_int(key));
  }
  if (x < 1 || x > kMaxHparam) {
    return Status::corruption(f_.path() + ": metadata '" + key + "' = " + std::to_string(x) +
                              " is out of range (1..2^30)");
  }
  *out = int(x);
  return Status::ok();
}

Status Loader::read_hparams() {
  LARDER_ASSIGN_OR_RETURN(hp_->architecture, f_.get_string("general.architecture"));
  arch_ = find_arch(hp_->architecture);
  if (arch_ == nullptr) {
    return Status::unsupported(f_.path() + ": architecture '" + hp_->architecture +
                               "' is not supported (supported: llama, qwen2, qwen3)");
  }
  if (const GgufValue* n = f_.find("general.name")) {
    LARDER_ASSIGN_OR_RETURN(hp_->name, n->as_string());
  }
  const std::string a = hp_->architecture + ".";
  LARDER_RETURN_IF_ERROR(get_dim(a + "context_length", -1, &hp_->n_ctx_train));
  LARDER_RETURN_IF_ERROR(get_dim(a + "embedding_length", -1, &hp_->n_embd));
  LARDER_RETURN_IF_ERROR(get_dim(a + "block_count", -1, &hp_->n_layer));
  LARDER_RETURN_IF_ERROR(get_dim(a + "attention.head_count", -1, &hp_->n_head));
  LARDER_RETURN_IF_ERROR(get_dim(a + "attention.head_count_kv", hp_->n_head, &hp_->n_head_kv));
  LARDER_RETURN_IF_ERROR(get_dim(a + "feed_forward_length", -1, &hp_->n_ff));
  if (hp_->n_head % hp_->n_head_kv != 0) {
    return Status::corruption(f_.path() + ": head_count " + std::to_string(hp_->n_head) +
                              " is not a multiple of head_count_kv " + std::to_string(hp_->n_head_kv));
  }
  if (f_.find(a + "attention.key_length") == nullptr && hp_->n_embd % hp_->n_head != 0) {
    return Status::corruption(f_.path() + ": embedding_length " + std::to_string(hp_->n_embd) +
                              " is not a multiple of head_count " + std::to_string(hp_->n_head));
  }
  LARDER_RETURN_IF_ERROR(get_dim(a + "attention.key_length", hp_->n_embd / hp_->n_head, &hp_->head_dim));
  if (const GgufValue* vl = f_.find(a + "attention.value_length")) {
    LARDER_ASSIGN_OR_RETURN(int64_t v, vl->as_int());
    if (v != hp_->head_dim) {
      return Status::unsupported(f_.path() + ": attention.value_length " + std::to_string(v) +
                                 " differs from key_length " + std::to_string(hp_->head_dim));
    }
  }
  LARDER_RETURN_IF_ERROR(get_dim(a + "rope.dimension_count", hp_->head_dim, &hp_->n_rot));
  if (hp_->n_rot > hp_->head_dim || hp_->n_rot % 2 != 0) {
    return Status::corruption(f_.path() + ": rope.dimension_count " + std::to_string(hp_->n_rot) +
                              " must be even and at most the head dim " + std::to_string(hp_->head_dim));
  }
  if (const GgufValue* e = f_.find(a + "attention.layer_norm_rms_epsilon")) {
    LARDER_ASSIGN_OR_RETURN(double eps, e->as_float());
    if (!(eps > 0.0 && eps < 1.0)) {
      return Status::corruption(f_.path() + ": layer_norm_rms_epsilon " + std::to_string(eps) + " out of range");
    }
    hp_->rms_eps = float(eps);
  }
  if (const GgufValue* b = f_.find(a + "rope.freq_base")) {
    LARDER_ASSIGN_OR_RETURN(double base, b->as_float());
    if (!(base > 1.0 && base < 1e12)) {
      return Status::corruption(f_.path() + ": rope.freq_base " + std::to_string(base) + " out of range");
    }
    hp_->rope_freq_base = float(base);
  }
  hp_->rope_neox = arch_->rope_neox;
  LARDER_RETURN_IF_ERROR(read_rope_scaling(a));

  // n_vocab: llama.vocab_size, else the token list length, else token_embd ne[1].
  if (f_.find(a + "vocab_size")) {
    LARDER_RETURN_IF_ERROR(get_dim(a + "vocab_size", -1, &hp_->n_vocab));
  } else if (const GgufValue* t = f_.find("tokenizer.ggml.tokens"); t && t->as_array()) {
    const size_t n = t->as_array()->size();
    if (n < 1 || n > size_t(kMaxHparam)) {
      return Status::corruption(f_.path() + ": tokenizer.ggml.tokens has " + std::to_string(n) + " entries");
    }
    hp_->n_vocab = int(n);
  } else if (const GgufTensorInfo* e = f_.find_tensor("token_embd.weight")) {
    if (e->ne[1] < 1 || e->ne[1] > kMaxHparam) {
      return Status::corruption(f_.path() + ": token_embd.weight has " + std::to_string(e->ne[1]) + " rows");
    }
    hp_->n_vocab = int(e->ne[1]);
  } else {
    return Status::corruption(f_.path() + ": cannot determine the vocabulary size");
  }
  return Status::ok();
}

// llama.cpp llama_model::load_hparams: the factor comes from rope.scaling.factor
// (or the older rope.scale_linear) and scales theta by 1/factor for "linear"
// and "none" alike; yarn / longrope need more than a scale and are refused.
Status Loader::read_rope_scaling(const std::string& a) {
  if (const GgufValue* t = f_.find(a + "rope.scaling.type")) {
    Result<std::string> type = t->as_string();
    if (!type.is_ok()) return type.status();
    if (*type != "none" && *type != "linear") {
      return Status::unsupported(f_.path() + ": " + a + "rope.scaling.type '" + *type +
                                 "' is not supported (none, linear; Llama 3 frequency factors "
                                 "come from rope_freqs.weight)");
    }
  }
  const GgufValue* fv = f_.find(a + "rope.scaling.factor");
  if (fv == nullptr) fv = f_.find(a + "rope.scale_linear");
  if (fv != nullptr) {
    LARDER_ASSIGN_OR_RETURN(double factor, fv->as_float());
    if (factor != 0.0) {
      if (!(factor > 0.0 && factor < 1e6)) {
        return Status::corruption(f_.path() + ": rope scaling factor " + std::to_string(factor) +
                                  " out of range");
      }
      hp_->rope_freq_scale = float(1.0 / factor);
    }
  }
  return Status::ok();
}

Status Loader::bind_optional_vec(const std::string& name, int64_t ne0, bool required,
                                 WeightView* out, bool* present) {
  *present = f_.find_tensor(name) != nullptr;
  if (!*present && !required) return Status::ok();
  LARDER_RETURN_IF_ERROR(bind(name, ne0, 1, true, out));
  *present = true;
  return Status::ok();
}

Status Loader::bind(const std::string& name, int64_t ne0, int64_t ne1, bool is_norm, WeightView* out) {
  const GgufTensorInfo* t = f_.find_tensor(name);
  if (t == nullptr) return Status::corruption(f_.path() + ": tensor '" + name + "' is missing");
  const int n_exp = is_norm ? 1 : 2;
  const int64_t expected[4] = {ne0, is_norm ? 1 : ne1, 1, 1};
  for (int d = 0; d < 4; ++d) {
    if (t->ne[d] != expected[d]) {
      return Status::corruption(f_.path() + ": tensor '" + name + "' has shape " +
                                shape_str(t->ne, t->n_dims) + ", expected " + shape_str(expected, n_exp));
    }
  }
  const char* tn = ggml_type_name(t->type);
  if (is_norm && t->type != GgmlType::kF32) {
    return Status::unsupported(f_.path() + ": vector tensor '" + name + "' has type " + tn + " (must be F32)");
  }
  if (!ggml_type_supported(t->type)) {
    return Status::unsupported(f_.path() + ": tensor '" + name + "' has type " + tn +
                               ", which larder does not compute with (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, "
                               "Q2_K..Q6_K, IQ4_NL, IQ4_XS)");
  }
  out->type = t->type;
  out->ne[0] = t->ne[0];
  out->ne[1] = t->ne[1];
  out->data = t->data;
  out->row_bytes = ggml_row_size(t->type, t->ne[0]);
  return Status::ok();
}

// Canonical byte string of the hparams: "key=value;" with floats as the hex of
// their bits, so it is locale- and formatting-independent.
std::string canonical_hparams(const LlamaHparams& hp) {
  auto bits = [](float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return std::to_string(u);
  };
  std::string s;
  s += "architecture=" + hp.architecture + ";";
  s += "n_vocab=" + std::to_string(hp.n_vocab) + ";";
  s += "n_ctx_train=" + std::to_string(hp.n_ctx_train) + ";";
  s += "n_embd=" + std::to_string(hp.n_embd) + ";";
  s += "n_layer=" + std::to_string(hp.n_layer) + ";";
  s += "n_head=" + std::to_string(hp.n_head) + ";";
  s += "n_head_kv=" + std::to_string(hp.n_head_kv) + ";";
  s += "head_dim=" + std::to_string(hp.head_dim) + ";";
  s += "n_ff=" + std::to_string(hp.n_ff) + ";";
  s += "n_rot=" + std::to_string(hp.n_rot) + ";";
  s += "rms_eps_bits=" + bits(hp.rms_eps) + ";";
  s += "rope_freq_base_bits=" + bits(hp.rope_freq_base) + ";";
  s += std::string("rope_neox=") + (hp.rope_neox ? "1" : "0") + ";";
  // Added with qwen2/qwen3 and rope scaling: written only when they differ
  // from a plain llama file, whose fingerprint (and stored pages) stay valid.
  if (hp.rope_freq_scale != 1.0f) s += "rope_freq_scale_bits=" + bits(hp.rope_freq_scale) + ";";
  if (hp.has_qkv_bias) s += "qkv_bias=1;";
  if (hp.has_out_bias) s += "out_bias=1;";
  if (hp.has_qk_norm) s += "qk_norm=1;";
  if (hp.has_rope_freq_factors) s += "rope_freq_factors=1;";
  return s;
}

struct XxhStateDeleter {
  void operator()(XXH3_state_t* s) const { XXH3_freeState(s); }
};

Status compute_fingerprint(const GgufFile& f, const LlamaHparams& hp, std::array<uint8_t, 16>* out) {
  std::unique_ptr<XXH3_state_t, XxhStateDeleter> st(XXH3_createState());
  if (!st) return Status::resource_exhausted("XXH3_createState failed");
  XXH3_128bits_reset(st.get());
  auto put = [&](const void* p, size_t n) { XXH3_128bits_update(st.get(), p, n); };
  auto put_u64 = [&](uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; ++i) b[i] = uint8_t(v >> (8 * i));  // little-endian
    put(b, 8);
  };
  static constexpr char kTag[] = "larder-model-fingerprint-v1";
  put(kTag, sizeof(kTag) - 1);
  put_u64(hp.architecture.size());
  put(hp.architecture.data(), hp.architecture.size());
  const std::string hs = canonical_hparams(hp);
  put_u64(hs.size());
  put(hs.data(), hs.size());
  put_u64(f.tensors().size());
  for (const GgufTensorInfo& t : f.tensors()) {
    put_u64(t.name.size());
    put(t.name.data(), t.name.size());
    put_u64(uint64_t(t.type));
    put_u64(uint64_t(t.n_dims));
    for (int d = 0; d < 4; ++d) put_u64(uint64_t(t.ne[d]));
    put_u64(t.n_bytes);
    put(t.data, t.n_bytes);
  }
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, XXH3_128bits_digest(st.get()));  // big-endian
  std::memcpy(out->data(), c.digest, 16);
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<Model>> Model::load(const std::string& path, Fingerprint fingerprint) {
  LARDER_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> gguf, GgufFile::open(path));
  std::unique_ptr<Model> m(new Model());  // private constructor
  Loader ld(*gguf, &m->hp_);
  LARDER_RETURN_IF_ERROR(ld.read_hparams());
  LlamaHparams& hp = m->hp_;
  // Every layer needs at least 9 tensors: a block_count the file cannot hold
  // is refused before anything is sized by it.
  if (uint64_t(hp.n_layer) * 9 > gguf->tensors().size()) {
    return Status::corruption(path + ": block_count " + std::to_string(hp.n_layer) + " but only " +
                              std::to_string(gguf->tensors().size()) + " tensors");
  }
  LARDER_RETURN_IF_ERROR(ld.bind("token_embd.weight", hp.n_embd, hp.n_vocab, false, &m->token_embd_));
  LARDER_RETURN_IF_ERROR(ld.bind("output_norm.weight", hp.n_embd, 1, true, &m->output_norm_));
  if (gguf->find_tensor("output.weight")) {
    LARDER_RETURN_IF_ERROR(ld.bind("output.weight", hp.n_embd, hp.n_vocab, false, &m->output_));
  } else {
    m->output_ = m->token_embd_;  // tied embeddings
  }
  m->layers_.resize(size_t(hp.n_layer));
  for (int i = 0; i < hp.n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    LayerWeights& L = m->layers_[size_t(i)];
    LARDER_RETURN_IF_ERROR(ld.bind(p + "attn_norm.weight", hp.n_embd, 1, true, &L.attn_norm));
    LARDER_RETURN_IF_ERROR(ld.bind(p + "attn_q.weight", hp.n_embd, hp.q_dim(), false, &L.wq));
    LARDER_RETURN_IF_ERROR(ld.bind(p + "attn_k.weight", hp.n_embd, hp.kv_dim(), false, &L.wk));
    LARDER_RETURN_IF_ERROR(ld.bind(p + "attn_v.weight", hp.n_embd, hp.kv_dim(), false, &L.wv));
    LARDER_RETURN_IF_ERROR(ld.bind(p + "attn_output.weight", hp.q_dim(), hp.n_embd, false, &L.wo));
    LARDER_RETURN_IF_ERROR(ld.bind(p + "ffn_norm.weight", hp.n_embd, 1, true, &L.ffn_norm));
    LARDER_RETURN_IF_ERROR(ld.bind(p + "ffn_gate.weight", hp.n_embd, hp.n_ff, false, &L.ffn_gate));
    LARDER_RETURN_IF_ERROR(ld.bind(p + "ffn_up.weight", hp.n_embd, hp.n_ff, false, &L.ffn_up));
    LARDER_RETURN_IF_ERROR(ld.bind(p + "ffn_down.weight", hp.n_ff, hp.n_embd, false, &L.ffn_down));
    // Optional tensors: present in every layer or in none.
    const bool bias_req = ld.arch().qkv_bias_required || (i > 0 && hp.has_qkv_bias);
    bool has_q = false, has_k = false, has_v = false, has_o = false;
    LARDER_RETURN_IF_ERROR(ld.bind_optional_vec(p + "attn_q.bias", hp.q_dim(), bias_req, &L.bq, &has_q));
    LARDER_RETURN_IF_ERROR(ld.bind_optional_vec(p + "attn_k.bias", hp.kv_dim(), bias_req || has_q, &L.bk, &has_k));
    LARDER_RETURN_IF_ERROR(ld.bind_optional_vec(p + "attn_v.bias", hp.kv_dim(), bias_req || has_q, &L.bv, &has_v));
    if (!has_q && (has_k || has_v)) {
      return Status::corruption(path + ": " + p + "attn_k/attn_v bias without " + p + "attn_q.bias");
    }
    LARDER_RETURN_IF_ERROR(ld.bind_optional_vec(p + "attn_output.bias", hp.n_embd, i > 0 && hp.has_out_bias, &L.bo, &has_o));
    const bool norm_req = ld.arch().qk_norm_required || (i > 0 && hp.has_qk_norm);
    bool has_qn = false, has_kn = false;
    LARDER_RETURN_IF_ERROR(ld.bind_optional_vec(p + "attn_q_norm.weight", hp.head_dim, norm_req, &L.attn_q_norm, &has_qn));
    LARDER_RETURN_IF_ERROR(ld.bind_optional_vec(p + "attn_k_norm.weight", hp.head_dim, norm_req || has_qn, &L.attn_k_norm, &has_kn));
    if (has_kn && !has_qn) {
      return Status::corruption(path + ": " + p + "attn_k_norm.weight without " + p + "attn_q_norm.weight");
    }
    if (i == 0) {
      hp.has_qkv_bias = has_q;
      hp.has_out_bias = has_o;
      hp.has_qk_norm = has_qn;
    } else if (has_q != hp.has_qkv_bias || has_o != hp.has_out_bias || has_qn != hp.has_qk_norm) {
      return Status::corruption(path + ": layer " + std::to_string(i) +
                                " has other optional attention tensors than layer 0");
    }
  }
  // Llama 3 frequency factors (llama.cpp LLM_TENSOR_ROPE_FREQS), one per rotated pair.
  LARDER_RETURN_IF_ERROR(ld.bind_optional_vec("rope_freqs.weight", hp.n_rot / 2, false, &m->rope_freqs_,
                                              &hp.has_rope_freq_factors));
  if (hp.has_rope_freq_factors) {
    const float* ff = reinterpret_cast<const float*>(m->rope_freqs_.data);
    for (int i = 0; i < hp.n_rot / 2; ++i) {
      if (!(ff[i] > 0.0f && ff[i] < 1e9f)) {
        return Status::corruption(path + ": rope_freqs.weight[" + std::to_string(i) + "] = " +
                                  std::to_string(ff[i]) + " is not a positive factor");
      }
    }
  }
  if (fingerprint == Fingerprint::kCompute) LARDER_RETURN_IF_ERROR(compute_fingerprint(*gguf, hp, &m->fingerprint_));
  m->gguf_ = std::move(gguf);
  return m;
}

}  // namespace larder
