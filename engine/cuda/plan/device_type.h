// Element types of device tensors (weights and matmul inputs). Kept free of
// C++20 so that the .cu files (compiled as C++17 by nvcc) can include it.
#pragma once

#include <cstddef>

namespace larder::cuda_plan {

enum class DeviceType { kF16, kBF16, kF32 };
const char* device_type_name(DeviceType t);
size_t device_type_bytes(DeviceType t);

}  // namespace larder::cuda_plan
