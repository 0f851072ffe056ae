// The generator's integer interpreter: fingerprints must be exact, so every op runs on int64 with
// two's-complement wrap-around (computed in uint64, which C++ defines), never on floats.
//
// Choices, each keeping "equal here" a strong hint of "equal over the reals" and never the
// reverse trap (the float64 executor re-checks every candidate anyway):
// - Relu is max(0, x) on the signed value; MaxPool compares signed values. Inputs are small
//   (|x| <= ~6) and graphs shallow, so nothing wraps in practice and order is the real order.
// - AveragePool is window_sum * (S / n), n the elements in the window and S = avg_pool_scale
//   (the lcm of every possible n; 36 for 3x3): S times the real average, exactly, with or
//   without count_include_pad. kAvgPoolKernel constants hold S/(kh*kw), the same factor.
// - BatchNorm is (x - mean) * scale * r(var) + bias per channel, where r stands for
//   1/sqrt(var + eps) and is a fixed pseudo-random function of the integer var: identities that
//   hold for any r (in particular the real one) show up, the rest are simply not found.
// - ScalarMul needs an integral value.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "rlflow/rules/generator.h"
#include "rlflow/util/hash.h"

namespace rlflow::rules::gen {

using ir::OpKind;
using ir::Shape;

namespace {

int64_t add(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b)); }
int64_t sub(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b)); }
int64_t mul(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b)); }

int64_t numel(const Shape& s) { return std::accumulate(s.begin(), s.end(), int64_t{1}, std::multiplies<>()); }

std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

Error bad(OpKind k, const std::string& why) { return Error::unsupported("integer interpreter: " + std::string(ir::op_name(k)) + ": " + why); }

std::vector<IntTensor> one(IntTensor t) {
  std::vector<IntTensor> v;
  v.push_back(std::move(t));
  return v;
}

// numpy broadcasting of two shapes.
std::optional<Shape> broadcast(const Shape& a, const Shape& b) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// Strides that read `s` as if broadcast to `out` (0 along broadcast dims).
std::vector<int64_t> broadcast_strides(const Shape& s, const Shape& out) {
  std::vector<int64_t> st(out.size(), 0);
  auto own = strides_of(s);
  const size_t off = out.size() - s.size();
  for (size_t i = 0; i < s.size(); ++i) st[off + i] = s[i] == 1 ? 0 : own[i];
  return st;
}

template <class F>
Expected<std::vector<IntTensor>> binary(OpKind k, const IntTensor& a, const IntTensor& b, F f) {
  auto shape = broadcast(a.shape, b.shape);
  if (!shape) return bad(k, "shapes do not broadcast");
  IntTensor out{*shape, std::vector<int64_t>(static_cast<size_t>(numel(*shape)))};
  const auto sa = broadcast_strides(a.shape, *shape), sb = broadcast_strides(b.shape, *shape);
  const size_t r = shape->size();
  std::vector<int64_t> idx(r, 0);
  for (size_t lin = 0; lin < out.data.size(); ++lin) {
    int64_t ia = 0, ib = 0;
    for (size_t d = 0; d < r; ++d) {
      ia += idx[d] * sa[d];
      ib += idx[d] * sb[d];
    }
    out.data[lin] = f(a.data[static_cast<size_t>(ia)], b.data[static_cast<size_t>(ib)]);
    for (size_t d = r; d-- > 0;) {
      if (++idx[d] < (*shape)[d]) break;
      idx[d] = 0;
    }
  }
  return one(std::move(out));
}

Expected<std::vector<IntTensor>> conv(const ir::ConvParams& p, const std::vector<const IntTensor*>& in) {
  const auto k = OpKind::kConv;
  if (in.size() < 2 || in.size() > 3) return bad(k, "expects 2 or 3 inputs");
  const auto& x = *in[0];
  const auto& w = *in[1];
  if (x.shape.size() != 4 || w.shape.size() != 4) return bad(k, "only 2-D convolutions");
  if (p.group != 1) return bad(k, "only group 1");
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  const int64_t O = w.shape[0], KH = w.shape[2], KW = w.shape[3];
  if (w.shape[1] != C) return bad(k, "channel mismatch");
  const int64_t sh = p.strides[0], sw = p.strides[1], dh = p.dilations[0], dw = p.dilations[1];
  const int64_t pt = p.pads[0], pl = p.pads[1], pb = p.pads[2], pr = p.pads[3];
  const int64_t OH = (H + pt + pb - dh * (KH - 1) - 1) / sh + 1, OW = (W + pl + pr - dw * (KW - 1) - 1) / sw + 1;
  if (OH <= 0 || OW <= 0) return bad(k, "kernel larger than the padded input");
  if (in.size() == 3 && (in[2]->shape.size() != 1 || in[2]->shape[0] != O)) return bad(k, "bias must be [O]");
  IntTensor out{{N, O, OH, OW}, std::vector<int64_t>(static_cast<size_t>(N * O * OH * OW), 0)};
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t i = 0; i < OH; ++i)
        for (int64_t j = 0; j < OW; ++j) {
          int64_t acc = in.size() == 3 ? in[2]->data[static_cast<size_t>(o)] : 0;
          for (int64_t c = 0; c < C; ++c)
            for (int64_t a = 0; a < KH; ++a) {
              const int64_t y = i * sh + a * dh - pt;
              if (y < 0 || y >= H) continue;
              for (int64_t b = 0; b < KW; ++b) {
                const int64_t xx = j * sw + b * dw - pl;
                if (xx < 0 || xx >= W) continue;
                acc = add(acc, mul(x.data[static_cast<size_t>(((n * C + c) * H + y) * W + xx)],
                                   w.data[static_cast<size_t>(((o * C + c) * KH + a) * KW + b)]));
              }
            }
          if (p.act == ir::Activation::kRelu) acc = std::max<int64_t>(acc, 0);
          else if (p.act != ir::Activation::kNone) return bad(k, "only the relu activation is exact");
          out.data[static_cast<size_t>(((n * O + o) * OH + i) * OW + j)] = acc;
        }
  return one(std::move(out));
}

Expected<std::vector<IntTensor>> matmul(const IntTensor& a, const IntTensor& b) {
  const auto k = OpKind::kMatMul;
  if (a.shape.size() < 2 || b.shape.size() < 2) return bad(k, "operands must have rank >= 2");
  const int64_t M = a.shape[a.shape.size() - 2], K = a.shape.back(), N = b.shape.back();
  if (b.shape[b.shape.size() - 2] != K) return bad(k, "inner dimensions differ");
  Shape ba(a.shape.begin(), a.shape.end() - 2), bb(b.shape.begin(), b.shape.end() - 2);
  auto batch = broadcast(ba, bb);
  if (!batch) return bad(k, "batch dimensions do not broadcast");
  Shape os = *batch;
  os.push_back(M);
  os.push_back(N);
  IntTensor out{os, std::vector<int64_t>(static_cast<size_t>(numel(os)), 0)};
  const auto sa = broadcast_strides(ba, *batch), sb = broadcast_strides(bb, *batch);
  const int64_t nb = numel(*batch);
  std::vector<int64_t> idx(batch->size(), 0);
  for (int64_t q = 0; q < nb; ++q) {
    int64_t oa = 0, ob = 0;
    for (size_t d = 0; d < idx.size(); ++d) {
      oa += idx[d] * sa[d];
      ob += idx[d] * sb[d];
    }
    oa *= M * K;
    ob *= K * N;
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        int64_t acc = 0;
        for (int64_t t = 0; t < K; ++t)
          acc = add(acc, mul(a.data[static_cast<size_t>(oa + i * K + t)], b.data[static_cast<size_t>(ob + t * N + j)]));
        out.data[static_cast<size_t>((q * M + i) * N + j)] = acc;
      }
    for (size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < (*batch)[d]) break;
      idx[d] = 0;
    }
  }
  return one(std::move(out));
}

Expected<std::vector<IntTensor>> pool(OpKind k, const ir::PoolParams& p, const IntTensor& x) {
  if (x.shape.size() != 4 || p.kernel.size() != 2) return bad(k, "only 2-D pooling");
  if (p.ceil_mode) return bad(k, "ceil_mode is not supported");
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  const int64_t KH = p.kernel[0], KW = p.kernel[1], sh = p.strides[0], sw = p.strides[1];
  const int64_t pt = p.pads[0], pl = p.pads[1], pb = p.pads[2], pr = p.pads[3];
  const int64_t OH = (H + pt + pb - KH) / sh + 1, OW = (W + pl + pr - KW) / sw + 1;
  if (OH <= 0 || OW <= 0) return bad(k, "kernel larger than the padded input");
  const int64_t scale = avg_pool_scale(p.kernel);
  IntTensor out{{N, C, OH, OW}, std::vector<int64_t>(static_cast<size_t>(N * C * OH * OW), 0)};
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < OH; ++i)
        for (int64_t j = 0; j < OW; ++j) {
          int64_t acc = 0, count = 0;
          bool any = false;
          for (int64_t a = 0; a < KH; ++a) {
            const int64_t y = i * sh + a - pt;
            if (y < 0 || y >= H) continue;
            for (int64_t b = 0; b < KW; ++b) {
              const int64_t xx = j * sw + b - pl;
              if (xx < 0 || xx >= W) continue;
              const int64_t v = x.data[static_cast<size_t>(((n * C + c) * H + y) * W + xx)];
              if (k == OpKind::kMaxPool) acc = any ? std::max(acc, v) : v;
              else acc = add(acc, v);
              any = true;
              ++count;
            }
          }
          if (k == OpKind::kAveragePool) acc = mul(acc, scale / (p.count_include_pad ? KH * KW : count));
          out.data[static_cast<size_t>(((n * C + c) * OH + i) * OW + j)] = acc;
        }
  return one(std::move(out));
}

Expected<std::vector<IntTensor>> concat(int64_t axis, const std::vector<const IntTensor*>& in) {
  const auto k = OpKind::kConcat;
  if (in.empty()) return bad(k, "no inputs");
  Shape os = in[0]->shape;
  if (axis < 0 || axis >= static_cast<int64_t>(os.size())) return bad(k, "axis out of range");
  os[axis] = 0;
  for (const auto* t : in) {
    if (t->shape.size() != os.size()) return bad(k, "ranks differ");
    for (size_t d = 0; d < os.size(); ++d)
      if (static_cast<int64_t>(d) != axis && t->shape[d] != in[0]->shape[d]) return bad(k, "shapes differ off the axis");
    os[axis] += t->shape[axis];
  }
  const int64_t outer = numel(Shape(os.begin(), os.begin() + axis));
  const int64_t inner = numel(Shape(os.begin() + axis + 1, os.end()));
  IntTensor out{os, {}};
  out.data.reserve(static_cast<size_t>(numel(os)));
  for (int64_t o = 0; o < outer; ++o)
    for (const auto* t : in) {
      const int64_t len = t->shape[axis] * inner;
      out.data.insert(out.data.end(), t->data.begin() + o * len, t->data.begin() + (o + 1) * len);
    }
  return one(std::move(out));
}

Expected<std::vector<IntTensor>> split(const ir::SplitParams& p, const IntTensor& x) {
  const auto k = OpKind::kSplit;
  if (p.axis < 0 || p.axis >= static_cast<int64_t>(x.shape.size())) return bad(k, "axis out of range");
  if (std::accumulate(p.sizes.begin(), p.sizes.end(), int64_t{0}) != x.shape[p.axis]) return bad(k, "sizes do not add up");
  const int64_t outer = numel(Shape(x.shape.begin(), x.shape.begin() + p.axis));
  const int64_t inner = numel(Shape(x.shape.begin() + p.axis + 1, x.shape.end()));
  std::vector<IntTensor> outs;
  int64_t start = 0;
  for (auto s : p.sizes) {
    IntTensor t{x.shape, {}};
    t.shape[p.axis] = s;
    for (int64_t o = 0; o < outer; ++o) {
      auto from = x.data.begin() + (o * x.shape[p.axis] + start) * inner;
      t.data.insert(t.data.end(), from, from + s * inner);
    }
    start += s;
    outs.push_back(std::move(t));
  }
  return outs;
}

Expected<std::vector<IntTensor>> transpose(const std::vector<int64_t>& perm, const IntTensor& x) {
  const size_t r = x.shape.size();
  if (perm.size() != r) return bad(OpKind::kTranspose, "perm length must equal rank");
  Shape os(r);
  for (size_t d = 0; d < r; ++d) os[d] = x.shape[static_cast<size_t>(perm[d])];
  const auto in_st = strides_of(x.shape);
  IntTensor out{os, std::vector<int64_t>(x.data.size())};
  std::vector<int64_t> idx(r, 0);
  for (size_t lin = 0; lin < out.data.size(); ++lin) {
    int64_t src = 0;
    for (size_t d = 0; d < r; ++d) src += idx[d] * in_st[static_cast<size_t>(perm[d])];
    out.data[lin] = x.data[static_cast<size_t>(src)];
    for (size_t d = r; d-- > 0;) {
      if (++idx[d] < os[d]) break;
      idx[d] = 0;
    }
  }
  return one(std::move(out));
}

Expected<std::vector<IntTensor>> enlarge(const std::vector<int64_t>& kernel, const IntTensor& w) {
  const auto k = OpKind::kEnlarge;
  if (w.shape.size() != 4 || kernel.size() != 2) return bad(k, "only 2-D kernels");
  const int64_t O = w.shape[0], C = w.shape[1], KH = w.shape[2], KW = w.shape[3];
  const int64_t NH = kernel[0], NW = kernel[1];
  if (NH < KH || NW < KW || (NH - KH) % 2 || (NW - KW) % 2) return bad(k, "can only enlarge by an even amount");
  const int64_t oh = (NH - KH) / 2, ow = (NW - KW) / 2;
  IntTensor out{{O, C, NH, NW}, std::vector<int64_t>(static_cast<size_t>(O * C * NH * NW), 0)};
  for (int64_t o = 0; o < O; ++o)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t a = 0; a < KH; ++a)
        for (int64_t b = 0; b < KW; ++b)
          out.data[static_cast<size_t>(((o * C + c) * NH + a + oh) * NW + b + ow)] =
              w.data[static_cast<size_t>(((o * C + c) * KH + a) * KW + b)];
  return one(std::move(out));
}

Expected<std::vector<IntTensor>> constant(const ir::ConstantParams& p) {
  const auto k = OpKind::kConstant;
  IntTensor out{p.shape, std::vector<int64_t>(static_cast<size_t>(numel(p.shape)), 0)};
  switch (p.fill) {
    case ir::ConstantFill::kValue: {
      if (p.value != std::floor(p.value)) return bad(k, "only integral values");
      std::fill(out.data.begin(), out.data.end(), static_cast<int64_t>(p.value));
      break;
    }
    case ir::ConstantFill::kIdentityConv: {
      if (p.shape.size() != 4) return bad(k, "identity kernels are 4-D");
      // The executor's definition: output channel c reads input channel c % C_in at the centre.
      const int64_t O = p.shape[0], C = p.shape[1], KH = p.shape[2], KW = p.shape[3];
      for (int64_t o = 0; o < O; ++o) out.data[static_cast<size_t>(((o * C + o % C) * KH + KH / 2) * KW + KW / 2)] = 1;
      break;
    }
    case ir::ConstantFill::kAvgPoolKernel: {
      if (p.shape.size() != 4) return bad(k, "pool kernels are 4-D");
      const std::vector<int64_t> kernel{p.shape[2], p.shape[3]};
      std::fill(out.data.begin(), out.data.end(), avg_pool_scale(kernel) / (p.shape[2] * p.shape[3]));
      break;
    }
  }
  return one(std::move(out));
}

// Stands for 1/sqrt(var + eps): any fixed function of the integer will do (see the file comment).
int64_t rsqrt_stand_in(int64_t v) { return static_cast<int64_t>(Hasher::mix(static_cast<uint64_t>(v) ^ 0x5bd1e995ull) % 13) + 2; }

Expected<std::vector<IntTensor>> batch_norm(const std::vector<const IntTensor*>& in) {
  const auto k = OpKind::kBatchNorm;
  if (in.size() != 5) return bad(k, "expects 5 inputs");
  const auto& x = *in[0];
  if (x.shape.size() < 2) return bad(k, "expects rank >= 2");
  const int64_t C = x.shape[1];
  for (size_t i = 1; i < 5; ++i)
    if (in[i]->shape != Shape{C}) return bad(k, "parameters must have shape [C]");
  const int64_t outer = x.shape[0], inner = numel(Shape(x.shape.begin() + 2, x.shape.end()));
  IntTensor out{x.shape, std::vector<int64_t>(x.data.size())};
  for (int64_t n = 0; n < outer; ++n)
    for (int64_t c = 0; c < C; ++c) {
      const auto cc = static_cast<size_t>(c);
      const int64_t f = mul(in[1]->data[cc], rsqrt_stand_in(in[4]->data[cc]));
      for (int64_t i = 0; i < inner; ++i) {
        const auto at = static_cast<size_t>((n * C + c) * inner + i);
        out.data[at] = add(mul(sub(x.data[at], in[3]->data[cc]), f), in[2]->data[cc]);
      }
    }
  return one(std::move(out));
}

}  // namespace

uint64_t IntTensor::fingerprint() const {
  Hasher h(0x1f7);
  h.add(shape);
  h.add(Hasher::bytes(data.data(), data.size() * sizeof(int64_t)));
  return h.digest();
}

int64_t avg_pool_scale(const std::vector<int64_t>& kernel) {
  int64_t s = 1;
  for (auto k : kernel) {
    int64_t l = 1;
    for (int64_t i = 2; i <= k; ++i) l = std::lcm(l, i);
    s *= l;
  }
  return s;
}

Expected<std::vector<IntTensor>> eval_int(OpKind kind, const ir::OpParams& params, const std::vector<const IntTensor*>& in) {
  auto need = [&](size_t n) { return in.size() == n; };
  switch (kind) {
    case OpKind::kConv: return conv(std::get<ir::ConvParams>(params), in);
    case OpKind::kMatMul:
      if (!need(2)) return bad(kind, "expects 2 inputs");
      return matmul(*in[0], *in[1]);
    case OpKind::kAdd:
    case OpKind::kSub:
    case OpKind::kMul:
      if (!need(2)) return bad(kind, "expects 2 inputs");
      if (kind == OpKind::kAdd) return binary(kind, *in[0], *in[1], add);
      if (kind == OpKind::kSub) return binary(kind, *in[0], *in[1], sub);
      return binary(kind, *in[0], *in[1], mul);
    case OpKind::kRelu: {
      if (!need(1)) return bad(kind, "expects 1 input");
      IntTensor out = *in[0];
      for (auto& v : out.data) v = std::max<int64_t>(v, 0);
      return one(std::move(out));
    }
    case OpKind::kScalarMul: {
      if (!need(1)) return bad(kind, "expects 1 input");
      const double s = std::get<ir::ScalarParams>(params).value;
      if (s != std::floor(s) || std::fabs(s) > 1e6) return bad(kind, "only integral scalars");
      IntTensor out = *in[0];
      for (auto& v : out.data) v = mul(v, static_cast<int64_t>(s));
      return one(std::move(out));
    }
    case OpKind::kMaxPool:
    case OpKind::kAveragePool:
      if (!need(1)) return bad(kind, "expects 1 input");
      return pool(kind, std::get<ir::PoolParams>(params), *in[0]);
    case OpKind::kConcat: return concat(std::get<ir::AxisParams>(params).axis, in);
    case OpKind::kSplit:
      if (!need(1)) return bad(kind, "expects 1 input");
      return split(std::get<ir::SplitParams>(params), *in[0]);
    case OpKind::kTranspose:
      if (!need(1)) return bad(kind, "expects 1 input");
      return transpose(std::get<ir::TransposeParams>(params).perm, *in[0]);
    case OpKind::kReshape: {
      if (!need(1)) return bad(kind, "expects 1 input");
      const auto& s = std::get<ir::ReshapeParams>(params).shape;
      if (numel(s) != static_cast<int64_t>(in[0]->data.size())) return bad(kind, "element count changes");
      return one(IntTensor{s, in[0]->data});
    }
    case OpKind::kEnlarge:
      if (!need(1)) return bad(kind, "expects 1 input");
      return enlarge(std::get<ir::EnlargeParams>(params).kernel, *in[0]);
    case OpKind::kConstant:
      if (!need(0)) return bad(kind, "takes no inputs");
      return constant(std::get<ir::ConstantParams>(params));
    case OpKind::kBatchNorm: return batch_norm(in);
    default:  // not in the generator's op set
      break;
  }
  return bad(kind, "not in the generator's op set");
}

}  // namespace rlflow::rules::gen
