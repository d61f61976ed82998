#include "engine/cuda/device_weights.h"

#include <algorithm>
#include <cstring>

#include "engine/gguf/ggml_types.h"

namespace larder::cuda {

namespace {

constexpr size_t kStagingBytes = size_t(64) << 20;

// Converts `n_rows` rows of `u` starting at `row0` into dst (compute type).
void convert_rows(const cuda_plan::TensorUpload& u, int64_t row0, int64_t n_rows, uint8_t* dst,
                  std::vector<float>& tmp) {
  tmp.resize(size_t(u.cols));
  const size_t out_row = size_t(u.cols) * cuda_plan::device_type_bytes(u.dst_type);
  for (int64_t r = 0; r < n_rows; ++r) {
    dequantize_row(u.src_type, u.src->row(row0 + r), tmp.data(), u.cols);
    uint8_t* o = dst + size_t(r) * out_row;
    switch (u.dst_type) {
      case cuda_plan::DeviceType::kF32: std::memcpy(o, tmp.data(), out_row); break;
      case cuda_plan::DeviceType::kF16:
        for (int64_t c = 0; c < u.cols; ++c) reinterpret_cast<uint16_t*>(o)[c] = fp32_to_fp16(tmp[size_t(c)]);
        break;
      case cuda_plan::DeviceType::kBF16:
        for (int64_t c = 0; c < u.cols; ++c) reinterpret_cast<uint16_t*>(o)[c] = fp32_to_bf16(tmp[size_t(c)]);
        break;
    }
  }
}

}  // namespace

Status DeviceWeights::upload(const cuda_plan::WeightPlan& plan, cudaStream_t stream) {
  LARDER_RETURN_IF_ERROR(arena_.allocate(plan.device_bytes, "model weights"));
  PinnedBuffer staging;
  LARDER_RETURN_IF_ERROR(staging.allocate(kStagingBytes, "weight upload staging"));
  std::vector<float> tmp;
  uint8_t* base = arena_.as<uint8_t>();
  size_t offset = 0;
  tensors_.clear();
  for (const cuda_plan::TensorUpload& u : plan.tensors) {
    DeviceTensor t;
    t.type = u.dst_type;
    t.rows = int(u.rows);
    t.cols = int(u.cols);
    if (u.alias_of >= 0) {
      t.ptr = tensors_[size_t(u.alias_of)].ptr;
      tensors_.push_back(t);
      continue;
    }
    uint8_t* dst = base + offset;
    t.ptr = dst;
    offset += u.dst_bytes;
    const size_t row_out = size_t(u.cols) * cuda_plan::device_type_bytes(u.dst_type);
    const int64_t rows_per_chunk = std::max<int64_t>(1, int64_t(kStagingBytes / row_out));
    for (int64_t r0 = 0; r0 < u.rows; r0 += rows_per_chunk) {
      const int64_t nr = std::min(rows_per_chunk, u.rows - r0);
      const size_t bytes = size_t(nr) * row_out;
      if (u.convert) {
        convert_rows(u, r0, nr, staging.as<uint8_t>(), tmp);
      } else {
        std::memcpy(staging.get(), u.src->row(r0), bytes);
      }
      LARDER_CUDA_CHECK(cudaMemcpyAsync(dst + size_t(r0) * row_out, staging.get(), bytes,
                                        cudaMemcpyHostToDevice, stream));
      LARDER_CUDA_CHECK(cudaStreamSynchronize(stream));  // staging is reused
    }
    tensors_.push_back(t);
  }
  return Status::ok();
}

}  // namespace larder::cuda
