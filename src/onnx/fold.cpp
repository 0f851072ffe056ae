#include "fold.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "proto_io.h"
#include "rlflow/ir/evaluator.h"
#include "rlflow/ir/shape_inference.h"

namespace rlflow::onnxio {

using ir::DType;
using ir::Shape;
using ir::Tensor;
using ir::TensorPtr;
using ir::TensorType;

namespace {

using Result = Expected<std::optional<std::vector<TensorPtr>>>;

Result single(TensorPtr t) { return std::optional<std::vector<TensorPtr>>(std::vector<TensorPtr>{std::move(t)}); }
Result not_handled() { return std::optional<std::vector<TensorPtr>>(); }

std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

// Calls f(out_linear, index) for every element of `shape` in row-major order.
void for_each_index(const Shape& shape, const std::function<void(int64_t, const std::vector<int64_t>&)>& f) {
  const int64_t n = ir::numel(shape);
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t lin = 0; lin < n; ++lin) {
    f(lin, idx);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}

// Copies elements: out[i] = in[src(i)], byte-wise, whatever the dtype.
TensorPtr gather_bytes(const Tensor& in, const Shape& out_shape, const std::function<int64_t(const std::vector<int64_t>&)>& src) {
  const size_t es = ir::dtype_size(in.dtype());
  std::vector<std::byte> out(static_cast<size_t>(ir::numel(out_shape)) * es);
  for_each_index(out_shape, [&](int64_t lin, const std::vector<int64_t>& idx) {
    std::memcpy(out.data() + static_cast<size_t>(lin) * es, in.raw() + static_cast<size_t>(src(idx)) * es, es);
  });
  return std::make_shared<const Tensor>(TensorType{in.dtype(), out_shape}, std::move(out));
}

TensorPtr with_shape(const Tensor& t, Shape s) {
  std::vector<std::byte> b(t.raw(), t.raw() + t.nbytes());
  return std::make_shared<const Tensor>(TensorType{t.dtype(), std::move(s)}, std::move(b));
}

// Numbers stored exactly: int64 for integer dtypes, double for floats.
struct Num {
  bool is_int;
  std::vector<int64_t> i;
  std::vector<double> f;
};

Num to_num(const Tensor& t) {
  if (ir::is_float(t.dtype())) return {false, {}, t.as_double()};
  return {true, t.as_int64(), {}};
}

TensorPtr from_num(const Num& n, DType dt, const Shape& shape) {
  const size_t cnt = n.is_int ? n.i.size() : n.f.size();
  auto val = [&](size_t k) { return n.is_int ? static_cast<double>(n.i[k]) : n.f[k]; };
  auto ival = [&](size_t k) { return n.is_int ? n.i[k] : static_cast<int64_t>(n.f[k]); };
  switch (dt) {
    case DType::kFloat32: {  // (an integer converts once: through double it could round twice)
      std::vector<float> v(cnt);
      for (size_t k = 0; k < cnt; ++k) v[k] = n.is_int ? static_cast<float>(n.i[k]) : static_cast<float>(n.f[k]);
      return Tensor::from_vector(dt, shape, v);
    }
    case DType::kFloat64: { std::vector<double> v(cnt); for (size_t k = 0; k < cnt; ++k) v[k] = val(k); return Tensor::from_vector(dt, shape, v); }
    case DType::kInt64: { std::vector<int64_t> v(cnt); for (size_t k = 0; k < cnt; ++k) v[k] = ival(k); return Tensor::from_vector(dt, shape, v); }
    case DType::kInt32: { std::vector<int32_t> v(cnt); for (size_t k = 0; k < cnt; ++k) v[k] = static_cast<int32_t>(ival(k)); return Tensor::from_vector(dt, shape, v); }
    case DType::kInt8: { std::vector<int8_t> v(cnt); for (size_t k = 0; k < cnt; ++k) v[k] = static_cast<int8_t>(ival(k)); return Tensor::from_vector(dt, shape, v); }
    case DType::kUInt8: { std::vector<uint8_t> v(cnt); for (size_t k = 0; k < cnt; ++k) v[k] = static_cast<uint8_t>(ival(k)); return Tensor::from_vector(dt, shape, v); }
    case DType::kBool: { std::vector<uint8_t> v(cnt); for (size_t k = 0; k < cnt; ++k) v[k] = n.is_int ? n.i[k] != 0 : n.f[k] != 0.0; return Tensor::from_vector(dt, shape, v); }
    case DType::kFloat16:
    case DType::kBFloat16: return Tensor::from_doubles(dt, shape, n.is_int ? std::vector<double>(n.i.begin(), n.i.end()) : n.f);
  }
  return nullptr;
}

// Index into an input broadcast to out_shape.
int64_t broadcast_src(const Shape& in, const std::vector<int64_t>& in_strides, const Shape& out, const std::vector<int64_t>& idx) {
  int64_t off = 0;
  const size_t lead = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d) off += (in[d] == 1 ? 0 : idx[lead + d]) * in_strides[d];
  return off;
}

Result elementwise(const std::string& op, const std::vector<TensorPtr>& in) {
  Shape shape = in[0]->shape();
  for (size_t k = 1; k < in.size(); ++k) {
    auto s = ir::broadcast_shapes(shape, in[k]->shape());
    if (!s) return Error::bad_input(op + ": " + s.error().message);
    shape = *s;
  }
  if (ir::numel(shape) > kMaxFoldElements) return not_handled();
  std::vector<Num> nums;
  std::vector<std::vector<int64_t>> strides;
  for (const auto& t : in) {
    nums.push_back(to_num(*t));
    strides.push_back(strides_of(t->shape()));
  }
  const bool cmp = op == "Equal" || op == "Less" || op == "Greater" || op == "Not";
  const size_t first_val = op == "Where" ? 1 : 0;
  const bool is_int = nums[first_val].is_int;
  Num out{is_int || cmp, {}, {}};
  const int64_t n = ir::numel(shape);
  out.i.reserve(static_cast<size_t>(n));
  for_each_index(shape, [&](int64_t, const std::vector<int64_t>& idx) {
    auto at_i = [&](size_t k) {
      auto o = static_cast<size_t>(broadcast_src(in[k]->shape(), strides[k], shape, idx));
      return nums[k].is_int ? nums[k].i[o] : static_cast<int64_t>(nums[k].f[o]);
    };
    auto at_f = [&](size_t k) {
      auto o = static_cast<size_t>(broadcast_src(in[k]->shape(), strides[k], shape, idx));
      return nums[k].is_int ? static_cast<double>(nums[k].i[o]) : nums[k].f[o];
    };
    if (op == "Where") {
      bool c = at_i(0) != 0;
      if (is_int) out.i.push_back(c ? at_i(1) : at_i(2));
      else out.f.push_back(c ? at_f(1) : at_f(2));
    } else if (cmp) {
      bool r = op == "Not" ? at_i(0) == 0
             : op == "Equal" ? (is_int ? at_i(0) == at_i(1) : at_f(0) == at_f(1))
             : op == "Less" ? at_f(0) < at_f(1) : at_f(0) > at_f(1);
      out.i.push_back(r);
    } else if (is_int) {
      int64_t a = at_i(0), b = in.size() > 1 ? at_i(1) : 0, r = 0;

      // Two's-complement wraparound, as the runtime's integer kernels compute it, without C++'s
      // undefined overflow: INT64_MIN / -1 (which traps the CPU) is INT64_MIN, and INT64_MIN % -1 is 0.
      const auto wrap = [](uint64_t v) { return static_cast<int64_t>(v); };
      const auto ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
      const bool min_by_minus_one = a == std::numeric_limits<int64_t>::min() && b == -1;
      if (op == "Add") r = wrap(ua + ub);
      else if (op == "Sub") r = wrap(ua - ub);
      else if (op == "Mul") r = wrap(ua * ub);
      else if (op == "Div") r = min_by_minus_one ? a : a / b;  // (b != 0: checked by the caller)
      else if (op == "Neg") r = wrap(0 - ua);
      else if (op == "Min") r = std::min(a, b);
      else if (op == "Max") r = std::max(a, b);
      else if (op == "Abs") r = a < 0 ? wrap(0 - ua) : a;
      else if (op == "Fmod") r = b == 0 || min_by_minus_one ? 0 : a % b;  // the sign of the dividend, as C
      else if (op == "Mod") {                                             // the sign of the divisor, as Python
        r = b == 0 || min_by_minus_one ? 0 : a % b;
        if (r != 0 && ((r < 0) != (b < 0))) r += b;
      }
      out.i.push_back(r);
    } else {
      double a = at_f(0), b = in.size() > 1 ? at_f(1) : 0, r = 0;
      if (op == "Add") r = a + b;
      else if (op == "Sub") r = a - b;
      else if (op == "Mul") r = a * b;
      else if (op == "Div") r = a / b;
      else if (op == "Neg") r = -a;
      else if (op == "Min") r = std::isnan(a) || std::isnan(b) ? std::nan("") : std::min(a, b);  // NaN wins, as in
      else if (op == "Max") r = std::isnan(a) || std::isnan(b) ? std::nan("") : std::max(a, b);  // onnxruntime
      else if (op == "Abs") r = std::fabs(a);
      else if (op == "Sqrt") r = std::sqrt(a);
      else if (op == "Fmod") r = std::fmod(a, b);
      out.f.push_back(r);
    }
  });
  const DType dt = cmp ? DType::kBool : in[first_val]->dtype();
  // float32 results are computed in double and rounded once: exact for + - * / and sqrt.
  auto t = from_num(out, dt, shape);
  if (!t) return not_handled();
  return single(t);
}

std::vector<int64_t> ints_of(const TensorPtr& t) { return t ? t->as_int64() : std::vector<int64_t>{}; }

// An integer Div or Mod by a constant divisor holding a zero: onnxruntime refuses the model when it
// loads it (even where the dividend is empty), so rlflow does too instead of choosing a value.
Status no_integer_zero_divisor(const std::string& op, const std::vector<TensorPtr>& in) {
  if ((op != "Div" && op != "Mod") || in.size() != 2 || !in[1] || ir::is_float(in[1]->dtype())) return {};
  for (int64_t v : in[1]->as_int64())
    if (v == 0) return Error::bad_input(op + ": an integer division by a constant zero (onnxruntime refuses this model)");
  return {};
}

}  // namespace

Result fold_node(const onnx::NodeProto& node, const std::vector<TensorPtr>& in,
                 const std::vector<std::optional<TensorType>>& types, int64_t opset) {
  const std::string& op = node.op_type();
  if (!node.domain().empty() && node.domain() != "ai.onnx") return not_handled();
  if (find_attr(node, "broadcast")) return not_handled();  // legacy (opset < 7) broadcasting
  // Half values are left to the reference executor, which rounds after every node as a half kernel does.
  for (const auto& t : in)
    if (t && ir::is_half(t->dtype())) return not_handled();

  if (op == "Shape") {
    if (types.empty() || !types[0]) return not_handled();
    const auto& s = types[0]->shape;
    int64_t r = static_cast<int64_t>(s.size());
    int64_t start = attr_int(node, "start", 0), end = attr_int(node, "end", r);
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = std::clamp<int64_t>(start, 0, r);
    end = std::clamp<int64_t>(end, start, r);
    return single(Tensor::i64(std::vector<int64_t>(s.begin() + start, s.begin() + end)));
  }
  if (op == "Size") {
    if (types.empty() || !types[0]) return not_handled();
    return single(Tensor::from_vector<int64_t>(DType::kInt64, {}, {ir::numel(types[0]->shape)}));
  }
  // Everything below needs every present input to be constant.
  for (size_t k = 0; k < in.size(); ++k)
    if (!in[k] && k < static_cast<size_t>(node.input_size()) && !node.input(static_cast<int>(k)).empty()) return not_handled();
  if (in.empty() && op != "ConstantOfShape") return not_handled();

  if (op == "Identity" || op == "Dropout") return single(in[0]);
  if (op == "Cast") {
    auto dt = dtype_from_onnx(static_cast<int32_t>(attr_int(node, "to", 1)), "Cast target");
    if (!dt) return not_handled();
    Num n = to_num(*in[0]);
    if (!n.is_int && !ir::is_float(*dt) && *dt != DType::kBool) {
      // A float out of the target's range (or NaN) converts as onnxruntime's x86 kernels do: to the
      // "integer indefinite" value, INT64_MIN for int64 and INT32_MIN for the narrower types, which
      // then keep its low bits (so 300.0 to uint8 is 44, as in C).
      n.is_int = true;
      n.i.reserve(n.f.size());
      for (double d : n.f) {
        if (*dt == DType::kInt64)
          n.i.push_back(std::isnan(d) || d >= 0x1p63 || d < -0x1p63 ? std::numeric_limits<int64_t>::min() : static_cast<int64_t>(d));
        else
          n.i.push_back(std::isnan(d) || d >= 0x1p31 || d < -0x1p31 ? std::numeric_limits<int32_t>::min() : static_cast<int32_t>(d));
      }
    }
    auto t = from_num(n, *dt, in[0]->shape());
    if (!t) return not_handled();
    return single(t);
  }
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Equal" || op == "Less" || op == "Greater" ||
      op == "Where" || op == "Neg" || op == "Not" || op == "Min" || op == "Max" || op == "Abs" || op == "Sqrt") {
    if ((op == "Min" || op == "Max") && in.size() != 2) return not_handled();
    RLFLOW_TRY_STATUS(no_integer_zero_divisor(op, in));
    return elementwise(op, in);
  }
  if (op == "Mod") {
    // fmod=0 (integers only) takes the divisor's sign; fmod=1 is C's fmod, for floats too.
    const bool c_style = attr_int(node, "fmod", 0) != 0;
    if (in.size() != 2 || !in[0] || !in[1]) return not_handled();
    if (!c_style && (ir::is_float(in[0]->dtype()) || ir::is_float(in[1]->dtype()))) return not_handled();
    RLFLOW_TRY_STATUS(no_integer_zero_divisor(op, in));
    return elementwise(c_style ? "Fmod" : "Mod", in);
  }
  if (op == "Unsqueeze" || op == "Squeeze") {
    std::vector<int64_t> axes = opset >= 13 ? (in.size() > 1 ? ints_of(in[1]) : std::vector<int64_t>{})
                                            : attr_ints(node, "axes").value_or(std::vector<int64_t>{});
    Shape s = in[0]->shape();
    if (op == "Unsqueeze") {
      const int64_t r = static_cast<int64_t>(s.size() + axes.size());
      for (auto& a : axes) a = a < 0 ? a + r : a;
      std::sort(axes.begin(), axes.end());
      for (auto a : axes) {
        if (a < 0 || a > static_cast<int64_t>(s.size())) return Error::bad_input("Unsqueeze: axis out of range");
        s.insert(s.begin() + a, 1);
      }
    } else {
      const int64_t r = static_cast<int64_t>(s.size());
      for (auto a : axes)
        if (a < -r || a >= r) return Error::bad_input("Squeeze: axis out of range");
      Shape out;
      for (int64_t d = 0; d < r; ++d) {
        bool sq = axes.empty() ? s[d] == 1
                               : std::any_of(axes.begin(), axes.end(), [&](int64_t a) { return (a < 0 ? a + r : a) == d; });
        if (sq && s[d] != 1) return Error::bad_input("Squeeze: cannot squeeze a dimension of extent " + std::to_string(s[d]));
        if (!sq) out.push_back(s[d]);
      }
      s = out;
    }
    return single(with_shape(*in[0], s));
  }
  if (op == "Reshape") {
    if (in.size() < 2) return not_handled();
    auto spec = ints_of(in[1]);
    const bool allowzero = attr_int(node, "allowzero", 0) != 0;
    Shape s;
    int64_t known = 1, infer_at = -1;
    for (size_t d = 0; d < spec.size(); ++d) {
      int64_t v = spec[d];
      if (v == 0 && !allowzero) v = d < in[0]->shape().size() ? in[0]->shape()[d] : 1;
      if (v < -1 || (v == -1 && infer_at >= 0)) return Error::bad_input("Reshape '" + node.name() + "': invalid target shape");
      if (v == -1) infer_at = static_cast<int64_t>(d);
      else known *= v;
      s.push_back(v);
    }
    if (infer_at >= 0) s[static_cast<size_t>(infer_at)] = known ? in[0]->numel() / known : 0;
    if (ir::numel(s) != in[0]->numel()) return Error::bad_input("Reshape '" + node.name() + "': element counts differ");
    return single(with_shape(*in[0], s));
  }
  if (op == "Flatten") {
    const auto& s = in[0]->shape();
    int64_t axis = attr_int(node, "axis", 1);
    if (axis < 0) axis += static_cast<int64_t>(s.size());
    if (axis < 0 || axis > static_cast<int64_t>(s.size())) return Error::bad_input("Flatten: axis out of range");
    int64_t a = 1;
    for (int64_t d = 0; d < axis; ++d) a *= s[d];
    return single(with_shape(*in[0], {a, a ? in[0]->numel() / a : 0}));
  }
  if (op == "Concat") {
    const int64_t r = in[0]->shape().empty() ? 1 : static_cast<int64_t>(in[0]->shape().size());
    int64_t axis = attr_int(node, "axis", 0);
    if (axis < 0) axis += r;
    Shape out = in[0]->shape();
    if (out.empty()) return not_handled();
    if (axis < 0 || axis >= r) return Error::bad_input("Concat: axis out of range");
    for (size_t k = 1; k < in.size(); ++k) {
      if (in[k]->shape().size() != out.size() || in[k]->dtype() != in[0]->dtype()) return Error::bad_input("Concat: inputs differ");
      for (int64_t d = 0; d < r; ++d)
        if (d != axis && in[k]->shape()[static_cast<size_t>(d)] != out[static_cast<size_t>(d)])
          return Error::bad_input("Concat: inputs differ off the axis");
      out[static_cast<size_t>(axis)] += in[k]->shape()[static_cast<size_t>(axis)];
    }
    if (ir::numel(out) > kMaxFoldElements) return not_handled();
    const size_t es = ir::dtype_size(in[0]->dtype());
    int64_t outer = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= out[static_cast<size_t>(d)];
    std::vector<std::byte> bytes;
    bytes.reserve(static_cast<size_t>(ir::numel(out)) * es);
    for (int64_t o = 0; o < outer; ++o)
      for (const auto& t : in) {
        const size_t chunk = static_cast<size_t>(outer ? t->numel() / outer : 0) * es;
        bytes.insert(bytes.end(), t->raw() + static_cast<size_t>(o) * chunk, t->raw() + static_cast<size_t>(o + 1) * chunk);
      }
    return single(std::make_shared<const Tensor>(TensorType{in[0]->dtype(), out}, std::move(bytes)));
  }
  if (op == "Gather") {
    if (in.size() != 2) return not_handled();
    const auto& ds = in[0]->shape();
    const int64_t r = static_cast<int64_t>(ds.size());
    int64_t axis = attr_int(node, "axis", 0);
    if (axis < 0) axis += r;
    if (axis < 0 || axis >= r) return Error::bad_input("Gather: axis out of range");
    auto idx = ints_of(in[1]);
    for (auto& v : idx) {
      if (v < 0) v += ds[static_cast<size_t>(axis)];
      if (v < 0 || v >= ds[static_cast<size_t>(axis)]) return Error::bad_input("Gather: index out of range");
    }
    Shape out(ds.begin(), ds.begin() + axis);
    out.insert(out.end(), in[1]->shape().begin(), in[1]->shape().end());
    out.insert(out.end(), ds.begin() + axis + 1, ds.end());
    if (ir::numel(out) > kMaxFoldElements) return not_handled();
    const auto st = strides_of(ds);
    const auto ist = strides_of(in[1]->shape());
    const size_t ir_ = in[1]->shape().size();
    return single(gather_bytes(*in[0], out, [&](const std::vector<int64_t>& o) {
      int64_t off = 0;
      for (int64_t d = 0; d < axis; ++d) off += o[d] * st[d];
      int64_t lin = 0;
      for (size_t d = 0; d < ir_; ++d) lin += o[static_cast<size_t>(axis) + d] * ist[d];
      off += idx[static_cast<size_t>(lin)] * st[static_cast<size_t>(axis)];
      for (int64_t d = axis + 1; d < r; ++d) off += o[static_cast<size_t>(d) + ir_ - 1] * st[d];
      return off;
    }));
  }
  if (op == "Slice") {
    const auto& ds = in[0]->shape();
    const int64_t r = static_cast<int64_t>(ds.size());
    std::vector<int64_t> starts, ends, axes, steps;
    if (opset < 10) {
      starts = attr_ints(node, "starts").value_or(std::vector<int64_t>{});
      ends = attr_ints(node, "ends").value_or(std::vector<int64_t>{});
      axes = attr_ints(node, "axes").value_or(std::vector<int64_t>{});
    } else {
      if (in.size() < 3) return not_handled();
      starts = ints_of(in[1]);
      ends = ints_of(in[2]);
      if (in.size() > 3 && in[3]) axes = ints_of(in[3]);
      if (in.size() > 4 && in[4]) steps = ints_of(in[4]);
    }
    if (axes.empty())
      for (size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<int64_t>(k));
    if (steps.empty()) steps.assign(starts.size(), 1);
    std::vector<int64_t> st(ds.size(), 0), step(ds.size(), 1);
    Shape out = ds;
    for (size_t k = 0; k < axes.size(); ++k) {
      int64_t a = axes[k] < 0 ? axes[k] + r : axes[k];
      if (a < 0 || a >= r || steps[k] == 0) return Error::bad_input("Slice: bad axis or step");
      const auto b = ir::onnx_slice_bounds(starts[k], ends[k], steps[k], ds[static_cast<size_t>(a)]);
      st[static_cast<size_t>(a)] = b.start;
      step[static_cast<size_t>(a)] = b.len > 1 ? steps[k] : 1;  // (a step beyond the extent takes one element)
      out[static_cast<size_t>(a)] = b.len;
    }
    const auto strides = strides_of(ds);
    return single(gather_bytes(*in[0], out, [&](const std::vector<int64_t>& o) {
      int64_t off = 0;
      for (size_t d = 0; d < o.size(); ++d) off += (st[d] + o[d] * step[d]) * strides[d];
      return off;
    }));
  }
  if (op == "Transpose") {
    const auto& ds = in[0]->shape();
    auto perm = attr_ints(node, "perm").value_or(std::vector<int64_t>{});
    if (perm.empty())
      for (size_t d = ds.size(); d-- > 0;) perm.push_back(static_cast<int64_t>(d));
    if (perm.size() != ds.size()) return Error::bad_input("Transpose: perm length differs from rank");
    std::vector<int64_t> sorted = perm;
    std::sort(sorted.begin(), sorted.end());
    for (size_t d = 0; d < sorted.size(); ++d)
      if (sorted[d] != static_cast<int64_t>(d)) return Error::bad_input("Transpose: perm is not a permutation");
    Shape out;
    for (auto p : perm) out.push_back(ds[static_cast<size_t>(p)]);
    const auto strides = strides_of(ds);
    return single(gather_bytes(*in[0], out, [&](const std::vector<int64_t>& o) {
      int64_t off = 0;
      for (size_t d = 0; d < o.size(); ++d) off += o[d] * strides[static_cast<size_t>(perm[d])];
      return off;
    }));
  }
  if (op == "Expand") {
    if (in.size() != 2) return not_handled();
    auto target = ints_of(in[1]);
    auto s = ir::broadcast_shapes(in[0]->shape(), target);
    if (!s) return Error::bad_input("Expand: " + s.error().message);
    if (ir::numel(*s) > kMaxFoldElements ||
        static_cast<size_t>(ir::numel(*s)) * ir::dtype_size(in[0]->dtype()) > std::max(in[0]->nbytes(), ir::kMaxFoldGrowthBytes))
      return not_handled();  // a large mask from a small constant stays a node rather than bloating the file
    const auto strides = strides_of(in[0]->shape());
    const Shape& is = in[0]->shape();
    const Shape os = *s;
    return single(gather_bytes(*in[0], os, [&](const std::vector<int64_t>& o) { return broadcast_src(is, strides, os, o); }));
  }
  if (op == "ConstantOfShape") {
    auto shape = in.empty() || !in[0] ? std::vector<int64_t>{} : ints_of(in[0]);
    if (std::any_of(shape.begin(), shape.end(), [](int64_t d) { return d < 0; }))
      return Error::bad_input("ConstantOfShape: negative dimension");
    if (ir::numel(shape) > kMaxFoldElements) return not_handled();
    TensorPtr value = Tensor::from_vector<float>(DType::kFloat32, {1}, {0.0f});
    if (auto* a = find_attr(node, "value")) {
      auto v = tensor_from_proto(a->t(), ".");
      if (!v) return v.error();
      value = *v;
    }
    if (value->numel() != 1) return Error::bad_input("ConstantOfShape: value must have one element");
    const size_t es = ir::dtype_size(value->dtype());
    if (static_cast<size_t>(ir::numel(shape)) * es > ir::kMaxFoldGrowthBytes) return not_handled();
    std::vector<std::byte> bytes(static_cast<size_t>(ir::numel(shape)) * es);
    for (size_t k = 0; k < bytes.size(); k += es) std::memcpy(bytes.data() + k, value->raw(), es);
    return single(std::make_shared<const Tensor>(TensorType{value->dtype(), shape}, std::move(bytes)));
  }
  if (op == "Range") {
    if (in.size() != 3) return not_handled();
    auto a = to_num(*in[0]), b = to_num(*in[1]), c = to_num(*in[2]);
    Num out{a.is_int, {}, {}};
    if (a.is_int) {
      int64_t s = a.i[0], l = b.i[0], d = c.i[0];
      if (d == 0) return Error::bad_input("Range: zero delta");
      // 128-bit so that neither the span nor the running value can overflow.
      const __int128 span = static_cast<__int128>(l) - s, step = d;
      const __int128 n = (span > 0 && step > 0) ? (span + step - 1) / step : (span < 0 && step < 0) ? (-span - step - 1) / -step : 0;
      // More elements than any runtime can hold: onnxruntime refuses the model, and so does rlflow.
      if (n > (static_cast<__int128>(1) << 40)) return Error::bad_input("Range: " + std::to_string(static_cast<double>(n)) + " elements");
      if (n > kMaxFoldElements) return not_handled();
      for (__int128 k = 0; k < n; ++k) out.i.push_back(static_cast<int64_t>(s + k * step));
    } else {
      double s = a.f[0], l = b.f[0], d = c.f[0];
      if (d == 0) return Error::bad_input("Range: zero delta");
      // A count that is not a finite number (a NaN or infinite start or limit): onnxruntime refuses it.
      const double q = (l - s) / d;
      if (!std::isfinite(q)) return Error::bad_input("Range(" + std::to_string(s) + ", " + std::to_string(l) + ", " + std::to_string(d) + "): the element count is not a finite number");
      const double count = std::max(0.0, std::ceil(q));
      if (count > std::ldexp(1.0, 40)) return Error::bad_input("Range: " + std::to_string(count) + " elements");
      if (!(count <= static_cast<double>(kMaxFoldElements))) return not_handled();
      const auto n = static_cast<int64_t>(count);
      for (int64_t k = 0; k < n; ++k) out.f.push_back(s + static_cast<double>(k) * d);
    }
    const auto n = static_cast<int64_t>(a.is_int ? out.i.size() : out.f.size());
    return single(from_num(out, in[0]->dtype(), {n}));
  }
  return not_handled();
}

}  // namespace rlflow::onnxio
