#include "engine/cpu/forward.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <new>
#include <string>
#include <thread>
#include <unordered_map>

#include <spdlog/spdlog.h>

#include "engine/cpu/attention.h"
#include "engine/cpu/forward_impl.h"
#include "engine/cpu/huge_pages.h"
#include "engine/cpu/kernels.h"
#include "engine/cpu/matmul.h"
#include "engine/cpu/matmul_kquant.h"
#include "engine/cpu/matmul_packed.h"
#include "engine/cpu/thread_pool.h"
#include "engine/gguf/quant_blocks.h"

namespace larder {

// 2: int8-activation Q4_K/Q5_K/Q6_K kernels with VNNI (2026-12-01).
// 3: Q8_0, Q4_K, Q6_K repacked, exact block sums then fmas in block order
//    (matmul_packed.h); attention
//    of head_dim % 16 == 0 with 16 positions at a time and a vectorized exp
//    (attention.cpp) (2026-12-02).
// 4: F16 matrices repacked (AVX-512 builds): one f32 fma chain per output in
//    k order instead of 16 lane sums and a horizontal add; swiglu's exp
//    vectorized (AVX-512: exp_avx512, engine/cpu/simd.h) (2026-12-02).
// 5: AVX2 builds repack F16 matrices too (the same fma chains, hence the
//    AVX-512 packed F16 bits) (2026-12-03).
// 6: AVX-512 attention of head_dim % 16 == 0 in one pass with an online
//    softmax (sums rescaled when the running max rises), not a score pass
//    then a V pass; AVX-512 builds attend heads of a multiple of 8 that is
//    not of 16 (stories260K) with the 8-lane tiles of AVX2 builds, which
//    are one pass with an online softmax too (2026-12-05).
// 7: the 16-position attention (AVX-512 builds, head_dim % 16 == 0) runs
//    its online softmax per chunk of kAttentionChunk positions and folds
//    the chunks in order, so that a decode step can split a long context's
//    chunks over the threads (attention.h); rows below position 1024 keep
//    their bits (2026-12-06).
// 8: the 8-position attention (AVX2 builds; AVX-512 builds' heads of a
//    multiple of 8 that the 16-position pass does not take) folds chunks of kAttentionChunk
//    positions as the 16-position one does, so that AVX2 builds split a long
//    context's decode attention by chunks too; rows below position 1024
//    keep their bits. And no build fuses multiply-adds the kernels do not
//    ask for (-ffp-contract=off in CMakeLists.txt): the plain C++ of every
//    build gave other last bits, and Debug and Release builds differed
//    under one id (2026-12-06).
// 9: Q4_0, Q4_1, Q5_0 and Q5_1 weights are repacked like Q8_0 and multiply
//    Q8_0-quantized activations in int8, Q3_K and Q2_K ones like Q6_K and
//    Q5_K like Q4_K with Q8_K activations, on AVX-512 VNNI and AVX2 builds
//    (AVX-512 builds without VNNI take the AVX2 tiles) (matmul_packed.h),
//    instead of f32 activations times dequantized rows (and, for Q5_K on
//    AVX-512 VNNI, the integer row tiles) (2026-12-06).
constexpr int kCpuArithmeticVersion = 9;

std::string cpu_numerics_id() {
#if defined(__AVX512F__) && defined(__AVX512VNNI__)
  const char* isa = "avx512vnni";  // the packed int8 kernels (AMX, where used, gives the same bits)
#elif defined(__AVX512F__)
  const char* isa = "avx512";      // Q8_0 by dequantize + FMA: other bits
#elif defined(LARDER_PACKED_AVX2)
  const char* isa = "avx2";        // the packed AVX2 tiles and the 8-lane attention
#else
  const char* isa = "scalar";
#endif
  return "cpu-" + std::to_string(kCpuArithmeticVersion) + "-" + isa;
}

namespace {

bool embd_type_supported(GgmlType t) {
  return ggml_type_supported(t);  // dequantize_row handles every supported type
}

// RoPE tables with linear scaling and Llama 3 frequency factors, as llama.cpp
// ggml_rope_ext applies them without YaRN: theta_i = pos * base^(-2i/n_rot)
// * freq_scale / factor[i] (factors may be null). Plain llama files keep
// rope_tables' exact arithmetic.
void rope_tables_scaled(const LlamaHparams& hp, const float* factors, int pos, float* cos_out,
                        float* sin_out) {
  if (factors == nullptr && hp.rope_freq_scale == 1.0f) {
    rope_tables(pos, hp.n_rot, hp.rope_freq_base, cos_out, sin_out);
    return;
  }
  for (int i = 0; i < hp.n_rot / 2; ++i) {
    double theta = double(pos) * std::pow(double(hp.rope_freq_base), -2.0 * i / double(hp.n_rot)) *
                   double(hp.rope_freq_scale);
    if (factors != nullptr) theta /= double(factors[i]);
    cos_out[i] = float(std::cos(theta));
    sin_out[i] = float(std::sin(theta));
  }
}

// y[t][j] += bias[j] for t in [0, n), j in [0, dim): qwen2's Q/K/V biases.
void add_bias_rows(float* y, const WeightView& bias, int n, int dim) {
  const float* b = reinterpret_cast<const float*>(bias.data);
  for (int t = 0; t < n; ++t) add_inplace(y + size_t(t) * dim, b, dim);
}

}  // namespace

namespace {
size_t view_bytes(const WeightView& w) { return size_t(std::max<int64_t>(1, w.ne[1])) * w.row_bytes; }
}  // namespace

void CpuForward::Impl::weights_in_place() {
  token_embd = model.token_embd();
  output_norm = model.output_norm();
  output = model.output();
  rope_freqs = model.rope_freq_factors();
  layers = model.layers();
}

Status CpuForward::Impl::own_weights(size_t embd_copy_bytes) {
  weights_in_place();
  std::unordered_map<const uint8_t*, const uint8_t*> copied;  // mapping address -> copy
  auto copy = [&](WeightView& w) -> Status {
    if (w.data == nullptr) return Status::ok();
    if (auto it = copied.find(w.data); it != copied.end()) {
      w.data = it->second;
      return Status::ok();
    }
    const size_t bytes = view_bytes(w);
    void* mem = alloc_huge_aligned(bytes);
    if (mem == nullptr) {
      return Status::resource_exhausted("cannot allocate " + std::to_string(bytes) +
                                        " bytes for a copy of the weights: the model does not fit in memory");
    }
    owned.emplace_back(mem);
    std::memcpy(mem, w.data, bytes);
    model.gguf().drop_resident(w.data, bytes);
    copied.emplace(w.data, static_cast<const uint8_t*>(mem));
    w.data = static_cast<const uint8_t*>(mem);
    return Status::ok();
  };
  // Matrices: those packed stay keyed by their mapping address.
  auto matrix = [&](WeightView& w) { return packed.count(w.data) != 0 ? Status::ok() : copy(w); };
  LARDER_RETURN_IF_ERROR(matrix(output));
  for (LayerWeights& l : layers) {
    for (WeightView* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_gate, &l.ffn_up, &l.ffn_down}) {
      LARDER_RETURN_IF_ERROR(matrix(*w));
    }
    for (WeightView* w : {&l.attn_norm, &l.ffn_norm, &l.bq, &l.bk, &l.bv, &l.bo, &l.attn_q_norm, &l.attn_k_norm}) {
      LARDER_RETURN_IF_ERROR(copy(*w));
    }
  }
  LARDER_RETURN_IF_ERROR(copy(output_norm));
  LARDER_RETURN_IF_ERROR(copy(rope_freqs));
  // The embedding: copied when small or already copied as the (unpacked,
  // tied) output matrix; else read by rows.
  if (copied.count(token_embd.data) != 0 || view_bytes(token_embd) <= embd_copy_bytes) {
    LARDER_RETURN_IF_ERROR(copy(token_embd));
  } else {
    embd_by_read = true;
    embd_row.resize(token_embd.row_bytes);
  }
  return Status::ok();
}

Status CpuForward::Impl::embed(int32_t token, float* out) {
  const int d = hp.n_embd;
  if (!embd_by_read) {
    dequantize_row(token_embd.type, token_embd.row(token), out, d);
    return Status::ok();
  }
  LARDER_RETURN_IF_ERROR(model.gguf().read_at(token_embd.row(token), embd_row.data(), embd_row.size()));
  dequantize_row(token_embd.type, embd_row.data(), out, d);
  return Status::ok();
}

const void* CpuForward::Impl::packed_input(const WeightView& w, MatmulInput& into, const float* in, int n) const {
  if (w.type == GgmlType::kF16) return in;
  into.prepare(w.type, in, n, int(w.ne[0]), q8_path, /*packed=*/true);
  return into.packed();
}

namespace {
// Weight rows a reference pass dequantizes at a time, per thread.
constexpr int64_t kRefRows = 16;
}  // namespace

void CpuForward::Impl::reference_matmul(const WeightView& w, const float* in, int n, float* y) {
  const int K = int(w.ne[0]);
  const int64_t rows = w.ne[1];
  const float* x = in;
  if (reference == CpuForwardOptions::Reference::kInt8) {
    // Rounded as the serving kernels quantize them: prepare() says which
    // quantization this build's kernel for w.type takes, if any.
    act.prepare(w.type, in, n, K, default_q8_path(), packed_type_supported(w.type));
    if (const BlockQ8_0* q = act.q8_0()) {
      ref_x.resize(size_t(n) * K);
      dequantize_row(GgmlType::kQ8_0, q, ref_x.data(), int64_t(n) * K);
      x = ref_x.data();
    } else if (const BlockQ8K* q = act.q8k()) {  // dequantize_row has no Q8_K (never a weight type)
      ref_x.resize(size_t(n) * K);
      for (size_t b = 0; b < size_t(n) * (K / kQK_K); ++b)
        for (int j = 0; j < kQK_K; ++j) ref_x[b * kQK_K + size_t(j)] = q[b].d * float(q[b].qs[j]);
      x = ref_x.data();
    }
  }
  MatmulInput in_f32;
  in_f32.prepare(GgmlType::kF32, x, n, K, Q8Path::kDequantFma);
  threads.parallel_chunks(rows, kRefRows, [&](int64_t b, int64_t e, int thread) {
    std::vector<float>& buf = ref_rows[size_t(thread)];
    buf.resize(size_t(kRefRows) * K);
    const int64_t nr = e - b;
    for (int64_t r = 0; r < nr; ++r) dequantize_row(w.type, w.row(b + r), buf.data() + r * K, K);
    WeightView v;
    v.type = GgmlType::kF32;
    v.ne[0] = K;
    v.ne[1] = nr;
    v.data = reinterpret_cast<const uint8_t*>(buf.data());
    v.row_bytes = size_t(K) * sizeof(float);
    matmul_rows(v, in_f32, y + b, int(rows), 0, nr);
  });
}

void CpuForward::Impl::matmul(const WeightView& w, const float* in, int n, float* y) {
  if (reference != CpuForwardOptions::Reference::kNone) {
    reference_matmul(w, in, n, y);
    return;
  }
  const auto it = packed.find(w.data);
  if (it != packed.end()) {
    matmul_packed_parallel(threads, it->second, packed_input(w, act, in, n), n, y, int(w.ne[1]));
    return;
  }
  act.prepare(w.type, in, n, int(w.ne[0]), q8_path);
  matmul_parallel(threads, w, act, y, int(w.ne[1]));
}

void CpuForward::Impl::matmuls(std::initializer_list<Product> products, const float* in, int n) {
  constexpr size_t kMaxFused = 4;
  PackedProduct fused[kMaxFused];
  MatmulInput* inputs[2] = {&act, &act2};
  GgmlType prepared[2] = {};          // the types inputs[] are prepared for
  const void* prepared_x[2] = {};     // and what their kernels read
  int n_prepared = 0;
  bool ok = products.size() <= kMaxFused;
  size_t i = 0;
  for (const Product& p : products) {
    if (!ok) break;
    const auto it = packed.find(p.w->data);
    if (it == packed.end() || p.w->ne[0] != products.begin()->w->ne[0]) {
      ok = false;
      break;
    }
    const void* x = in;  // F16: the f32 rows (packed_input)
    if (p.w->type != GgmlType::kF16) {
      int slot = 0;
      while (slot < n_prepared && prepared[slot] != p.w->type) ++slot;
      if (slot == n_prepared) {
        if (n_prepared == 2) {
          ok = false;
          break;
        }
        prepared_x[slot] = packed_input(*p.w, *inputs[slot], in, n);
        prepared[n_prepared++] = p.w->type;
      }
      x = prepared_x[slot];
    }
    fused[i++] = {&it->second, x, p.y, int(p.w->ne[1])};
  }
  if (!ok) {
    for (const Product& p : products) matmul(*p.w, in, n, p.y);
    return;
  }
  matmul_packed_parallel(threads, std::span<const PackedProduct>(fused, i), n);
}

Status CpuForward::Impl::validate(std::span<const BatchToken> batch,
                                  std::span<const SeqBlockTable> seqs) const {
  const int page_size = pool.layout().page_size;
  for (size_t i = 0; i < batch.size(); ++i) {
    const BatchToken& t = batch[i];
    if (t.token < 0 || t.token >= hp.n_vocab)
      return Status::invalid_argument("batch[" + std::to_string(i) + "]: token id " +
                                      std::to_string(t.token) + " outside [0, " +
                                      std::to_string(hp.n_vocab) + ")");
    if (t.seq < 0 || size_t(t.seq) >= seqs.size())
      return Status::invalid_argument("batch[" + std::to_string(i) + "]: seq index " +
                                      std::to_string(t.seq) + " outside [0, " +
                                      std::to_string(seqs.size()) + ")");
    if (t.pos < 0 || size_t(t.pos / page_size) >= seqs[t.seq].pages.size())
      return Status::invalid_argument(
          "batch[" + std::to_string(i) + "]: pos " + std::to_string(t.pos) +
          " not covered by the block table of seq " + std::to_string(t.seq) + " (" +
          std::to_string(seqs[t.seq].pages.size()) + " pages of " + std::to_string(page_size) +
          ")");
  }
  for (size_t s = 0; s < seqs.size(); ++s)
    for (int32_t p : seqs[s].pages)
      if (p < 0 || p >= pool.n_pages())
        return Status::invalid_argument("seq " + std::to_string(s) + ": page id " +
                                        std::to_string(p) + " outside the pool");
  return Status::ok();
}

Result<std::unique_ptr<CpuForward>> CpuForward::create(const Model& model, PagePool& pool,
                                                       const CpuForwardOptions& options) {
  const LlamaHparams& hp = model.hparams();
  const KvLayout& lay = pool.layout();
  if (lay.n_layer != hp.n_layer || lay.kv_dim != hp.kv_dim())
    return Status::invalid_argument(
        "page pool layout (n_layer " + std::to_string(lay.n_layer) + ", kv_dim " +
        std::to_string(lay.kv_dim) + ") does not match the model (n_layer " +
        std::to_string(hp.n_layer) + ", kv_dim " + std::to_string(hp.kv_dim()) + ")");
  if (hp.n_head <= 0 || hp.n_head_kv <= 0 || hp.n_head % hp.n_head_kv != 0 ||
      hp.n_rot % 2 != 0 || hp.n_rot > hp.head_dim)
    return Status::unsupported("head layout n_head " + std::to_string(hp.n_head) + ", n_head_kv " +
                               std::to_string(hp.n_head_kv) + ", n_rot " +
                               std::to_string(hp.n_rot));
  if (lay.page_size < 1 || lay.page_size > kAttentionChunk || kAttentionChunk % lay.page_size != 0)
    return Status::invalid_argument("page_size " + std::to_string(lay.page_size) +
                                    ": the CPU backend takes a power of two up to " +
                                    std::to_string(kAttentionChunk));
  if (lay.dtype == KvDtype::kQ8_0 && hp.head_dim > 256)
    return Status::unsupported("kv_dtype q8_0 with head_dim " + std::to_string(hp.head_dim) +
                               " (at most 256); use f16");
  if (!embd_type_supported(model.token_embd().type))
    return Status::unsupported("token_embd type not supported by the CPU backend");
  auto check = [](const WeightView& w, const char* name) -> Status {
    if (!matmul_type_supported(w.type))
      return Status::unsupported(std::string(name) + ": weight type not supported by the CPU backend");
    return Status::ok();
  };
  LARDER_RETURN_IF_ERROR(check(model.output(), "output"));
  for (const LayerWeights& l : model.layers()) {
    for (const WeightView* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_gate, &l.ffn_up, &l.ffn_down})
      LARDER_RETURN_IF_ERROR(check(*w, "layer matrix"));
  }

  int n_threads = options.n_threads > 0 ? options.n_threads
                                        : int(std::max(1u, std::thread::hardware_concurrency()));
  std::unique_ptr<CpuForward> f(new CpuForward());
  f->impl_ = std::make_unique<Impl>(model, pool, n_threads);
  Impl& m = *f->impl_;
  m.reference = options.reference;
  if (m.q8_path == Q8Path::kInt8 && q8_packed_supported() && m.reference == CpuForwardOptions::Reference::kNone) {
    // Repacked once at load (a copy the size of those matrices). The
    // mapping's pages the packing read are then dropped from this process
    // (GgufFile::drop_resident: they stay in the page cache, and the
    // embedding lookups fault in the rows they read), so the weights are not
    // resident twice.
    // A copy that cannot be allocated fails the load with a message (the
    // row tiles would compute other bits under the same numerics id, so
    // there is no silent fallback).
    size_t bytes = 0;
    bool no_memory = false;
    auto pack = [&](const WeightView& w) {
      if (no_memory || !packed_type_supported(w.type) || m.packed.count(w.data)) return;
      try {
        bytes += m.packed.emplace(w.data, PackedMatrix::pack(w, &m.threads)).first->second.bytes();
      } catch (const std::bad_alloc&) {
        no_memory = true;
        return;
      }
      model.gguf().drop_resident(w.data, size_t(w.ne[1]) * w.row_bytes);
    };
    pack(model.output());
    for (const LayerWeights& l : model.layers()) {
      for (const WeightView* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_gate, &l.ffn_up, &l.ffn_down}) pack(*w);
    }
    if (no_memory)
      return Status::resource_exhausted("cannot allocate memory for the repacked weights (" +
                                        std::to_string(bytes >> 20) +
                                        " MiB repacked so far): the model does not fit in this machine's memory");
    if (!m.packed.empty())
      spdlog::info("cpu forward: {} matrices repacked for the packed kernels ({:.1f} MiB)", m.packed.size(),
                   double(bytes) / (1 << 20));
  }
  if (m.reference != CpuForwardOptions::Reference::kNone) {
    m.weights_in_place();
    m.ref_rows.resize(size_t(n_threads));
  } else {
    LARDER_RETURN_IF_ERROR(m.own_weights(options.embd_copy_bytes));
  }
  spdlog::debug("cpu forward: {} threads, Q8_0 path {}", n_threads,
                m.q8_path == Q8Path::kInt8 ? "vnni" : "dequant-fma");
  return f;
}

CpuForward::~CpuForward() = default;

int CpuForward::n_threads() const { return impl_->threads.n_threads(); }

bool CpuForward::reads_embedding_rows() const { return impl_->embd_by_read; }

int64_t CpuForward::split_attention_calls() const { return impl_->split_calls; }

Status CpuForward::forward(std::span<const BatchToken> batch, std::span<const SeqBlockTable> seqs,
                           bool prefill, float* logits_out) {
  (void)prefill;  // both paths share the tile kernels (see matmul.h: bit-identical rows)
  Impl& m = *impl_;
  const LlamaHparams& hp = m.hp;
  LARDER_RETURN_IF_ERROR(m.validate(batch, seqs));
  const int n = int(batch.size());
  if (n == 0) return Status::ok();
  const int d = hp.n_embd, qd = hp.q_dim(), kvd = hp.kv_dim(), ff = hp.n_ff;
  const int half_rot = hp.n_rot / 2;

  int max_pos = 0;
  m.want.clear();
  for (int i = 0; i < n; ++i) {
    max_pos = std::max(max_pos, batch[i].pos);
    if (batch[i].want_logits) m.want.push_back(i);
  }
  if (!m.want.empty() && logits_out == nullptr)
    return Status::invalid_argument("logits_out is null but the batch wants logits");

  grow(m.x, size_t(n) * d);
  grow(m.xb, size_t(n) * std::max(d, qd));
  grow(m.xb2, size_t(n) * d);
  grow(m.q, size_t(n) * qd);
  grow(m.k, size_t(n) * kvd);
  grow(m.v, size_t(n) * kvd);
  grow(m.att, size_t(n) * qd);
  grow(m.hb, size_t(n) * ff);
  grow(m.hb2, size_t(n) * ff);
  grow(m.rope_cos, size_t(n) * half_rot);
  grow(m.rope_sin, size_t(n) * half_rot);
  const int ps = m.pool.layout().page_size;
  const size_t need_scores = attention_scratch_floats(max_pos, ps, std::min(n, kAttentionTileTokens));
  if (need_scores > m.scores_stride) {
    m.scores_stride = need_scores;
    m.scores.assign(m.scores_stride * m.threads.n_threads(), 0.0f);
  }

  // Embedding rows and RoPE tables (shared by all layers and heads).
  for (int i = 0; i < n; ++i) {
    LARDER_RETURN_IF_ERROR(m.embed(batch[i].token, m.x.data() + size_t(i) * d));
    rope_tables_scaled(hp, reinterpret_cast<const float*>(m.rope_freqs.data),
                       batch[i].pos, m.rope_cos.data() + size_t(i) * half_rot,
                       m.rope_sin.data() + size_t(i) * half_rot);
  }

  for (int l = 0; l < hp.n_layer; ++l) {
    const LayerWeights& lw = m.layers[size_t(l)];
    const float* attn_norm = reinterpret_cast<const float*>(lw.attn_norm.data);
    for (int i = 0; i < n; ++i)
      rmsnorm(m.xb.data() + size_t(i) * d, m.x.data() + size_t(i) * d, attn_norm, d, hp.rms_eps);
    m.matmuls({{&lw.wq, m.q.data()}, {&lw.wk, m.k.data()}, {&lw.wv, m.v.data()}}, m.xb.data(), n);
    if (hp.has_qkv_bias) {
      add_bias_rows(m.q.data(), lw.bq, n, qd);
      add_bias_rows(m.k.data(), lw.bk, n, kvd);
      add_bias_rows(m.v.data(), lw.bv, n, kvd);
    }
    for (int i = 0; i < n; ++i) {
      const float* c = m.rope_cos.data() + size_t(i) * half_rot;
      const float* s = m.rope_sin.data() + size_t(i) * half_rot;
      if (hp.has_qk_norm) {  // qwen3: RMSNorm of each head of Q and K, before RoPE
        const float* qn = reinterpret_cast<const float*>(lw.attn_q_norm.data);
        const float* kn = reinterpret_cast<const float*>(lw.attn_k_norm.data);
        for (int h = 0; h < hp.n_head; ++h) {
          float* qh = m.q.data() + size_t(i) * qd + size_t(h) * hp.head_dim;
          rmsnorm(qh, qh, qn, hp.head_dim, hp.rms_eps);
        }
        for (int h = 0; h < hp.n_head_kv; ++h) {
          float* kh = m.k.data() + size_t(i) * kvd + size_t(h) * hp.head_dim;
          rmsnorm(kh, kh, kn, hp.head_dim, hp.rms_eps);
        }
      }
      rope_apply(m.q.data() + size_t(i) * qd, hp.n_head, hp.head_dim, hp.n_rot, hp.rope_neox, c, s);
      rope_apply(m.k.data() + size_t(i) * kvd, hp.n_head_kv, hp.head_dim, hp.n_rot, hp.rope_neox, c, s);
      // K/V go into the pages first; attention reads them back in the page dtype.
      kv_write(m.pool, l, seqs[batch[i].seq].pages, batch[i].pos, m.k.data() + size_t(i) * kvd,
               m.v.data() + size_t(i) * kvd);
    }
    m.attention(batch, seqs, l);
    m.matmul(lw.wo, m.att.data(), n, m.xb2.data());
    if (hp.has_out_bias) add_bias_rows(m.xb2.data(), lw.bo, n, d);
    add_inplace(m.x.data(), m.xb2.data(), n * d);

    const float* ffn_norm = reinterpret_cast<const float*>(lw.ffn_norm.data);
    for (int i = 0; i < n; ++i)
      rmsnorm(m.xb.data() + size_t(i) * d, m.x.data() + size_t(i) * d, ffn_norm, d, hp.rms_eps);
    m.matmuls({{&lw.ffn_gate, m.hb.data()}, {&lw.ffn_up, m.hb2.data()}}, m.xb.data(), n);
    swiglu(m.hb.data(), m.hb2.data(), n * ff);
    m.matmul(lw.ffn_down, m.hb.data(), n, m.xb2.data());
    add_inplace(m.x.data(), m.xb2.data(), n * d);
  }

  // Output head, only for the rows that want logits: (n_want, n_vocab).
  const int n_want = int(m.want.size());
  if (n_want == 0) return Status::ok();
  const float* out_norm = reinterpret_cast<const float*>(m.output_norm.data);
  for (int j = 0; j < n_want; ++j)
    rmsnorm(m.xb.data() + size_t(j) * d, m.x.data() + size_t(m.want[j]) * d, out_norm, d,
            hp.rms_eps);
  m.matmul(m.output, m.xb.data(), n_want, logits_out);
  return Status::ok();
}

}  // namespace larder
