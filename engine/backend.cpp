// Backend selection and the CPU backend (CpuForward over a host PagePool).
#include "engine/backend.h"

#include <cstring>

#include <spdlog/spdlog.h>

#include "engine/backend_check.h"

#if defined(LARDER_WITH_CUDA)
#include "engine/cuda/cuda_backend.h"
#endif

namespace larder {

namespace {

// The CPU backend: the page bytes live in the pool's host memory, so a copy
// out or in is a memcpy per layer (PagePool::read_page / write_page).
// Forward arithmetic is CpuForward's, unchanged.
class CpuBackend final : public Backend {
 public:
  // reference: kNone serves; the others are the start-up check's references
  // (backend_check.h, CpuForwardOptions::reference).
  static Result<std::unique_ptr<Backend>> create(
      const Model& model, const BackendOptions& options,
      CpuForwardOptions::Reference reference = CpuForwardOptions::Reference::kNone) {
    std::unique_ptr<CpuBackend> b(new CpuBackend());
    LARDER_ASSIGN_OR_RETURN(b->pool_, PagePool::create(options.layout, options.n_pages));
    CpuForwardOptions fopt;
    fopt.n_threads = options.n_threads;
    fopt.reference = reference;
    LARDER_ASSIGN_OR_RETURN(b->forward_, CpuForward::create(model, *b->pool_, fopt));
    b->reference_ = reference;
    return std::unique_ptr<Backend>(std::move(b));
  }

  const char* name() const override { return "cpu"; }
  // A reference's arithmetic is not the serving one's: an id of its own, so
  // that pages it wrote could never pass for the CPU's.
  std::string numerics_id() const override {
    switch (reference_) {
      case CpuForwardOptions::Reference::kNone: return cpu_numerics_id();
      case CpuForwardOptions::Reference::kInt8: return cpu_numerics_id() + "-reference-int8";
      case CpuForwardOptions::Reference::kF32: return cpu_numerics_id() + "-reference-f32";
    }
    return cpu_numerics_id() + "-reference";
  }
  std::string describe() const override {
    return "cpu, " + std::to_string(forward_->n_threads()) + " threads";
  }
  PagePool& pages() override { return *pool_; }
  const PagePool& pages() const override { return *pool_; }

  Status forward(std::span<const BatchToken> batch, std::span<const SeqBlockTable> seqs,
                 bool prefill, float* logits_out) override {
    return forward_->forward(batch, seqs, prefill, logits_out);
  }

  Status read_pages(std::span<const int32_t> pages, std::span<uint8_t> out) override {
    LARDER_RETURN_IF_ERROR(check(pages, out.size()));
    const size_t pb = pool_->layout().page_bytes();
    for (size_t i = 0; i < pages.size(); ++i) pool_->read_page(pages[i], out.data() + i * pb);
    return Status::ok();
  }
  Status write_pages(std::span<const int32_t> pages, std::span<const uint8_t> in) override {
    LARDER_RETURN_IF_ERROR(check(pages, in.size()));
    const size_t pb = pool_->layout().page_bytes();
    for (size_t i = 0; i < pages.size(); ++i) pool_->write_page(pages[i], in.data() + i * pb);
    return Status::ok();
  }

 private:
  CpuBackend() = default;
  Status check(std::span<const int32_t> pages, size_t n_bytes) const {
    const size_t pb = pool_->layout().page_bytes();
    if (n_bytes != pages.size() * pb)
      return Status::invalid_argument("page copy: " + std::to_string(n_bytes) + " bytes for " +
                                      std::to_string(pages.size()) + " pages of " + std::to_string(pb));
    for (int32_t p : pages)
      if (p < 0 || p >= pool_->n_pages())
        return Status::invalid_argument("page copy: page id " + std::to_string(p) + " outside the pool");
    return Status::ok();
  }
  std::unique_ptr<PagePool> pool_;
  std::unique_ptr<CpuForward> forward_;
  CpuForwardOptions::Reference reference_ = CpuForwardOptions::Reference::kNone;
};

}  // namespace

Result<int> cuda_device_count() {
#if defined(LARDER_WITH_CUDA)
  return cuda_count_devices();
#else
  return Status::unsupported("larder was built without CUDA (nvcc not found or LARDER_CUDA=OFF)");
#endif
}

Result<DeviceCeilings> measure_cuda_ceilings() {
#if defined(LARDER_WITH_CUDA)
  return cuda_measure_ceilings();
#else
  return Status::unsupported("larder was built without CUDA (nvcc not found or LARDER_CUDA=OFF)");
#endif
}

Status cuda_supports_model(const LlamaHparams& hp) {
  std::string missing;
  auto need = [&](bool used, const char* what) {
    if (!used) return;
    if (!missing.empty()) missing += ", ";
    missing += what;
  };
  need(hp.has_qkv_bias, "Q/K/V biases");
  need(hp.has_out_bias, "an output-projection bias");
  need(hp.has_qk_norm, "Q/K RMSNorm");
  need(hp.has_rope_freq_factors, "RoPE frequency factors");
  need(hp.rope_freq_scale != 1.0f, "RoPE scaling");
  if (missing.empty()) return Status::ok();
  return Status::unsupported("the CUDA backend does not compute " + missing + " (architecture '" +
                             hp.architecture + "') yet");
}

Result<std::unique_ptr<Backend>> create_cpu_reference(const Model& model, const BackendOptions& options,
                                                      bool f32_activations) {
  return CpuBackend::create(model, options,
                            f32_activations ? CpuForwardOptions::Reference::kF32 : CpuForwardOptions::Reference::kInt8);
}

Accelerator cuda_accelerator() {
  Accelerator a;
  a.name = "cuda";
  a.device_count = [] { return cuda_device_count(); };
  a.supports = [](const Model& model) { return cuda_supports_model(model.hparams()); };
  a.create = [](const Model& model, const BackendOptions& options) -> Result<std::unique_ptr<Backend>> {
#if defined(LARDER_WITH_CUDA)
    return create_cuda_backend(model, options);
#else
    (void)model;
    (void)options;
    return Status::unsupported("larder was built without CUDA");
#endif
  };
  return a;
}

namespace {

// The start-up check of `candidate` (backend_check.h) against two CPU passes
// that read the weights in place. OK(true) passed, OK(false) failed (logged,
// with the reason in *why); an error when the CPU reference could not run.
Result<bool> passes_check(Backend& candidate, const Model& model, const BackendOptions& options,
                          std::string* why) {
  BackendOptions ref = options;
  ref.device = "cpu";
  ref.n_pages = backend_check_pages(options.layout.page_size);
  LARDER_ASSIGN_OR_RETURN(std::unique_ptr<Backend> cpu, create_cpu_reference(model, ref, false));
  LARDER_ASSIGN_OR_RETURN(std::unique_ptr<Backend> cpu_f32, create_cpu_reference(model, ref, true));
  LARDER_ASSIGN_OR_RETURN(BackendCheck c, check_backend(candidate, *cpu, *cpu_f32, model.hparams().n_vocab));
  spdlog::log(c.passed ? spdlog::level::info : spdlog::level::err,
              "engine.device = '{}': start-up check of the {} backend against the CPU {}", options.device,
              candidate.name(), c.summary());
  *why = c.failure + ": " + c.numbers();
  return c.passed;
}

}  // namespace

Result<std::unique_ptr<Backend>> create_backend(const Model& model, const BackendOptions& options) {
  return create_backend(model, options, cuda_accelerator());
}

Result<std::unique_ptr<Backend>> create_backend(const Model& model, const BackendOptions& options,
                                                const Accelerator& accelerator) {
  const std::string& d = options.device;
  if (d != "auto" && d != "cuda" && d != "cpu")
    return Status::invalid_argument("engine.device = '" + d + "': must be auto, cuda or cpu");
  if (d == "cpu") return CpuBackend::create(model, options);
  const std::string& acc = accelerator.name;
  Result<int> n = accelerator.device_count();
  if (d == "cuda") {
    if (!n.is_ok()) return Status(n.status().code(), "engine.device = 'cuda': " + n.status().message());
    if (n.value() == 0) return Status::not_found("engine.device = 'cuda': no " + acc + " device found");
  } else if (!n.is_ok() || n.value() == 0) {
    spdlog::info("engine.device = 'auto': no usable {} device ({}); running on the CPU", acc,
                 n.is_ok() ? std::string("0 devices") : n.status().message());
    return CpuBackend::create(model, options);
  }
  if (Status st = accelerator.supports(model); !st.is_ok()) {
    if (d == "cuda") return Status(st.code(), "engine.device = 'cuda': " + st.message());
    spdlog::info("engine.device = 'auto': {}; running on the CPU", st.message());
    return CpuBackend::create(model, options);
  }
  Result<std::unique_ptr<Backend>> made = accelerator.create(model, options);
  if (!made.is_ok()) {
    if (d == "cuda") return Status(made.status().code(), "engine.device = 'cuda': " + made.status().message());
    spdlog::warn("engine.device = 'auto': the {} backend could not be created ({}); running on the CPU", acc,
                 made.status().message());
    return CpuBackend::create(model, options);
  }
  std::unique_ptr<Backend> backend = std::move(made).value();
  if (!options.device_check) {
    spdlog::warn("engine.device = '{}': the {} backend serves without its start-up check (engine.device_check = false)",
                 d, acc);
    return backend;
  }
  std::string why;
  Result<bool> passed = passes_check(*backend, model, options, &why);
  if (!passed.is_ok()) {
    const std::string msg = "the start-up check of the " + acc + " backend could not run: " + passed.status().message();
    if (d == "cuda") {
      return Status(passed.status().code(), "engine.device = 'cuda': " + msg +
                                                "; set engine.device_check = false to serve on it unchecked");
    }
    spdlog::warn("engine.device = 'auto': {}; running on the CPU", msg);
    backend.reset();
    return CpuBackend::create(model, options);
  }
  if (passed.value()) return backend;
  if (d == "cuda") {
    return Status::internal("engine.device = 'cuda': the " + acc + " backend failed its start-up check against the CPU (" +
                            why + "); set engine.device = \"cpu\" (or \"auto\", which falls back to the CPU), or "
                            "engine.device_check = false to serve on it unchecked");
  }
  spdlog::warn("engine.device = 'auto': the {} backend failed its start-up check; running on the CPU", acc);
  backend.reset();  // its device memory, before the CPU's pool is allocated
  return CpuBackend::create(model, options);
}

}  // namespace larder
