#include "rlflow/ir/shape_inference.h"
#include "rlflow/ir/op_def.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <string>

namespace rlflow::ir {

namespace {

Error fail(OpKind k, const std::string& why) { return Error::bad_input(std::string(op_name(k)) + ": " + why); }

std::string types_str(const std::vector<TensorType>& in) {
  std::string s;
  for (size_t i = 0; i < in.size(); ++i) s += (i ? ", " : "") + in[i].str();
  return s;
}

Expected<std::vector<TensorType>> one(TensorType t) { return std::vector<TensorType>{std::move(t)}; }

// Output extent of a sliding window (conv, pool).
int64_t window_out(int64_t in, int64_t k, int64_t stride, int64_t pb, int64_t pe, int64_t dil, bool ceil_mode) {
  const int64_t span = in + pb + pe - dil * (k - 1) - 1;
  // With ceil_mode a window may overhang the whole (padded) input, as onnxruntime computes it
  // (an EfficientNet pooler's 7x7 window over a smaller map): ceil of a negative span rounds up.
  if (span < 0 && !ceil_mode) return 0;
  int64_t out = (ceil_mode ? (span >= 0 ? (span + stride - 1) / stride : -((-span) / stride)) : span / stride) + 1;
  // ONNX: with ceil_mode the last window must start inside the (begin-padded) input.
  if (ceil_mode && (out - 1) * stride >= in + pb) --out;
  return out;
}

Status check_spatial(OpKind k, size_t nsp, const std::vector<int64_t>& strides, const std::vector<int64_t>& pads,
                     const std::vector<int64_t>* dil) {
  if (strides.size() != nsp) return fail(k, "expected " + std::to_string(nsp) + " strides");
  if (pads.size() != 2 * nsp) return fail(k, "expected " + std::to_string(2 * nsp) + " pads");
  if (dil && dil->size() != nsp) return fail(k, "expected " + std::to_string(nsp) + " dilations");
  for (auto s : strides)
    if (s <= 0) return fail(k, "strides must be positive");
  for (auto p : pads)
    if (p < 0) return fail(k, "pads must be non-negative");
  if (dil)
    for (auto d : *dil)
      if (d <= 0) return fail(k, "dilations must be positive");
  return {};
}

Expected<std::vector<TensorType>> infer_conv(const ConvParams& p, const std::vector<TensorType>& in) {
  const auto k = OpKind::kConv;
  if (in.size() != 2 && in.size() != 3) return fail(k, "expects 2 or 3 inputs");
  const auto& x = in[0].shape;
  const auto& w = in[1].shape;
  if (x.size() < 3 || w.size() != x.size()) return fail(k, "input and weight ranks disagree: " + types_str(in));
  for (const auto& t : in)
    if (t.dtype != in[0].dtype) return fail(k, "dtypes differ: " + types_str(in));
  const size_t nsp = x.size() - 2;
  RLFLOW_TRY_STATUS(check_spatial(k, nsp, p.strides, p.pads, &p.dilations));
  if (p.group <= 0 || x[1] % p.group != 0 || w[0] % p.group != 0) return fail(k, "group does not divide channels");
  if (w[1] * p.group != x[1])
    return fail(k, "weight expects " + std::to_string(w[1] * p.group) + " input channels, got " + std::to_string(x[1]));
  if (in.size() == 3 && !(in[2].shape.size() == 1 && in[2].shape[0] == w[0]))
    return fail(k, "bias must have shape [" + std::to_string(w[0]) + "]");
  Shape out{x[0], w[0]};
  for (size_t i = 0; i < nsp; ++i) {
    int64_t o = window_out(x[2 + i], w[2 + i], p.strides[i], p.pads[i], p.pads[nsp + i], p.dilations[i], false);
    if (o <= 0) return fail(k, "kernel larger than padded input: " + types_str(in));
    out.push_back(o);
  }
  return one({in[0].dtype, out});
}

Expected<std::vector<TensorType>> infer_pool(OpKind k, const PoolParams& p, const std::vector<TensorType>& in) {
  if (in.size() != 1) return fail(k, "expects 1 input");
  const auto& x = in[0].shape;
  if (x.size() < 3) return fail(k, "expects rank >= 3");
  const size_t nsp = x.size() - 2;
  if (p.kernel.size() != nsp) return fail(k, "kernel rank mismatch");
  RLFLOW_TRY_STATUS(check_spatial(k, nsp, p.strides, p.pads, nullptr));
  Shape out{x[0], x[1]};
  for (size_t i = 0; i < nsp; ++i) {
    if (p.pads[i] >= p.kernel[i] || p.pads[nsp + i] >= p.kernel[i]) return fail(k, "pad must be smaller than kernel");
    int64_t o = window_out(x[2 + i], p.kernel[i], p.strides[i], p.pads[i], p.pads[nsp + i], 1, p.ceil_mode);
    if (o <= 0) return fail(k, "kernel larger than padded input");
    out.push_back(o);
  }
  return one({in[0].dtype, out});
}

Expected<std::vector<TensorType>> infer_matmul(const std::vector<TensorType>& in) {
  const auto k = OpKind::kMatMul;
  if (in.size() != 2) return fail(k, "expects 2 inputs");
  Shape a = in[0].shape, b = in[1].shape;
  if (a.empty() || b.empty()) return fail(k, "scalars are not allowed");
  const bool a1 = a.size() == 1, b1 = b.size() == 1;
  if (a1) a.insert(a.begin(), 1);
  if (b1) b.push_back(1);
  if (a.back() != b[b.size() - 2]) return fail(k, "inner dimensions differ: " + types_str(in));
  Shape ba(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  auto batch = broadcast_shapes(ba, bb);
  if (!batch) return fail(k, "batch dimensions do not broadcast: " + types_str(in));
  Shape out = *batch;
  if (!a1) out.push_back(a[a.size() - 2]);
  if (!b1) out.push_back(b.back());
  if (in[0].dtype != in[1].dtype) return fail(k, "dtypes differ");
  return one({in[0].dtype, out});
}

Expected<std::vector<TensorType>> infer_gemm(const GemmParams& p, const std::vector<TensorType>& in) {
  const auto k = OpKind::kGemm;
  if (in.size() != 2 && in.size() != 3) return fail(k, "expects 2 or 3 inputs");
  if (in[0].rank() != 2 || in[1].rank() != 2) return fail(k, "A and B must be matrices");
  int64_t m = p.trans_a ? in[0].shape[1] : in[0].shape[0];
  int64_t ka = p.trans_a ? in[0].shape[0] : in[0].shape[1];
  int64_t kb = p.trans_b ? in[1].shape[1] : in[1].shape[0];
  int64_t n = p.trans_b ? in[1].shape[0] : in[1].shape[1];
  if (ka != kb) return fail(k, "inner dimensions differ: " + types_str(in));
  Shape out{m, n};
  if (in.size() == 3) {
    auto bc = broadcast_shapes(in[2].shape, out);
    if (!bc || *bc != out) return fail(k, "C does not broadcast to [M, N]");
  }
  return one({in[0].dtype, out});
}

Expected<std::vector<TensorType>> infer_binary(OpKind k, const std::vector<TensorType>& in) {
  if (in.size() != 2) return fail(k, "expects 2 inputs");
  if (k != OpKind::kPow && in[0].dtype != in[1].dtype) return fail(k, "dtypes differ: " + types_str(in));
  auto s = broadcast_shapes(in[0].shape, in[1].shape);
  if (!s) return fail(k, "shapes do not broadcast: " + types_str(in));
  return one({in[0].dtype, *s});
}

Expected<std::vector<TensorType>> infer_slice(const SliceParams& p, const TensorType& x) {
  const auto k = OpKind::kSlice;
  const size_t n = p.axes.size();
  if (p.starts.size() != n || p.ends.size() != n || p.steps.size() != n) return fail(k, "parameter lengths differ");
  Shape out = x.shape;
  for (size_t i = 0; i < n; ++i) {
    auto ax = normalize_axis(p.axes[i], x.rank());
    if (!ax) return fail(k, ax.error().message);
    const int64_t dim = x.shape[*ax];
    const int64_t step = p.steps[i];
    if (step == 0) return fail(k, "step must not be zero");
    auto clampi = [](int64_t v, int64_t lo, int64_t hi) { return std::max(lo, std::min(v, hi)); };
    int64_t s = p.starts[i];  // normalised: absolute positions (end may be -1 for negative steps)
    int64_t e = p.ends[i];
    int64_t len;
    if (step > 0) {
      s = clampi(s, 0, dim);
      e = clampi(e, 0, dim);
      len = e > s ? (e - s + step - 1) / step : 0;
    } else {
      s = clampi(s, -1, dim - 1);
      e = clampi(e, -1, dim - 1);
      len = s > e ? (s - e + (-step) - 1) / (-step) : 0;
    }
    out[*ax] = len;
  }
  return one({x.dtype, out});
}

}  // namespace

SliceBounds onnx_slice_bounds(int64_t start, int64_t end, int64_t step, int64_t dim) {
  if (dim <= 0) return {};
  if (start < 0) start += dim;
  start = step < 0 ? std::clamp<int64_t>(start, 0, dim - 1) : std::clamp<int64_t>(start, 0, dim);
  if (end == std::numeric_limits<int32_t>::max() || end == std::numeric_limits<int64_t>::max()) {
    end = step < 0 ? -1 : dim;
  } else {
    if (end < 0) end = end < -dim ? -dim - 1 : end + dim;  // (no overflow at INT64_MIN)
    end = std::clamp<int64_t>(end, step < 0 ? -1 : 0, dim);
  }
  int64_t len = 0;
  if (step > 0 && end > start) len = (end - start - 1) / step + 1;
  if (step < 0 && start > end) len = (start - end - 1) / (step == std::numeric_limits<int64_t>::min() ? dim : -step) + 1;
  return {start, end, len};
}

Expected<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      return Error::bad_input("shapes " + shape_str(a) + " and " + shape_str(b) + " do not broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Expected<int64_t> normalize_axis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1))
    return Error::bad_input("axis " + std::to_string(axis) + " out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

int num_outputs(OpKind kind, const OpParams& params) {
  if (const OpDef* def = op_info(kind).def) return def->outputs;
  if (kind == OpKind::kSplit) return static_cast<int>(std::get<SplitParams>(params).sizes.size());
  return 1;
}

Expected<std::vector<TensorType>> infer_types(OpKind k, const OpParams& params, const std::vector<TensorType>& in) {
  auto need = [&](size_t n) -> Status {
    if (in.size() != n) return fail(k, "expects " + std::to_string(n) + " inputs, got " + std::to_string(in.size()));
    return {};
  };
  auto get = [&](auto tag) -> const decltype(tag)* { return std::get_if<decltype(tag)>(&params); };
  if (is_elementwise_binary(k)) return infer_binary(k, in);
  if (const OpInfo& info = op_info(k); info.plain) {  // the row and the op's record say it all
    const Arity a = plain_arity(k);
    if (in.size() < static_cast<size_t>(a.min) || in.size() > static_cast<size_t>(a.max))
      return fail(k, "expects " + (a.min == a.max ? std::to_string(a.min) : std::to_string(a.min) + " to " + std::to_string(a.max)) +
                         " inputs, got " + std::to_string(in.size()));
    if (params.index() != info.params) return fail(k, "missing parameters");
    if (info.def && info.def->infer) return info.def->infer(params, in);
    if (info.form == OpForm::kElementwiseUnary) return one(in[0]);
  }
  switch (k) {
    case OpKind::kInput:
    case OpKind::kWeight:
      return fail(k, "source nodes carry their own type");
    case OpKind::kConstant: {
      auto* p = get(ConstantParams{});
      if (!p) return fail(k, "missing parameters");
      return one({p->dtype, p->shape});
    }
    case OpKind::kOpaque:
      return fail(k, "opaque op types come from the model, not from inference");
    case OpKind::kConv: {
      auto* p = get(ConvParams{});
      if (!p) return fail(k, "missing parameters");
      return infer_conv(*p, in);
    }
    case OpKind::kMaxPool:
    case OpKind::kAveragePool: {
      auto* p = get(PoolParams{});
      if (!p) return fail(k, "missing parameters");
      return infer_pool(k, *p, in);
    }
    case OpKind::kGlobalAveragePool: {
      RLFLOW_TRY_STATUS(need(1));
      if (in[0].rank() < 3) return fail(k, "expects rank >= 3");
      Shape out = in[0].shape;
      std::fill(out.begin() + 2, out.end(), 1);
      return one({in[0].dtype, out});
    }
    case OpKind::kMatMul: return infer_matmul(in);
    case OpKind::kGemm: {
      auto* p = get(GemmParams{});
      if (!p) return fail(k, "missing parameters");
      return infer_gemm(*p, in);
    }
    case OpKind::kRelu: case OpKind::kSigmoid: case OpKind::kTanh: case OpKind::kErf: case OpKind::kSqrt:
    case OpKind::kClip: case OpKind::kScalarMul: case OpKind::kGelu: case OpKind::kHardSigmoid: case OpKind::kHardSwish:
      RLFLOW_TRY_STATUS(need(1));
      return one(in[0]);
    case OpKind::kCast: {
      RLFLOW_TRY_STATUS(need(1));
      auto* p = get(CastParams{});
      if (!p) return fail(k, "missing parameters");
      return one({p->to, in[0].shape});
    }
    case OpKind::kSoftmax: {
      RLFLOW_TRY_STATUS(need(1));
      auto* p = get(AxisParams{});
      if (!p || p->axis < 0 || p->axis >= in[0].rank()) return fail(k, "bad axis");
      return one(in[0]);
    }
    case OpKind::kLayerNorm: {
      if (in.size() != 2 && in.size() != 3) return fail(k, "expects 2 or 3 inputs");
      auto* p = get(NormParams{});
      if (!p || p->axis < 0 || p->axis >= in[0].rank()) return fail(k, "bad axis");
      Shape norm(in[0].shape.begin() + p->axis, in[0].shape.end());
      for (size_t i = 1; i < in.size(); ++i) {
        auto b = broadcast_shapes(in[i].shape, norm);
        if (!b || *b != norm) return fail(k, "scale/bias do not match the normalised shape");
      }
      return one(in[0]);
    }
    case OpKind::kRMSNorm: {
      RLFLOW_TRY_STATUS(need(2));
      auto* p = get(NormParams{});
      if (!p || p->axis < 0 || p->axis >= in[0].rank()) return fail(k, "bad axis");
      const Shape norm(in[0].shape.begin() + p->axis, in[0].shape.end());
      auto b = broadcast_shapes(in[1].shape, norm);
      if (!b || *b != norm) return fail(k, "scale does not match the normalised shape");
      return one(in[0]);
    }
    case OpKind::kAttention: {
      auto* p = get(AttentionParams{});
      if (!p) return fail(k, "missing parameters");
      if (in.size() != 3 && in.size() != 4) return fail(k, "expects 3 or 4 inputs (Q, K, V[, attn_mask])");
      const TensorType &q = in[0], &kk = in[1], &v = in[2];
      if (!is_float(q.dtype) || kk.dtype != q.dtype || v.dtype != q.dtype) return fail(k, "Q, K and V must share one float type");
      const int64_t r = q.rank();
      if ((r != 3 && r != 4) || kk.rank() != r || v.rank() != r) return fail(k, "Q, K and V must all be 3-D or all 4-D: " + types_str(in));
      int64_t batch = q.shape[0], hq = 0, hkv = 0, seq = 0, len = 0, e = 0, ev = 0;
      if (r == 4) {  // (B, H, S, E)
        hq = q.shape[1], hkv = kk.shape[1], seq = q.shape[2], len = kk.shape[2], e = q.shape[3], ev = v.shape[3];
        if ((p->q_num_heads != 0 && p->q_num_heads != hq) || (p->kv_num_heads != 0 && p->kv_num_heads != hkv))
          return fail(k, "q_num_heads / kv_num_heads differ from the heads of Q / K");
        if (kk.shape[3] != e || v.shape[1] != hkv || v.shape[2] != len) return fail(k, "K and V do not match Q: " + types_str(in));
      } else {  // (B, S, H*E)
        hq = p->q_num_heads, hkv = p->kv_num_heads;
        if (hq <= 0 || hkv <= 0) return fail(k, "a 3-D Q needs q_num_heads and kv_num_heads");
        if (q.shape[2] % hq != 0 || kk.shape[2] % hkv != 0 || v.shape[2] % hkv != 0)
          return fail(k, "the heads do not divide the hidden sizes: " + types_str(in));
        seq = q.shape[1], len = kk.shape[1], e = q.shape[2] / hq, ev = v.shape[2] / hkv;
        if (kk.shape[2] / hkv != e || v.shape[1] != len) return fail(k, "K and V do not match Q: " + types_str(in));
      }
      if (kk.shape[0] != batch || v.shape[0] != batch) return fail(k, "Q, K and V differ in batch");
      if (hq <= 0 || hkv <= 0 || hq % hkv != 0) return fail(k, "Q's heads must be a multiple of K's and V's (GQA)");
      if (in.size() == 4) {
        const TensorType& m = in[3];
        if (m.dtype != DType::kBool && m.dtype != q.dtype) return fail(k, "attn_mask must be bool or Q's type");
        const Shape full{batch, hq, seq, len};
        auto b = broadcast_shapes(m.shape, full);
        if (m.rank() > 4 || !b || *b != full) return fail(k, "attn_mask does not broadcast to (B, Hq, S, L): " + types_str(in));
      }
      return one({q.dtype, r == 4 ? Shape{batch, hq, seq, ev} : Shape{batch, seq, hq * ev}});
    }
    case OpKind::kBatchNorm: {
      RLFLOW_TRY_STATUS(need(5));
      if (in[0].rank() < 2) return fail(k, "expects rank >= 2");
      for (size_t i = 1; i < 5; ++i)
        if (in[i].shape != Shape{in[0].shape[1]}) return fail(k, "parameters must have shape [C]: " + types_str(in));
      return one(in[0]);
    }
    case OpKind::kReduceMean: {
      RLFLOW_TRY_STATUS(need(1));
      auto* p = get(AxesParams{});
      if (!p) return fail(k, "missing parameters");
      Shape out;
      for (int64_t d = 0; d < in[0].rank(); ++d) {
        bool reduced = p->axes.empty() || std::find(p->axes.begin(), p->axes.end(), d) != p->axes.end();
        if (!reduced) out.push_back(in[0].shape[d]);
        else if (p->keepdims) out.push_back(1);
      }
      for (auto a : p->axes)
        if (a < 0 || a >= in[0].rank()) return fail(k, "axis out of range");
      return one({in[0].dtype, out});
    }
    case OpKind::kConcat: {
      auto* p = get(AxisParams{});
      if (in.empty() || !p) return fail(k, "expects inputs and an axis");
      const int64_t ax = p->axis;
      if (ax < 0 || ax >= in[0].rank()) return fail(k, "axis out of range");
      Shape out = in[0].shape;
      for (size_t i = 1; i < in.size(); ++i) {
        if (in[i].rank() != in[0].rank() || in[i].dtype != in[0].dtype) return fail(k, "inputs differ: " + types_str(in));
        for (int64_t d = 0; d < in[0].rank(); ++d)
          if (d != ax && in[i].shape[d] != out[d]) return fail(k, "inputs differ off the axis: " + types_str(in));
        out[ax] += in[i].shape[ax];
      }
      return one({in[0].dtype, out});
    }
    case OpKind::kSplit: {
      RLFLOW_TRY_STATUS(need(1));
      auto* p = get(SplitParams{});
      if (!p || p->axis < 0 || p->axis >= in[0].rank()) return fail(k, "bad axis");
      int64_t total = 0;
      std::vector<TensorType> outs;
      for (auto s : p->sizes) {
        if (s < 0) return fail(k, "negative split size");
        total += s;
        TensorType t = in[0];
        t.shape[p->axis] = s;
        outs.push_back(t);
      }
      if (total != in[0].shape[p->axis] || outs.empty()) return fail(k, "split sizes do not sum to the axis extent");
      return outs;
    }
    case OpKind::kTranspose: {
      RLFLOW_TRY_STATUS(need(1));
      auto* p = get(TransposeParams{});
      if (!p || static_cast<int64_t>(p->perm.size()) != in[0].rank()) return fail(k, "perm length must equal rank");
      std::vector<int64_t> sorted = p->perm;
      std::sort(sorted.begin(), sorted.end());
      for (size_t i = 0; i < sorted.size(); ++i)
        if (sorted[i] != static_cast<int64_t>(i)) return fail(k, "perm is not a permutation");
      Shape out;
      for (auto d : p->perm) out.push_back(in[0].shape[d]);
      return one({in[0].dtype, out});
    }
    case OpKind::kReshape: {
      RLFLOW_TRY_STATUS(need(1));
      auto* p = get(ReshapeParams{});
      if (!p) return fail(k, "missing parameters");
      for (auto d : p->shape)
        if (d < 0) return fail(k, "target shape must be resolved");
      if (numel(p->shape) != in[0].numel())
        return fail(k, "cannot reshape " + in[0].str() + " to " + shape_str(p->shape));
      return one({in[0].dtype, p->shape});
    }
    case OpKind::kFlatten: {
      RLFLOW_TRY_STATUS(need(1));
      auto* p = get(AxisParams{});
      if (!p || p->axis < 0 || p->axis > in[0].rank()) return fail(k, "bad axis");
      const auto& s = in[0].shape;
      int64_t a = std::accumulate(s.begin(), s.begin() + p->axis, int64_t{1}, std::multiplies<>());
      int64_t b = std::accumulate(s.begin() + p->axis, s.end(), int64_t{1}, std::multiplies<>());
      return one({in[0].dtype, {a, b}});
    }
    case OpKind::kPad: {
      RLFLOW_TRY_STATUS(need(1));
      auto* p = get(PadParams{});
      const int64_t r = in[0].rank();
      if (!p || static_cast<int64_t>(p->pads.size()) != 2 * r) return fail(k, "pads must have 2*rank entries");
      Shape out = in[0].shape;
      for (int64_t d = 0; d < r; ++d) {
        out[d] += p->pads[d] + p->pads[r + d];
        if (out[d] < 0) return fail(k, "negative output extent");
      }
      return one({in[0].dtype, out});
    }
    case OpKind::kSlice: {
      RLFLOW_TRY_STATUS(need(1));
      auto* p = get(SliceParams{});
      if (!p) return fail(k, "missing parameters");
      return infer_slice(*p, in[0]);
    }
    case OpKind::kGather: {
      RLFLOW_TRY_STATUS(need(2));
      auto* p = get(AxisParams{});
      if (!p || p->axis < 0 || p->axis >= in[0].rank()) return fail(k, "bad axis");
      if (in[1].dtype != DType::kInt64 && in[1].dtype != DType::kInt32) return fail(k, "indices must be int32/int64");
      Shape out(in[0].shape.begin(), in[0].shape.begin() + p->axis);
      out.insert(out.end(), in[1].shape.begin(), in[1].shape.end());
      out.insert(out.end(), in[0].shape.begin() + p->axis + 1, in[0].shape.end());
      return one({in[0].dtype, out});
    }
    case OpKind::kSqueeze: {
      RLFLOW_TRY_STATUS(need(1));
      auto* p = get(AxesParams{});
      if (!p) return fail(k, "missing parameters");
      for (auto a : p->axes)
        if (a < 0 || a >= in[0].rank()) return fail(k, "axis " + std::to_string(a) + " out of range");
      Shape out;
      for (int64_t d = 0; d < in[0].rank(); ++d) {
        bool sq = std::find(p->axes.begin(), p->axes.end(), d) != p->axes.end();
        if (sq && in[0].shape[d] != 1) return fail(k, "cannot squeeze a dimension of extent " + std::to_string(in[0].shape[d]));
        if (!sq) out.push_back(in[0].shape[d]);
      }
      return one({in[0].dtype, out});
    }
    case OpKind::kUnsqueeze: {
      RLFLOW_TRY_STATUS(need(1));
      auto* p = get(AxesParams{});
      if (!p) return fail(k, "missing parameters");
      const int64_t r = in[0].rank() + static_cast<int64_t>(p->axes.size());
      Shape out;
      size_t src = 0;
      for (int64_t d = 0; d < r; ++d) {
        if (std::find(p->axes.begin(), p->axes.end(), d) != p->axes.end()) out.push_back(1);
        else if (src < in[0].shape.size()) out.push_back(in[0].shape[src++]);
        else return fail(k, "axis out of range");
      }
      return one({in[0].dtype, out});
    }
    case OpKind::kEnlarge: {
      RLFLOW_TRY_STATUS(need(1));
      auto* p = get(EnlargeParams{});
      if (!p || in[0].rank() != 2 + static_cast<int64_t>(p->kernel.size())) return fail(k, "kernel rank mismatch");
      Shape out = in[0].shape;
      for (size_t i = 0; i < p->kernel.size(); ++i) {
        if (p->kernel[i] < out[2 + i] || (p->kernel[i] - out[2 + i]) % 2 != 0)
          return fail(k, "can only enlarge by an even amount");
        out[2 + i] = p->kernel[i];
      }
      return one({in[0].dtype, out});
    }
    default:  // elementwise binary and plain ops: handled above from the op table
      break;
  }
  return fail(k, "no shape inference rule");
}

}  // namespace rlflow::ir
