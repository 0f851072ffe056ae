// The record of ONNX RotaryEmbedding (opset 23; ir/op_def.h): X (B, H, S, D) or (B, S, H*D), its
// cos and sin caches, per position (B, S, rot/2) or a table (max_position, rot/2) gathered by
// position_ids. Its executor kernel is exec/ops.cpp's (ATen), its GPU price cudnn_backend.cpp's,
// its form below opset 23 (HF's rotate_half chain) onnx/export.cpp's.
#include <string>

#include "rlflow/ir/op_def.h"

namespace rlflow::ir {

namespace {

Error rotary_error(const std::string& why) { return Error::bad_input("RotaryEmbedding: " + why); }

Expected<std::vector<TensorType>> infer_rotary(const OpParams& params, const std::vector<TensorType>& in) {
  const auto* p = &std::get<RotaryParams>(params);
  const TensorType& x = in[0];
  int64_t batch = 0, seq = 0, head = 0;
  if (x.rank() == 4) {  // (B, H, S, D)
    if (p->num_heads != 0 && p->num_heads != x.shape[1]) return rotary_error("num_heads differs from X's dim 1");
    batch = x.shape[0], seq = x.shape[2], head = x.shape[3];
  } else if (x.rank() == 3) {  // (B, S, H*D)
    if (p->num_heads <= 0 || x.shape[2] % p->num_heads != 0) return rotary_error("a 3-D X needs num_heads dividing its last dim");
    batch = x.shape[0], seq = x.shape[1], head = x.shape[2] / p->num_heads;
  } else {
    return rotary_error("X must be 3-D or 4-D");
  }
  const int64_t rot = p->rotary_embedding_dim == 0 ? head : p->rotary_embedding_dim;
  if (rot <= 0 || rot % 2 != 0 || rot > head) return rotary_error("rotary_embedding_dim must be even and at most the head size");
  for (size_t c = 1; c < 3; ++c) {
    const TensorType& t = in[c];
    if (t.dtype != x.dtype) return rotary_error("the caches must have X's type");
    const bool ok = in.size() == 4 ? t.rank() == 2 && t.shape[1] == rot / 2
                                   : t.rank() == 3 && t.shape == Shape{batch, seq, rot / 2};
    if (!ok) return rotary_error(in.size() == 4 ? "with position_ids a cache is (max_position, rotary_embedding_dim / 2)"
                                           : "a cache is (B, S, rotary_embedding_dim / 2)");
  }
  if (in.size() == 4 && (in[3].dtype != DType::kInt64 || in[3].shape != Shape{batch, seq}))
    return rotary_error("position_ids must be int64 of shape (B, S)");
  return std::vector<TensorType>{x};
}

// Two multiplies and an add per rotated element.
double rotary_flops(const OpParams&, const std::vector<TensorType>&, const std::vector<TensorType>& out) {
  return 3.0 * static_cast<double>(out[0].numel());
}

double rotary_tensor_bytes(const TensorType& t) { return static_cast<double>(t.numel()) * static_cast<double>(dtype_size(t.dtype)); }

// With position_ids it reads only the cache rows it gathers, not the whole table.
double rotary_bytes(const std::vector<TensorType>& in, const std::vector<TensorType>& out) {
  double b = rotary_tensor_bytes(out[0]) + rotary_tensor_bytes(in[0]);
  if (in.size() == 4)
    return b + rotary_tensor_bytes(in[3]) + 2.0 * static_cast<double>(in[3].numel() * in[1].shape.back()) * static_cast<double>(dtype_size(in[1].dtype));
  return b + rotary_tensor_bytes(in[1]) + rotary_tensor_bytes(in[2]);
}

}  // namespace

extern const OpDef kRotaryEmbeddingDef;
const OpDef kRotaryEmbeddingDef{.min_inputs = 3, .max_inputs = 4,  // X, cos_cache, sin_cache[, position_ids]
                                .infer = infer_rotary,
                                .flops = rotary_flops,
                                .bytes = rotary_bytes,
                                .lowered_below_since = true};

}  // namespace rlflow::ir
