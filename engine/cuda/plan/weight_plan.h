// Which format each weight tensor gets on the device, and how many bytes it
// takes there, in plain C++ (no CUDA headers).
//
// All matrices (token_embd, output and the seven per layer) share one compute
// type, so that one activation buffer of that type feeds every GEMM/GEMV:
//   - "f32_weights = f32" and an F32 matrix in the model: everything F32
//     (cuBLAS with FP32 compute, no tensor cores);
//   - every matrix BF16 (or BF16 and F32): BF16;
//   - otherwise F16. Q8_0 is expanded to F16 at load (docs/gpu.md: why).
// Norm vectors stay F32. A tied output head (output = token_embd) is
// uploaded once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/cuda/plan/device_type.h"
#include "engine/gguf/ggml_types.h"
#include "engine/model/model.h"
#include "storage/status.h"

namespace larder::cuda_plan {

struct WeightPlanOptions {
  bool f32_to_f16 = true;       // BackendOptions::f32_weights == "f16"
};

struct TensorUpload {
  std::string name;             // e.g. "blk.3.ffn_up"
  const WeightView* src = nullptr;
  GgmlType src_type = GgmlType::kF32;
  DeviceType dst_type = DeviceType::kF16;
  int64_t cols = 0;             // ne[0], input features
  int64_t rows = 0;             // ne[1] (1 for a vector)
  size_t src_bytes = 0;
  size_t dst_bytes = 0;         // rows * cols * device_type_bytes, then rounded up to 256
  bool convert = false;         // false: the bytes are copied as they are
  int alias_of = -1;            // >= 0: same data as tensors[alias_of], not uploaded again
};

struct WeightPlan {
  DeviceType compute = DeviceType::kF16;
  std::vector<TensorUpload> tensors;   // token_embd, output_norm, output, then per layer
                                       // attn_norm wq wk wv wo ffn_norm ffn_gate ffn_up ffn_down
  size_t device_bytes = 0;             // sum of dst_bytes of non-aliases
  size_t src_bytes = 0;
  size_t max_convert_rows_bytes = 0;   // largest dst_bytes of a converted tensor
  int index(int layer, int k) const { return 3 + layer * 9 + k; }  // k in [0, 9)
};

// Errors: kUnsupported (a matrix type the device path cannot use).
Result<WeightPlan> plan_weight_upload(const Model& model, const WeightPlanOptions& options);

// Device bytes of a tensor of rows x cols in `t`, rounded up to 256 (the
// alignment of every tensor in the device weight arena).
size_t device_tensor_bytes(DeviceType t, int64_t rows, int64_t cols);

}  // namespace larder::cuda_plan
