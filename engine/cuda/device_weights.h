// The model's weights in device memory: one arena, uploaded once at load
// following a cuda_plan::WeightPlan (F16/BF16 copied as they are; Q8_0 and,
// by default, F32 converted to the compute type on the host first). Private
// to engine/cuda/.
#pragma once

#include <vector>

#include "engine/cuda/cuda_util.h"
#include "engine/cuda/plan/weight_plan.h"

namespace larder::cuda {

struct DeviceTensor {
  const void* ptr = nullptr;
  cuda_plan::DeviceType type = cuda_plan::DeviceType::kF16;
  int rows = 0;   // output features
  int cols = 0;   // input features (contiguous)
  const float* f32() const { return static_cast<const float*>(ptr); }
};

class DeviceWeights {
 public:
  // Allocates the arena (plan.device_bytes) and copies every tensor through a
  // pinned staging buffer on `stream`. Errors: kResourceExhausted (arena),
  // kIOError (copy).
  Status upload(const cuda_plan::WeightPlan& plan, cudaStream_t stream);

  const DeviceTensor& tensor(int index) const { return tensors_[size_t(index)]; }
  size_t bytes() const { return arena_.bytes(); }

 private:
  DeviceBuffer arena_;
  std::vector<DeviceTensor> tensors_;
};

}  // namespace larder::cuda
