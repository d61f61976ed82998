// The CUDA backend's entry points (engine/backend.h). This header carries no
// CUDA types: the engine includes it without the CUDA toolkit's headers.
//
// CudaBackend (engine/cuda/cuda_backend.cpp): weights uploaded once at load
// (engine/cuda/plan/weight_plan.h), KV pages in one device pool allocated at
// start, prefill with cuBLAS GEMMs (FP16/BF16 in, FP32 accumulate, tensor
// cores), decode with GEMV kernels and a paged-attention kernel reading K/V
// through a device block table, page copies device <-> pinned host on their
// own stream. Design and measurements: docs/gpu.md.
#pragma once

#include <memory>

#include "engine/backend.h"

namespace larder {

// cudaGetDeviceCount. Errors: kNotFound with the CUDA error string (no
// driver, no device, driver older than the runtime).
Result<int> cuda_count_devices();

// engine/backend.h measure_cuda_ceilings (engine/cuda/ceilings.cpp).
Result<DeviceCeilings> cuda_measure_ceilings();

// Device 0. Errors: kInvalidArgument (layout, options), kUnsupported (model
// shape or weight type the kernels do not handle: head_dim > 128, GQA group
// > 32), kResourceExhausted (weights, activations or the KV pool do not fit,
// with the sizes), kIOError (a CUDA or cuBLAS call failed, named).
Result<std::unique_ptr<Backend>> create_cuda_backend(const Model& model, const BackendOptions& options);

}  // namespace larder
