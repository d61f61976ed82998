// CudaBackend: the forward pass and the KV page pool on one CUDA device.
// See engine/cuda/cuda_backend.h and docs/gpu.md.
#include "engine/cuda/cuda_backend.h"

#include <algorithm>
#include <cstring>
#include <string>

#include <spdlog/spdlog.h>

#include "engine/cuda/cuda_util.h"
#include "engine/cuda/device_weights.h"
#include "engine/cuda/kernels.h"
#include "engine/cuda/plan/batch_plan.h"
#include "engine/cuda/plan/memory_plan.h"

namespace larder {

namespace {

using cuda::DeviceBuffer;
using cuda::DeviceTensor;
using cuda_plan::DeviceType;

static_assert(cuda::kAttnMaxRows == cuda_plan::kAttnMaxRows, "attention kernel and tile plan disagree");

// Pages copied through the pinned staging buffer at once (spill / restore).
constexpr int kStagingPages = 64;

cudaDataType_t cuda_type(DeviceType t) {
  switch (t) {
    case DeviceType::kF16: return CUDA_R_16F;
    case DeviceType::kBF16: return CUDA_R_16BF;
    case DeviceType::kF32: return CUDA_R_32F;
  }
  return CUDA_R_32F;
}

class CudaBackend final : public Backend {
 public:
  Status init(const Model& model, const BackendOptions& options);

  const char* name() const override { return "cuda"; }
  // Bump with any change to the CUDA kernels' or cuBLAS calls' arithmetic.
  std::string numerics_id() const override { return "cuda-v1"; }
  std::string describe() const override { return describe_; }
  PagePool& pages() override { return *pool_; }
  const PagePool& pages() const override { return *pool_; }

  Status forward(std::span<const BatchToken> batch, std::span<const SeqBlockTable> seqs,
                 bool prefill, float* logits_out) override;
  Status read_pages(std::span<const int32_t> pages, std::span<uint8_t> out) override;
  Status write_pages(std::span<const int32_t> pages, std::span<const uint8_t> in) override;

 private:
  Status forward_piece(std::span<const BatchToken> batch, std::span<const SeqBlockTable> seqs,
                       float* logits_out);
  Status upload_plan(const cuda_plan::PackedBatch& packed);
  // y [n][w.rows] (+)= x [n][w.cols] W^T: GEMV kernel for small n, else cuBLAS.
  Status matmul(const DeviceTensor& w, const void* x, int n, float* y, bool accumulate);
  Status check_copy(std::span<const int32_t> pages, size_t n_bytes) const;

  const Model* model_ = nullptr;
  LlamaHparams hp_;
  KvLayout layout_;
  int max_tokens_ = 0;
  std::string describe_;
  cuda_plan::WeightPlan plan_;
  std::unique_ptr<PagePool> pool_;  // free list only; bytes in kv_

  cuda::Stream compute_, copy_;
  cuda::Event compute_done_, copy_done_;
  cuda::CublasHandle cublas_;
  cuda::DeviceWeights weights_;
  DeviceBuffer kv_;
  cuda::KvPoolView kv_view_;
  // Activations (plan/memory_plan.h activation_scratch_bytes).
  DeviceBuffer x_, xb_, q_, k_, v_, gate_, up_, hb_, logits_;
  DeviceBuffer plan_dev_;
  cuda::PinnedBuffer plan_host_, logits_host_, staging_;
};

Status CudaBackend::init(const Model& model, const BackendOptions& options) {
  model_ = &model;
  hp_ = model.hparams();
  layout_ = options.layout;
  if (layout_.dtype == KvDtype::kQ8_0) {
    return Status::unsupported("cache.kv_dtype = 'q8_0' is CPU-only for now; use f16 or f32 with device = cuda");
  }
  max_tokens_ = std::max(1, options.max_batch_tokens);
  if (layout_.n_layer != hp_.n_layer || layout_.kv_dim != hp_.kv_dim())
    return Status::invalid_argument("KV layout does not match the model (n_layer, kv_dim)");
  if (hp_.n_head <= 0 || hp_.n_head_kv <= 0 || hp_.n_head % hp_.n_head_kv != 0 || hp_.n_rot % 2 != 0 ||
      hp_.n_rot > hp_.head_dim)
    return Status::unsupported("head layout n_head " + std::to_string(hp_.n_head) + ", n_head_kv " +
                               std::to_string(hp_.n_head_kv) + ", n_rot " + std::to_string(hp_.n_rot));
  if (hp_.head_dim > cuda::kAttnMaxHeadDim)
    return Status::unsupported("head_dim " + std::to_string(hp_.head_dim) + ": the CUDA attention kernel handles up to " +
                               std::to_string(cuda::kAttnMaxHeadDim));
  if (cuda_plan::attention_tile_tokens(hp_.n_head / hp_.n_head_kv) == 0)
    return Status::unsupported("GQA group of " + std::to_string(hp_.n_head / hp_.n_head_kv) +
                               " query heads per KV head: the CUDA attention kernel handles up to " +
                               std::to_string(cuda_plan::kAttnMaxRows));
  if (options.f32_weights != "f16" && options.f32_weights != "f32")
    return Status::invalid_argument("f32_weights = '" + options.f32_weights + "': must be f16 or f32");
  if (options.q8_0_weights != "f16")
    return Status::unsupported("q8_0_weights = '" + options.q8_0_weights +
                               "': only f16 (expanded at load) is implemented");

  LARDER_CUDA_CHECK(cudaSetDevice(0));
  cudaDeviceProp prop{};
  LARDER_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  cuda_plan::WeightPlanOptions wopt;
  wopt.f32_to_f16 = options.f32_weights == "f16";
  LARDER_ASSIGN_OR_RETURN(plan_, cuda_plan::plan_weight_upload(model, wopt));

  cuda_plan::DeviceMemoryRequest req;
  req.weight_bytes = plan_.device_bytes;
  req.scratch_bytes = cuda_plan::activation_scratch_bytes(hp_, max_tokens_, plan_.compute);
  req.page_bytes = layout_.page_bytes();
  req.n_pages = options.n_pages;
  LARDER_CUDA_CHECK(cudaMemGetInfo(&req.free_bytes, &req.total_bytes));
  LARDER_RETURN_IF_ERROR(cuda_plan::check_device_memory(req));

  LARDER_RETURN_IF_ERROR(compute_.create());
  LARDER_RETURN_IF_ERROR(copy_.create());
  LARDER_RETURN_IF_ERROR(compute_done_.create());
  LARDER_RETURN_IF_ERROR(copy_done_.create());
  LARDER_RETURN_IF_ERROR(cublas_.create(compute_.get()));
  LARDER_CUDA_CHECK(cuda::prepare_attention(hp_.head_dim));

  LARDER_RETURN_IF_ERROR(weights_.upload(plan_, compute_.get()));
  LARDER_ASSIGN_OR_RETURN(pool_, PagePool::create(layout_, options.n_pages, PageMemory::kNone));
  LARDER_RETURN_IF_ERROR(kv_.allocate(layout_.page_bytes() * size_t(options.n_pages), "the KV page pool"));
  LARDER_CUDA_CHECK(cudaMemsetAsync(kv_.get(), 0, kv_.bytes(), compute_.get()));
  kv_view_ = cuda::KvPoolView{kv_.get(), layout_.page_bytes(), layout_.block_bytes(), layout_.page_size,
                              layout_.kv_dim, layout_.dtype == KvDtype::kF16};

  const size_t n = size_t(max_tokens_);
  const size_t c = cuda_plan::device_type_bytes(plan_.compute);
  LARDER_RETURN_IF_ERROR(x_.allocate(n * hp_.n_embd * 4, "activations"));
  LARDER_RETURN_IF_ERROR(xb_.allocate(n * std::max(hp_.n_embd, hp_.q_dim()) * c, "activations"));
  LARDER_RETURN_IF_ERROR(q_.allocate(n * hp_.q_dim() * 4, "activations"));
  LARDER_RETURN_IF_ERROR(k_.allocate(n * hp_.kv_dim() * 4, "activations"));
  LARDER_RETURN_IF_ERROR(v_.allocate(n * hp_.kv_dim() * 4, "activations"));
  LARDER_RETURN_IF_ERROR(gate_.allocate(n * hp_.n_ff * 4, "activations"));
  LARDER_RETURN_IF_ERROR(up_.allocate(n * hp_.n_ff * 4, "activations"));
  LARDER_RETURN_IF_ERROR(hb_.allocate(n * hp_.n_ff * c, "activations"));
  const size_t logits_bytes = size_t(cuda_plan::kMaxLogitRows) * hp_.n_vocab * 4;
  LARDER_RETURN_IF_ERROR(logits_.allocate(logits_bytes, "logits"));
  LARDER_RETURN_IF_ERROR(logits_host_.allocate(logits_bytes, "logits"));
  LARDER_RETURN_IF_ERROR(staging_.allocate(layout_.page_bytes() * kStagingPages, "page copy staging"));
  LARDER_CUDA_CHECK(cudaStreamSynchronize(compute_.get()));

  describe_ = std::string("cuda: ") + prop.name + " (sm_" + std::to_string(prop.major) +
              std::to_string(prop.minor) + "), weights " + cuda_plan::device_type_name(plan_.compute) + " " +
              cuda_plan::format_bytes(weights_.bytes()) + ", KV pool " + cuda_plan::format_bytes(kv_.bytes()) +
              ", activations for " + std::to_string(max_tokens_) + " tokens " +
              cuda_plan::format_bytes(req.scratch_bytes);
  return Status::ok();
}

Status CudaBackend::upload_plan(const cuda_plan::PackedBatch& packed) {
  const size_t bytes = packed.data.size() * sizeof(int32_t);
  if (bytes > plan_host_.bytes()) {
    const size_t grown = std::max(bytes, size_t(1) << 16) * 2;
    LARDER_RETURN_IF_ERROR(plan_host_.allocate(grown, "batch plan"));
    LARDER_RETURN_IF_ERROR(plan_dev_.allocate(grown, "batch plan"));
  }
  std::memcpy(plan_host_.get(), packed.data.data(), bytes);
  LARDER_CUDA_CHECK(cudaMemcpyAsync(plan_dev_.get(), plan_host_.get(), bytes, cudaMemcpyHostToDevice,
                                    compute_.get()));
  return Status::ok();
}

Status CudaBackend::matmul(const DeviceTensor& w, const void* x, int n, float* y, bool accumulate) {
  if (cuda_plan::choose_matmul_path(n) == cuda_plan::MatmulPath::kGemv) {
    LARDER_CUDA_CHECK(cuda::launch_gemv(w.type, w.ptr, w.rows, w.cols, x, n, y, accumulate, compute_.get()));
    return Status::ok();
  }
  // Row-major Y[n][rows] = X[n][K] W[rows][K]^T is, column-major,
  // Y^T (rows x n) = W^T (rows x K, i.e. W col-major K x rows, transposed) * X^T (K x n).
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  const cudaDataType_t t = cuda_type(w.type);
  LARDER_CUBLAS_CHECK(cublasGemmEx(cublas_.get(), CUBLAS_OP_T, CUBLAS_OP_N, w.rows, n, w.cols, &alpha, w.ptr, t,
                                   w.cols, x, t, w.cols, &beta, y, CUDA_R_32F, w.rows, CUBLAS_COMPUTE_32F,
                                   CUBLAS_GEMM_DEFAULT));
  return Status::ok();
}

Status CudaBackend::forward(std::span<const BatchToken> batch, std::span<const SeqBlockTable> seqs,
                            bool prefill, float* logits_out) {
  (void)prefill;  // the path follows the number of tokens (cuda_plan::choose_matmul_path)
  if (batch.empty()) return Status::ok();
  const size_t n = batch.size();
  if (n <= size_t(max_tokens_)) return forward_piece(batch, seqs, logits_out);
  // Validate the whole batch before any K/V is written, then run it in pieces
  // (tokens of a sequence in order, so later pieces see earlier K/V).
  cuda_plan::BatchLimits lim{hp_.n_vocab, layout_.page_size, pool_->n_pages(), 1};
  LARDER_RETURN_IF_ERROR(cuda_plan::plan_device_batch(batch, seqs, lim).status());
  size_t row = 0;
  for (size_t b = 0; b < n; b += size_t(max_tokens_)) {
    auto piece = batch.subspan(b, std::min(n - b, size_t(max_tokens_)));
    float* out = logits_out != nullptr ? logits_out + row * size_t(hp_.n_vocab) : nullptr;
    LARDER_RETURN_IF_ERROR(forward_piece(piece, seqs, out));
    for (const BatchToken& t : piece) row += t.want_logits ? 1 : 0;
  }
  return Status::ok();
}

Status CudaBackend::forward_piece(std::span<const BatchToken> batch, std::span<const SeqBlockTable> seqs,
                                  float* logits_out) {
  const int group = hp_.n_head / hp_.n_head_kv;
  cuda_plan::BatchLimits lim{hp_.n_vocab, layout_.page_size, pool_->n_pages(),
                             cuda_plan::attention_tile_tokens(group)};
  LARDER_ASSIGN_OR_RETURN(cuda_plan::DeviceBatchPlan plan, cuda_plan::plan_device_batch(batch, seqs, lim));
  if (!plan.logit_rows.empty() && logits_out == nullptr)
    return Status::invalid_argument("logits_out is null but the batch wants logits");
  const cuda_plan::PackedBatch packed = cuda_plan::pack_batch(plan);
  LARDER_RETURN_IF_ERROR(upload_plan(packed));
  const int32_t* dplan = plan_dev_.as<int32_t>();
  const int32_t* d_tokens = dplan + packed.tokens;
  const int32_t* d_pos = dplan + packed.pos;
  const int32_t* d_table_start = dplan + packed.table_start;
  const int32_t* d_block_tables = dplan + packed.block_tables;
  const int n = packed.n_tokens;
  const DeviceType ct = plan_.compute;
  cudaStream_t s = compute_.get();
  float* x = x_.as<float>();

  LARDER_CUDA_CHECK(cuda::launch_embed(ct, weights_.tensor(0).ptr, hp_.n_embd, d_tokens, n, x, s));
  for (int l = 0; l < hp_.n_layer; ++l) {
    auto w = [&](int k) -> const DeviceTensor& { return weights_.tensor(plan_.index(l, k)); };
    LARDER_CUDA_CHECK(cuda::launch_rmsnorm(ct, x, nullptr, n, hp_.n_embd, w(0).f32(), hp_.rms_eps, xb_.get(), s));
    LARDER_RETURN_IF_ERROR(matmul(w(1), xb_.get(), n, q_.as<float>(), false));
    LARDER_RETURN_IF_ERROR(matmul(w(2), xb_.get(), n, k_.as<float>(), false));
    LARDER_RETURN_IF_ERROR(matmul(w(3), xb_.get(), n, v_.as<float>(), false));
    LARDER_CUDA_CHECK(cuda::launch_rope(q_.as<float>(), hp_.n_head, k_.as<float>(), hp_.n_head_kv, hp_.head_dim,
                                        hp_.n_rot, hp_.rope_neox, hp_.rope_freq_base, d_pos, n, s));
    // K/V go into the pages first; attention reads them back in the page dtype.
    LARDER_CUDA_CHECK(cuda::launch_kv_write(kv_view_, l, k_.as<float>(), v_.as<float>(), n, d_pos, d_table_start,
                                            d_block_tables, s));
    cuda::AttentionArgs a;
    a.pool = kv_view_;
    a.layer = l;
    a.n_head = hp_.n_head;
    a.n_head_kv = hp_.n_head_kv;
    a.head_dim = hp_.head_dim;
    a.q = q_.as<float>();
    a.out = xb_.get();
    a.out_type = ct;
    a.tiles = dplan + packed.tiles;
    a.n_tiles = packed.n_tiles;
    a.pos = d_pos;
    a.table_start = d_table_start;
    a.block_tables = d_block_tables;
    LARDER_CUDA_CHECK(cuda::launch_attention(a, s));
    LARDER_RETURN_IF_ERROR(matmul(w(4), xb_.get(), n, x, /*accumulate=*/true));  // x += Wo att

    LARDER_CUDA_CHECK(cuda::launch_rmsnorm(ct, x, nullptr, n, hp_.n_embd, w(5).f32(), hp_.rms_eps, xb_.get(), s));
    LARDER_RETURN_IF_ERROR(matmul(w(6), xb_.get(), n, gate_.as<float>(), false));
    LARDER_RETURN_IF_ERROR(matmul(w(7), xb_.get(), n, up_.as<float>(), false));
    LARDER_CUDA_CHECK(cuda::launch_swiglu(ct, gate_.as<float>(), up_.as<float>(), int64_t(n) * hp_.n_ff,
                                          hb_.get(), s));
    LARDER_RETURN_IF_ERROR(matmul(w(8), hb_.get(), n, x, /*accumulate=*/true));  // x += Wdown hb
  }

  // Output head for the rows that want logits only, kMaxLogitRows at a time.
  const DeviceTensor& out_norm = weights_.tensor(1);
  const DeviceTensor& out_w = weights_.tensor(2);
  const size_t row_bytes = size_t(hp_.n_vocab) * sizeof(float);
  for (int r0 = 0; r0 < packed.n_logit_rows; r0 += cuda_plan::kMaxLogitRows) {
    const int nr = std::min(cuda_plan::kMaxLogitRows, packed.n_logit_rows - r0);
    LARDER_CUDA_CHECK(cuda::launch_rmsnorm(ct, x, dplan + packed.logit_rows + r0, nr, hp_.n_embd, out_norm.f32(),
                                           hp_.rms_eps, xb_.get(), s));
    LARDER_RETURN_IF_ERROR(matmul(out_w, xb_.get(), nr, logits_.as<float>(), false));
    LARDER_CUDA_CHECK(cudaMemcpyAsync(logits_host_.get(), logits_.get(), nr * row_bytes, cudaMemcpyDeviceToHost, s));
    LARDER_CUDA_CHECK(cudaStreamSynchronize(s));
    std::memcpy(logits_out + size_t(r0) * hp_.n_vocab, logits_host_.get(), nr * row_bytes);
  }
  LARDER_CUDA_CHECK(cudaStreamSynchronize(s));  // surfaces asynchronous kernel errors
  return Status::ok();
}

Status CudaBackend::check_copy(std::span<const int32_t> pages, size_t n_bytes) const {
  const size_t pb = layout_.page_bytes();
  if (n_bytes != pages.size() * pb)
    return Status::invalid_argument("page copy: " + std::to_string(n_bytes) + " bytes for " +
                                    std::to_string(pages.size()) + " pages of " + std::to_string(pb));
  for (int32_t p : pages)
    if (p < 0 || p >= pool_->n_pages())
      return Status::invalid_argument("page copy: page id " + std::to_string(p) + " outside the pool");
  return Status::ok();
}

Status CudaBackend::read_pages(std::span<const int32_t> pages, std::span<uint8_t> out) {
  LARDER_RETURN_IF_ERROR(check_copy(pages, out.size()));
  const size_t pb = layout_.page_bytes();
  // The copy stream starts after every forward enqueued so far (its K/V writes).
  LARDER_CUDA_CHECK(cudaEventRecord(compute_done_.get(), compute_.get()));
  LARDER_CUDA_CHECK(cudaStreamWaitEvent(copy_.get(), compute_done_.get(), 0));
  for (const cuda_plan::PageCopyRun& run : cuda_plan::plan_page_copies(pages, pb, kStagingPages)) {
    const size_t bytes = size_t(run.n_pages) * pb;
    LARDER_CUDA_CHECK(cudaMemcpyAsync(staging_.get(), kv_.as<uint8_t>() + size_t(run.first_page) * pb, bytes,
                                      cudaMemcpyDeviceToHost, copy_.get()));
    LARDER_CUDA_CHECK(cudaStreamSynchronize(copy_.get()));
    std::memcpy(out.data() + run.host_offset, staging_.get(), bytes);
  }
  return Status::ok();
}

Status CudaBackend::write_pages(std::span<const int32_t> pages, std::span<const uint8_t> in) {
  LARDER_RETURN_IF_ERROR(check_copy(pages, in.size()));
  const size_t pb = layout_.page_bytes();
  // The pages may still be read by enqueued compute (a page evicted and reused).
  LARDER_CUDA_CHECK(cudaEventRecord(compute_done_.get(), compute_.get()));
  LARDER_CUDA_CHECK(cudaStreamWaitEvent(copy_.get(), compute_done_.get(), 0));
  for (const cuda_plan::PageCopyRun& run : cuda_plan::plan_page_copies(pages, pb, kStagingPages)) {
    const size_t bytes = size_t(run.n_pages) * pb;
    std::memcpy(staging_.get(), in.data() + run.host_offset, bytes);
    LARDER_CUDA_CHECK(cudaMemcpyAsync(kv_.as<uint8_t>() + size_t(run.first_page) * pb, staging_.get(), bytes,
                                      cudaMemcpyHostToDevice, copy_.get()));
    LARDER_CUDA_CHECK(cudaStreamSynchronize(copy_.get()));  // staging is reused
  }
  // Later compute sees the restored bytes.
  LARDER_CUDA_CHECK(cudaEventRecord(copy_done_.get(), copy_.get()));
  LARDER_CUDA_CHECK(cudaStreamWaitEvent(compute_.get(), copy_done_.get(), 0));
  return Status::ok();
}

}  // namespace

Result<int> cuda_count_devices() {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    // No NVIDIA driver (a machine without a GPU) reads as "driver version is
    // insufficient"; say what it means.
    const char* meaning = err == cudaErrorInsufficientDriver ? "no NVIDIA driver or one older than this CUDA; "
                          : err == cudaErrorNoDevice         ? "no CUDA-capable device; "
                                                             : "";
    return Status::not_found(std::string("no usable GPU: ") + meaning + "cudaGetDeviceCount: " +
                             cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
  }
  return n;
}

Result<std::unique_ptr<Backend>> create_cuda_backend(const Model& model, const BackendOptions& options) {
  auto b = std::make_unique<CudaBackend>();
  LARDER_RETURN_IF_ERROR(b->init(model, options));
  spdlog::info("{}", b->describe());
  return std::unique_ptr<Backend>(std::move(b));
}

}  // namespace larder
