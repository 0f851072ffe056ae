#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "aten_ops.h"
#include "onnx_ops.h"
#include "rlflow/ir/evaluator.h"

namespace rlflow::exec::detail {

using ir::OpKind;

at::ScalarType to_scalar_type(ir::DType d) {
  switch (d) {
    case ir::DType::kFloat32: return at::kFloat;
    case ir::DType::kFloat64: return at::kDouble;
    case ir::DType::kFloat16: return at::kHalf;
    case ir::DType::kBFloat16: return at::kBFloat16;
    case ir::DType::kInt64: return at::kLong;
    case ir::DType::kInt32: return at::kInt;
    case ir::DType::kInt8: return at::kChar;
    case ir::DType::kUInt8: return at::kByte;
    case ir::DType::kBool: return at::kBool;
  }
  return at::kFloat;
}

namespace {
ir::DType from_scalar_type(at::ScalarType s) {
  switch (s) {
    case at::kFloat: return ir::DType::kFloat32;
    case at::kDouble: return ir::DType::kFloat64;
    case at::kHalf: return ir::DType::kFloat16;
    case at::kBFloat16: return ir::DType::kBFloat16;
    case at::kLong: return ir::DType::kInt64;
    case at::kInt: return ir::DType::kInt32;
    case at::kChar: return ir::DType::kInt8;
    case at::kByte: return ir::DType::kUInt8;
    case at::kBool: return ir::DType::kBool;
    default: return ir::DType::kFloat32;
  }
}

std::vector<int64_t> vec(const ir::Shape& s) { return {s.begin(), s.end()}; }
}  // namespace

at::Tensor to_aten(const ir::Tensor& t, bool promote_double) {
  // Weights are immutable and outlive the run, so ATen may read them in place.
  auto x = at::from_blob(const_cast<std::byte*>(t.raw()), vec(t.shape()), at::TensorOptions().dtype(to_scalar_type(t.dtype())));
  if (promote_double && (t.dtype() == ir::DType::kFloat32 || ir::is_half(t.dtype()))) return x.to(at::kDouble);
  if (ir::is_half(t.dtype())) return x.to(at::kFloat);  // half values are computed in float32
  return x;
}

at::Tensor round_to(const at::Tensor& x, ir::DType stored) {
  if (!ir::is_half(stored) || !at::isFloatingType(x.scalar_type())) return x;
  return x.to(to_scalar_type(stored)).to(x.scalar_type());
}

ir::TensorPtr from_aten(const at::Tensor& t) {
  auto c = t.contiguous();
  ir::TensorType type{from_scalar_type(c.scalar_type()), ir::Shape(c.sizes().begin(), c.sizes().end())};
  std::vector<std::byte> bytes(static_cast<size_t>(c.numel()) * c.element_size());
  if (!bytes.empty()) std::memcpy(bytes.data(), c.data_ptr(), bytes.size());
  return std::make_shared<const ir::Tensor>(std::move(type), std::move(bytes));
}

namespace {

Error unsupported(const ir::Node& n, const std::string& why) {
  return Error::unsupported("reference executor: " + std::string(ir::op_name(n.kind)) + ": " + why);
}

at::Tensor activation(at::Tensor x, ir::Activation a) {
  switch (a) {
    case ir::Activation::kNone: return x;
    case ir::Activation::kRelu: return at::relu(x);
    case ir::Activation::kSigmoid: return at::sigmoid(x);
    case ir::Activation::kTanh: return at::tanh(x);
  }
  return x;
}

// ATen pads take (last dim begin, last dim end, second-to-last begin, ...).
std::vector<int64_t> aten_pads(const std::vector<int64_t>& onnx_pads, size_t rank, size_t first_dim) {
  const size_t n = rank - first_dim;
  std::vector<int64_t> p;
  for (size_t i = n; i-- > 0;) {
    p.push_back(onnx_pads[i]);
    p.push_back(onnx_pads[n + i]);
  }
  return p;
}

at::Tensor pool(const ir::Node& n, const at::Tensor& x) {
  // ATen pools floating tensors only; integer MaxPool (int8/uint8 in ONNX) goes through float64,
  // which holds those values exactly, and -inf padding then needs no integer stand-in.
  if (!at::isFloatingType(x.scalar_type())) return pool(n, x.to(at::kDouble)).to(x.scalar_type());
  const auto& p = std::get<ir::PoolParams>(n.params);
  const size_t nsp = p.kernel.size();
  const bool is_max = n.kind == OpKind::kMaxPool;
  // ATen supports 2-D/3-D pooling; 1-D is lifted to 2-D.
  at::Tensor in = x;
  std::vector<int64_t> k = p.kernel, s = p.strides, pads = p.pads;
  if (nsp == 1) {
    in = in.unsqueeze(-1);
    k.push_back(1);
    s.push_back(1);
    pads = {pads[0], 0, pads[1], 0};
  }
  const size_t sp = k.size();
  auto pad_vec = aten_pads(pads, static_cast<size_t>(in.dim()), 2);
  // Max pooling pads with -inf, so padding never wins.
  at::Tensor xp = at::constant_pad_nd(in, pad_vec, is_max ? -std::numeric_limits<double>::infinity() : 0.0);
  at::Tensor out;
  if (is_max) {
    out = sp == 2 ? at::max_pool2d(xp, k, s, {0, 0}, {1, 1}, p.ceil_mode) : at::max_pool3d(xp, k, s, {0, 0, 0}, {1, 1, 1}, p.ceil_mode);
  } else {
    auto sum = [&](const at::Tensor& t) {
      return sp == 2 ? at::avg_pool2d(t, k, s, {0, 0}, p.ceil_mode, true, 1)
                     : at::avg_pool3d(t, k, s, {0, 0, 0}, p.ceil_mode, true, 1);
    };
    // Divisor per window, as onnx 1.19's reference and onnxruntime 1.32 define it: with
    // count_include_pad the input and its explicit pads (a ceil_mode window's overhang beyond them
    // does not count; ATen's windows stop at the padded tensor's edge), else the input alone.
    if (p.count_include_pad) {
      at::Tensor ones = at::ones_like(in.select(0, 0).select(0, 0)).unsqueeze(0).unsqueeze(0);
      out = sum(xp) / sum(at::constant_pad_nd(ones, pad_vec, 1.0));
    } else {
      at::Tensor ones = at::ones_like(in.select(0, 0).select(0, 0)).unsqueeze(0).unsqueeze(0);
      out = sum(xp) / sum(at::constant_pad_nd(ones, pad_vec, 0.0));
    }
  }
  // Crop to the ONNX output extent (ATen's ceil_mode may allow one more window).
  const auto& want = n.outputs[0].shape;
  for (size_t d = 0; d < nsp; ++d) out = out.narrow(static_cast<int64_t>(2 + d), 0, want[2 + d]);
  if (nsp == 1) out = out.squeeze(-1);
  return out;
}

}  // namespace

Expected<std::vector<at::Tensor>> run_op(const ir::Node& n, const std::vector<at::Tensor>& in, bool promote) {
  auto one = [](at::Tensor t) { return std::vector<at::Tensor>{std::move(t)}; };
  const auto out_shape = n.outputs.empty() ? std::vector<int64_t>{} : vec(n.outputs[0].shape);
  switch (n.kind) {
    case OpKind::kConstant: return one(to_aten(*ir::materialize_constant(std::get<ir::ConstantParams>(n.params)), promote).clone());
    case OpKind::kConv: {
      const auto& p = std::get<ir::ConvParams>(n.params);
      const size_t nsp = p.strides.size();
      std::vector<int64_t> sym(nsp, 0);
      bool symmetric = true;
      for (size_t i = 0; i < nsp; ++i) symmetric = symmetric && p.pads[i] == p.pads[nsp + i];
      at::Tensor x = in[0];
      if (symmetric) {
        for (size_t i = 0; i < nsp; ++i) sym[i] = p.pads[i];
      } else {
        x = at::constant_pad_nd(x, aten_pads(p.pads, static_cast<size_t>(x.dim()), 2), 0.0);
      }
      c10::optional<at::Tensor> bias;
      if (in.size() > 2) bias = in[2];
      auto y = at::convolution(x, in[1], bias, p.strides, sym, p.dilations, false, std::vector<int64_t>(nsp, 0), p.group);
      return one(activation(y, p.act));
    }
    case OpKind::kMatMul: return one(at::matmul(in[0], in[1]));
    case OpKind::kGemm: {
      const auto& p = std::get<ir::GemmParams>(n.params);
      at::Tensor a = p.trans_a ? in[0].t() : in[0];
      at::Tensor b = p.trans_b ? in[1].t() : in[1];
      at::Tensor y = at::matmul(a, b);
      if (p.alpha != 1.0) y = y * p.alpha;
      if (in.size() > 2) y = y + (p.beta != 1.0 ? in[2] * p.beta : in[2]);
      return one(y);
    }
    case OpKind::kAdd: return one(at::add(in[0], in[1]));
    case OpKind::kSub: return one(at::sub(in[0], in[1]));
    case OpKind::kMul: return one(at::mul(in[0], in[1]));
    case OpKind::kDiv:
      if (!at::isFloatingType(in[0].scalar_type())) return one(at::div(in[0], in[1], "trunc"));
      return one(at::div(in[0], in[1]));
    case OpKind::kPow: return one(at::pow(in[0], in[1].to(in[0].scalar_type())));
    case OpKind::kSqrt: return one(at::sqrt(in[0]));
    case OpKind::kRelu: return one(at::relu(in[0]));
    case OpKind::kSigmoid: return one(at::sigmoid(in[0]));
    case OpKind::kTanh: return one(at::tanh(in[0]));
    case OpKind::kErf: return one(at::erf(in[0]));
    case OpKind::kGelu: return one(at::gelu(in[0], std::get<ir::GeluParams>(n.params).tanh ? "tanh" : "none"));
    case OpKind::kHardSigmoid: {
      const auto& p = std::get<ir::HardSigmoidParams>(n.params);
      return one(at::clamp(in[0] * p.alpha + p.beta, 0.0, 1.0));
    }
    case OpKind::kHardSwish: return one(in[0] * at::clamp(in[0] / 6.0 + 0.5, 0.0, 1.0));
    case OpKind::kClip: {
      const auto& p = std::get<ir::ClipParams>(n.params);
      c10::optional<at::Scalar> lo, hi;
      if (std::isfinite(p.min)) lo = p.min;
      if (std::isfinite(p.max)) hi = p.max;
      if (!lo && !hi) return one(in[0].clone());
      return one(at::clamp(in[0], lo, hi).to(in[0].scalar_type()));  // clamp promotes integers
    }
    case OpKind::kScalarMul: return one(in[0] * std::get<ir::ScalarParams>(n.params).value);
    case OpKind::kCast: {
      auto to = std::get<ir::CastParams>(n.params).to;
      if (promote && to == ir::DType::kFloat32) to = ir::DType::kFloat64;
      // A cast to a half type computes in the wide type; the executor rounds every half output.
      if (ir::is_half(to)) to = promote ? ir::DType::kFloat64 : ir::DType::kFloat32;
      return one(in[0].to(to_scalar_type(to)));
    }
    case OpKind::kSoftmax: return one(at::softmax(in[0], std::get<ir::AxisParams>(n.params).axis));
    case OpKind::kLayerNorm: {
      const auto& p = std::get<ir::NormParams>(n.params);
      std::vector<int64_t> norm(in[0].sizes().begin() + p.axis, in[0].sizes().end());
      // Scale and bias may be broadcastable rather than full-shaped.
      at::Tensor y = at::layer_norm(in[0], norm, c10::nullopt, c10::nullopt, p.epsilon);
      y = y * in[1];
      if (in.size() > 2) y = y + in[2];
      return one(y);
    }
    case OpKind::kRMSNorm: {
      const auto& p = std::get<ir::NormParams>(n.params);
      std::vector<int64_t> dims;
      for (int64_t d = p.axis; d < in[0].dim(); ++d) dims.push_back(d);
      return one(in[0] * at::rsqrt(in[0].square().mean(dims, true) + p.epsilon) * in[1]);
    }
    case OpKind::kRotaryEmbedding: {
      const auto& p = std::get<ir::RotaryParams>(n.params);
      const at::Tensor& x = in[0];
      // Worked in (B, S, H, D), the layout the ONNX definition states the rotation in.
      const at::Tensor x4 = x.dim() == 4 ? x.transpose(1, 2) : x.reshape({x.size(0), x.size(1), p.num_heads, -1});
      const int64_t rot = p.rotary_embedding_dim == 0 ? x4.size(3) : p.rotary_embedding_dim, half = rot / 2;
      at::Tensor cos = in[1], sin = in[2];
      if (in.size() > 3) {
        const auto flat = in[3].reshape({-1});
        cos = cos.index_select(0, flat).reshape({x4.size(0), x4.size(1), half});
        sin = sin.index_select(0, flat).reshape({x4.size(0), x4.size(1), half});
      }
      cos = cos.unsqueeze(2);
      sin = sin.unsqueeze(2);
      const at::Tensor xr = x4.narrow(3, 0, rot);
      const at::Tensor x1 = p.interleaved ? xr.slice(3, 0, rot, 2) : xr.narrow(3, 0, half);
      const at::Tensor x2 = p.interleaved ? xr.slice(3, 1, rot, 2) : xr.narrow(3, half, half);
      const at::Tensor re = cos * x1 - sin * x2, im = sin * x1 + cos * x2;
      at::Tensor y = p.interleaved ? at::stack({re, im}, -1).reshape(xr.sizes()) : at::cat({re, im}, -1);
      if (rot < x4.size(3)) y = at::cat({y, x4.narrow(3, rot, x4.size(3) - rot)}, -1);
      return one(x.dim() == 4 ? y.transpose(1, 2).contiguous() : y.reshape(x.sizes()));
    }
    case OpKind::kAttention: {
      const auto& p = std::get<ir::AttentionParams>(n.params);
      at::Tensor q = in[0], k = in[1], v = in[2];
      const bool flat = q.dim() == 3;  // (B, S, H*E): worked in (B, H, S, E)
      const int64_t batch = q.size(0);
      if (flat) {
        q = q.reshape({batch, q.size(1), p.q_num_heads, -1}).transpose(1, 2);
        k = k.reshape({batch, k.size(1), p.kv_num_heads, -1}).transpose(1, 2);
        v = v.reshape({batch, v.size(1), p.kv_num_heads, -1}).transpose(1, 2);
      }
      // Half types are computed in float32 (the CPU softmax of older libtorch has no half kernel).
      const auto type = q.scalar_type();
      const bool low = type == at::kHalf || type == at::kBFloat16;
      if (low) q = q.to(at::kFloat), k = k.to(at::kFloat), v = v.to(at::kFloat);
      const int64_t hq = q.size(1), hkv = k.size(1), seq = q.size(2), len = k.size(2);
      // GQA: query head h reads key/value head h / (hq / hkv), each kv head repeated in place.
      if (hq != hkv) k = k.repeat_interleave(hq / hkv, 1), v = v.repeat_interleave(hq / hkv, 1);
      const double scale = p.scale != 0.0 ? p.scale : 1.0 / std::sqrt(static_cast<double>(q.size(3)));
      at::Tensor s = at::matmul(q, k.transpose(-2, -1)) * scale;
      const double inf = std::numeric_limits<double>::infinity();
      if (in.size() > 3) {
        const at::Tensor& m = in[3];
        s = m.scalar_type() == at::kBool ? s.masked_fill(m.logical_not(), -inf) : s + m.to(s.scalar_type());
      }
      // Causal, aligned to the upper left: query i sees keys 0..i.
      if (p.is_causal) s = s.masked_fill(at::ones({seq, len}, at::TensorOptions().dtype(at::kBool)).triu(1), -inf);
      at::Tensor y = at::matmul(at::softmax(s, -1), v);
      if (low) y = y.to(type);
      if (flat) y = y.transpose(1, 2).reshape({batch, seq, -1});
      return one(y.contiguous());
    }
    case OpKind::kBatchNorm: {
      const auto& p = std::get<ir::NormParams>(n.params);
      return one(at::batch_norm(in[0], in[1], in[2], in[3], in[4], false, 0.0, p.epsilon, false));
    }
    case OpKind::kReduceMean: {
      const auto& p = std::get<ir::AxesParams>(n.params);
      return one(at::mean(in[0], p.axes, p.keepdims));
    }
    case OpKind::kMaxPool:
    case OpKind::kAveragePool: return one(pool(n, in[0]));
    case OpKind::kGlobalAveragePool: {
      std::vector<int64_t> dims;
      for (int64_t d = 2; d < in[0].dim(); ++d) dims.push_back(d);
      return one(at::mean(in[0], dims, true));
    }
    case OpKind::kConcat: return one(at::cat(in, std::get<ir::AxisParams>(n.params).axis));
    case OpKind::kSplit: {
      const auto& p = std::get<ir::SplitParams>(n.params);
      auto parts = at::split_with_sizes(in[0], p.sizes, p.axis);
      std::vector<at::Tensor> out;
      for (auto& t : parts) out.push_back(t.contiguous());
      return out;
    }
    case OpKind::kTranspose: return one(in[0].permute(std::get<ir::TransposeParams>(n.params).perm).contiguous());
    case OpKind::kReshape:
    case OpKind::kFlatten:
    case OpKind::kSqueeze:
    case OpKind::kUnsqueeze: return one(in[0].reshape(out_shape));
    case OpKind::kPad: {
      const auto& p = std::get<ir::PadParams>(n.params);
      if (p.mode == ir::PadMode::kConstant)
        return one(at::constant_pad_nd(in[0], aten_pads(p.pads, static_cast<size_t>(in[0].dim()), 0), p.value));
      return one(index_pad(in[0], p.pads, p.mode == ir::PadMode::kEdge ? "edge" : "reflect"));
    }
    case OpKind::kSlice: {
      const auto& p = std::get<ir::SliceParams>(n.params);
      at::Tensor y = in[0];
      for (size_t k = 0; k < p.axes.size(); ++k) {
        const int64_t len = n.outputs[0].shape[static_cast<size_t>(p.axes[k])];
        auto idx = at::arange(p.starts[k], p.starts[k] + len * p.steps[k], p.steps[k], at::kLong).narrow(0, 0, len);
        y = y.index_select(p.axes[k], idx);
      }
      return one(y);
    }
    case OpKind::kGather: {
      const int64_t axis = std::get<ir::AxisParams>(n.params).axis;
      const int64_t dim = in[0].size(axis);
      at::Tensor idx = in[1].to(at::kLong).flatten();
      idx = at::where(idx < 0, idx + dim, idx);
      if (idx.numel() > 0 && (idx.min().item<int64_t>() < 0 || idx.max().item<int64_t>() >= dim))
        return Error::bad_input("Gather: index out of range");
      return one(in[0].index_select(axis, idx).reshape(out_shape));
    }
    case OpKind::kEnlarge: {
      const auto& k = std::get<ir::EnlargeParams>(n.params).kernel;
      const size_t r = static_cast<size_t>(in[0].dim());
      std::vector<int64_t> pads(2 * r, 0);
      for (size_t i = 0; i < k.size(); ++i) {
        pads[2 + i] = (k[i] - in[0].size(static_cast<int64_t>(2 + i))) / 2;
        pads[r + 2 + i] = pads[2 + i];
      }
      return one(at::constant_pad_nd(in[0], aten_pads(pads, r, 0), 0.0));
    }
    case OpKind::kInput:
    case OpKind::kWeight: return unsupported(n, "source nodes are not evaluated");
    case OpKind::kOpaque: return run_onnx_op(n, in);
    default:
      if (const auto& info = ir::op_info(n.kind); info.plain) {  // the ONNX op table's kernel for the op's ONNX type
        ir::Node as_onnx = n;
        ir::OpaqueParams p;
        p.domain = std::string(info.onnx_domain);
        p.op_type = std::string(info.onnx_type);
        p.since_version = info.since;
        for (size_t k = 0; k < n.inputs.size(); ++k) p.input_slots.push_back(static_cast<int64_t>(k));  // optional ones trail
        for (size_t k = 0; k < n.outputs.size(); ++k) p.output_slots.push_back(static_cast<int64_t>(k));
        p.attrs = std::make_shared<const ir::Attributes>(ir::plain_attributes(n.params));
        as_onnx.params = std::move(p);
        return run_onnx_op(as_onnx, in);
      }
      break;
  }
  return unsupported(n, "no kernel");
}

}  // namespace rlflow::exec::detail
