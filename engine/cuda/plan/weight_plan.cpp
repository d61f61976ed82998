#include "engine/cuda/plan/weight_plan.h"

#include <algorithm>

namespace larder::cuda_plan {

const char* device_type_name(DeviceType t) {
  switch (t) {
    case DeviceType::kF16: return "f16";
    case DeviceType::kBF16: return "bf16";
    case DeviceType::kF32: return "f32";
  }
  return "?";
}

size_t device_type_bytes(DeviceType t) { return t == DeviceType::kF32 ? 4 : 2; }

size_t device_tensor_bytes(DeviceType t, int64_t rows, int64_t cols) {
  const size_t b = size_t(rows) * size_t(cols) * device_type_bytes(t);
  return (b + 255) / 256 * 256;
}

namespace {

bool matrix_type_ok(GgmlType t) {
  return t == GgmlType::kF32 || t == GgmlType::kF16 || t == GgmlType::kBF16 || t == GgmlType::kQ8_0;
}

}  // namespace

Result<WeightPlan> plan_weight_upload(const Model& model, const WeightPlanOptions& options) {
  WeightPlan plan;
  struct Entry {
    std::string name;
    const WeightView* w;
    bool matrix;
  };
  std::vector<Entry> entries;
  entries.push_back({"token_embd", &model.token_embd(), true});
  entries.push_back({"output_norm", &model.output_norm(), false});
  entries.push_back({"output", &model.output(), true});
  const char* kNames[9] = {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                           "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"};
  for (size_t l = 0; l < model.layers().size(); ++l) {
    const LayerWeights& lw = model.layers()[l];
    const WeightView* ws[9] = {&lw.attn_norm, &lw.wq, &lw.wk, &lw.wv, &lw.wo,
                               &lw.ffn_norm, &lw.ffn_gate, &lw.ffn_up, &lw.ffn_down};
    for (int k = 0; k < 9; ++k)
      entries.push_back({"blk." + std::to_string(l) + "." + kNames[k], ws[k], k != 0 && k != 5});
  }

  bool any_f32 = false, all_bf16_or_f32 = true, any_bf16 = false;
  for (const Entry& e : entries) {
    if (!e.matrix) continue;
    if (!matrix_type_ok(e.w->type))
      return Status::unsupported(e.name + ": weight type " + std::to_string(uint32_t(e.w->type)) +
                                 " not supported by the CUDA backend (F32, F16, BF16, Q8_0)");
    any_f32 |= e.w->type == GgmlType::kF32;
    any_bf16 |= e.w->type == GgmlType::kBF16;
    all_bf16_or_f32 &= e.w->type == GgmlType::kBF16 || e.w->type == GgmlType::kF32;
  }
  if (!options.f32_to_f16 && any_f32) {
    plan.compute = DeviceType::kF32;
  } else if (any_bf16 && all_bf16_or_f32) {
    plan.compute = DeviceType::kBF16;
  } else {
    plan.compute = DeviceType::kF16;
  }

  for (const Entry& e : entries) {
    TensorUpload u;
    u.name = e.name;
    u.src = e.w;
    u.src_type = e.w->type;
    u.cols = e.w->ne[0];
    u.rows = e.matrix ? e.w->ne[1] : 1;
    u.src_bytes = e.w->row_bytes * size_t(u.rows);
    if (!e.matrix) {
      if (e.w->type != GgmlType::kF32) return Status::unsupported(e.name + ": norm vector is not F32");
      u.dst_type = DeviceType::kF32;
      u.convert = false;
    } else {
      u.dst_type = plan.compute;
      const bool same = (plan.compute == DeviceType::kF16 && u.src_type == GgmlType::kF16) ||
                        (plan.compute == DeviceType::kBF16 && u.src_type == GgmlType::kBF16) ||
                        (plan.compute == DeviceType::kF32 && u.src_type == GgmlType::kF32);
      u.convert = !same;
    }
    u.dst_bytes = device_tensor_bytes(u.dst_type, u.rows, u.cols);
    for (size_t j = 0; j < plan.tensors.size(); ++j) {
      if (plan.tensors[j].src->data == e.w->data && plan.tensors[j].dst_type == u.dst_type) {
        u.alias_of = int(j);
        break;
      }
    }
    if (u.alias_of < 0) {
      plan.device_bytes += u.dst_bytes;
      plan.src_bytes += u.src_bytes;
      if (u.convert) plan.max_convert_rows_bytes = std::max(plan.max_convert_rows_bytes, u.dst_bytes);
    }
    plan.tensors.push_back(std::move(u));
  }
  return plan;
}

}  // namespace larder::cuda_plan
