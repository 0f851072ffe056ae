// Kernels for ONNX ops the IR carries verbatim. Semantics follow the ONNX operator specification;
// each is checked against the ONNX backend node tests (scripts/checks/node_tests).
#include "onnx_ops.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <unordered_map>

#include "aten_ops.h"
#include "rlflow/ir/shape_inference.h"

namespace rlflow::exec::detail {

namespace {

struct Unsupported : std::runtime_error {
  using std::runtime_error::runtime_error;
};

using Outs = std::vector<at::Tensor>;
using Kernel = std::function<Outs(const OnnxCall&)>;
// Attributes and opsets a kernel implements; nullptr accepts every form of the op.
using Accepts = std::function<bool(const ir::Attributes&, int64_t opset)>;

struct Entry {
  Kernel run;
  Accepts accepts;
};

Outs one(at::Tensor t) { return {std::move(t)}; }

std::vector<int64_t> ints_of(const at::Tensor& t) {
  auto c = t.to(at::kLong).contiguous();
  return {c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()};
}
int64_t scalar_i(const at::Tensor& t) { return t.to(at::kLong).reshape({-1})[0].item<int64_t>(); }

int64_t norm_axis(int64_t a, int64_t rank) {
  const int64_t r = a < 0 ? a + rank : a;
  if (r < 0 || r >= std::max<int64_t>(rank, 1)) throw std::invalid_argument("axis " + std::to_string(a) + " out of range");
  return r;
}
std::vector<int64_t> norm_axes(std::vector<int64_t> axes, int64_t rank) {
  for (auto& a : axes) a = norm_axis(a, rank);
  std::sort(axes.begin(), axes.end());
  return axes;
}

// Numpy-style broadcast of two shapes (Expand's rule: either side may be 1).
std::vector<int64_t> broadcast(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  const size_t r = std::max(a.size(), b.size());
  std::vector<int64_t> out(r);
  for (size_t i = 0; i < r; ++i) {
    const int64_t x = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const int64_t y = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (x != y && x != 1 && y != 1) throw std::invalid_argument("shapes do not broadcast");
    out[i] = x == 1 ? y : x;
  }
  return out;
}

at::ScalarType onnx_scalar_type(int64_t onnx_type) {
  switch (onnx_type) {
    case 1: return at::kFloat;
    case 2: return at::kByte;
    case 3: return at::kChar;
    case 5: return at::kShort;
    case 6: return at::kInt;
    case 7: return at::kLong;
    case 9: return at::kBool;
    case 10: return at::kHalf;
    case 11: return at::kDouble;
    case 16: return at::kBFloat16;
    default: throw Unsupported("data type " + std::to_string(onnx_type));
  }
}

// ---- elementwise ----
Entry unary(at::Tensor (*f)(const at::Tensor&)) {
  return {[f](const OnnxCall& c) { return one(f(c.x(0))); }, nullptr};
}
// Sign(NaN) is NaN, as in onnxruntime and numpy (at::sign gives 0).
at::Tensor sign_keeping_nan(const at::Tensor& x) {
  return at::isFloatingType(x.scalar_type()) ? at::where(at::isnan(x), x, at::sign(x)) : at::sign(x);
}
// Ops before opset 7 broadcast only with the legacy `broadcast` attribute, which is not implemented.
bool no_legacy_broadcast(const ir::Attributes& a, int64_t) { return !a.has("broadcast"); }
Entry binary(at::Tensor (*f)(const at::Tensor&, const at::Tensor&)) {
  return {[f](const OnnxCall& c) { return one(f(c.x(0), c.x(1))); }, no_legacy_broadcast};
}
// Min, Max, Sum, Mean: any number of inputs, broadcast together.
Entry variadic(at::Tensor (*f)(const at::Tensor&, const at::Tensor&), bool mean = false) {
  return {[f, mean](const OnnxCall& c) {
            at::Tensor acc = c.x(0);
            for (size_t k = 1; k < c.in.size(); ++k) acc = f(acc, c.x(k));
            if (mean) acc = acc / static_cast<double>(c.in.size());
            return one(c.in.size() == 1 ? acc.clone() : acc);
          },
          nullptr};
}

// ---- reductions ----
enum class Red { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };
Entry reduce(Red kind, int64_t axes_input_since) {
  return {[kind, axes_input_since](const OnnxCall& c) {
            const at::Tensor& x = c.x(0);
            std::vector<int64_t> axes;
            if (c.opset >= axes_input_since) {
              if (c.has(1)) axes = ints_of(*c.in[1]);
            } else {
              axes = c.a.ints("axes").value_or(std::vector<int64_t>{});
            }
            const bool keep = c.a.i("keepdims", 1) != 0;
            if (axes.empty()) {
              if (c.a.i("noop_with_empty_axes", 0) != 0) return one(x.clone());
              for (int64_t d = 0; d < x.dim(); ++d) axes.push_back(d);
            }
            axes = norm_axes(axes, x.dim());
            auto sum = [&](const at::Tensor& t) { return at::sum(t, axes, keep); };
            at::Tensor y;
            switch (kind) {
              case Red::kSum: y = sum(x); break;
              case Red::kMean: y = x.numel() == 0 ? sum(x) :  // over nothing: 0, as onnxruntime computes it
                                   at::isFloatingType(x.scalar_type()) ? at::mean(x, axes, keep) : sum(x.to(at::kDouble)) / [&] {
                double n = 1;
                for (auto a : axes) n *= static_cast<double>(x.size(a));
                return n;
              }(); break;
              // Over nothing: the identity of max and min, -inf and +inf (an integer's extremes), as
              // onnxruntime and opset 18 define it.
              case Red::kMax:
              case Red::kMin: {
                const bool mx = kind == Red::kMax;
                if (x.numel() == 0) {
                  const at::Tensor shape_of = sum(x);
                  if (at::isFloatingType(x.scalar_type()))
                    y = at::full_like(shape_of, mx ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity());
                  else if (x.scalar_type() == at::kLong)
                    y = at::full_like(shape_of, mx ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max());
                  else if (x.scalar_type() == at::kInt)
                    y = at::full_like(shape_of, mx ? std::numeric_limits<int32_t>::min() : std::numeric_limits<int32_t>::max());
                  else
                    throw Unsupported("an empty reduction of this dtype");
                  break;
                }
                if (at::isFloatingType(x.scalar_type()) && at::isnan(x).any().item<bool>())
                  throw Unsupported("a NaN in the input (onnxruntime's result then depends on its position)");
                y = mx ? at::amax(x, axes, keep) : at::amin(x, axes, keep);
                break;
              }
              case Red::kProd:
                y = x;
                for (auto it = axes.rbegin(); it != axes.rend(); ++it) y = at::prod(y, *it, true);
                if (!keep) for (auto it = axes.rbegin(); it != axes.rend(); ++it) y = y.squeeze(*it);
                break;
              case Red::kL1: y = sum(at::abs(x)); break;
              case Red::kL2: y = at::sqrt(sum(x * x)); break;
              case Red::kLogSum: y = at::log(sum(x)); break;
              case Red::kLogSumExp: y = at::logsumexp(x, axes, keep); break;
              case Red::kSumSquare: y = sum(x * x); break;
            }
            // An integer result out of the dtype's range: onnxruntime's kernels do not wrap it the way
            // two's complement would, so no value is claimed for it.
            if (!at::isFloatingType(x.scalar_type()) && x.scalar_type() != at::kBool && kind != Red::kMax && kind != Red::kMin) {
              const at::Tensor xd = x.to(at::kDouble);
              at::Tensor exact;
              switch (kind) {
                case Red::kProd:
                  exact = xd;
                  for (auto it = axes.rbegin(); it != axes.rend(); ++it) exact = at::prod(exact, *it, true);
                  break;
                case Red::kL1: exact = at::sum(at::abs(xd), axes, keep); break;
                case Red::kL2: case Red::kSumSquare: exact = at::sum(xd * xd, axes, keep); break;
                default: exact = at::sum(xd, axes, keep); break;
              }
              const double lim = x.scalar_type() == at::kInt ? 0x1p31 : x.scalar_type() == at::kLong ? 0x1p63 : 0x1p7;
              if (exact.numel() > 0 && ((exact >= lim) | (exact < -lim)).any().item<bool>())
                throw Unsupported("an integer result out of the dtype's range");
            }
            return one(y.to(x.scalar_type()));
          },
          nullptr};
}

Entry arg_reduce(bool is_max) {
  return {[is_max](const OnnxCall& c) {
            const at::Tensor& x = c.x(0);
            const int64_t axis = norm_axis(c.a.i("axis", 0), x.dim());
            const bool keep = c.a.i("keepdims", 1) != 0;
            // onnxruntime's result for a NaN depends on where it stands; none is claimed here.
            if (at::isFloatingType(x.scalar_type()) && at::isnan(x).any().item<bool>())
              throw Unsupported("a NaN in the input (onnxruntime's index then depends on its position)");
            if (c.a.i("select_last_index", 0) != 0) {
              at::Tensor f = x.flip({axis});
              at::Tensor idx = is_max ? at::argmax(f, axis, keep) : at::argmin(f, axis, keep);
              return one(x.size(axis) - 1 - idx);
            }
            return one(is_max ? at::argmax(x, axis, keep) : at::argmin(x, axis, keep));
          },
          nullptr};
}

// ---- softmax family: before opset 13 the input is coerced to 2-D at `axis` ----
Entry softmax_like(const std::function<at::Tensor(const at::Tensor&, int64_t)>& f) {
  return {[f](const OnnxCall& c) {
            const at::Tensor& x = c.x(0);
            if (c.opset >= 13) return one(f(x, norm_axis(c.a.i("axis", -1), x.dim())));
            const int64_t axis = x.dim() == 0 ? 0 : norm_axis(c.a.i("axis", 1), x.dim());
            int64_t outer = 1;
            for (int64_t d = 0; d < axis; ++d) outer *= x.size(d);
            return one(f(x.reshape({outer, -1}), 1).reshape(x.sizes()));
          },
          nullptr};
}
at::Tensor hardmax(const at::Tensor& x, int64_t axis) {
  at::Tensor idx = at::argmax(x, axis, true);
  return at::zeros_like(x).scatter_(axis, idx, 1.0);
}

Outs pad(const OnnxCall& c) {
  const at::Tensor& x = c.x(0);
  const int64_t r = x.dim();
  std::vector<int64_t> raw;
  double value = 0.0;
  std::vector<int64_t> axes;
  if (c.opset >= 11) {
    raw = ints_of(c.x(1));
    if (c.has(2) && c.in[2]->numel() > 0) value = c.in[2]->to(at::kDouble).reshape({-1})[0].item<double>();
    if (c.has(3)) axes = ints_of(*c.in[3]);
  } else {
    raw = c.a.ints("pads").value_or(std::vector<int64_t>{});
    value = c.a.f("value", 0.0);
  }
  if (axes.empty())
    for (int64_t d = 0; d < r; ++d) axes.push_back(d);
  if (raw.size() != 2 * axes.size()) throw std::invalid_argument("pads has the wrong length");
  std::vector<int64_t> pads(2 * static_cast<size_t>(r), 0);
  for (size_t k = 0; k < axes.size(); ++k) {
    const int64_t a = norm_axis(axes[k], r);
    pads[a] = raw[k];
    pads[r + a] = raw[axes.size() + k];
  }
  const std::string mode = c.a.s("mode", "constant");
  if (mode != "constant") {
    // Negative pads crop first, as for constant padding.
    at::Tensor y = x;
    std::vector<int64_t> grow(pads.size());
    for (int64_t d = 0; d < r; ++d) {
      const int64_t b = std::min<int64_t>(pads[d], 0), e = std::min<int64_t>(pads[r + d], 0);
      y = y.narrow(d, -b, y.size(d) + b + e);
      grow[d] = std::max<int64_t>(pads[d], 0);
      grow[r + d] = std::max<int64_t>(pads[r + d], 0);
    }
    return one(index_pad(y, grow, mode));
  }
  std::vector<int64_t> aten;  // last dim first
  for (int64_t d = r; d-- > 0;) {
    aten.push_back(pads[d]);
    aten.push_back(pads[r + d]);
  }
  return one(at::constant_pad_nd(x, aten, value));
}

// ---- Resize: separable per axis (nearest, n-linear, cubic), ONNX coordinate transforms ----
struct Taps {
  std::vector<std::vector<int64_t>> idx;
  std::vector<std::vector<double>> w;
  std::vector<bool> outside;  // tf_crop_and_resize: the sample falls outside the input (extrapolated)
};

struct ResizeAxis {
  double scale = 1.0;
  int64_t size = 0;
  double roi_start = 0.0, roi_end = 1.0;
};

// As the ONNX reference computes it, the resized length in align_corners and pytorch_half_pixel is
// in_len * scale, not rounded (it differs from out_len when a scale does not divide evenly).
double source_coord(const std::string& mode, double x, double scale, int64_t in_len, int64_t out_len) {
  const double resized = static_cast<double>(in_len) * scale;
  if (mode == "half_pixel") return (x + 0.5) / scale - 0.5;
  if (mode == "pytorch_half_pixel") return resized > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
  if (mode == "align_corners") return resized == 1 ? 0.0 : x * static_cast<double>(in_len - 1) / (resized - 1);
  if (mode == "asymmetric") return x / scale;
  if (mode == "tf_half_pixel_for_nn") return (x + 0.5) / scale;
  if (mode == "half_pixel_symmetric") {
    const double adjustment = static_cast<double>(out_len) / (scale * static_cast<double>(in_len));
    const double center = static_cast<double>(in_len) / 2.0;
    return center * (1.0 - adjustment) + (x + 0.5) / scale - 0.5;
  }
  throw Unsupported("coordinate_transformation_mode " + mode);
}

Taps resize_taps(const ir::Attributes& a, int64_t in_len, const ResizeAxis& ax) {
  const std::string mode = a.s("mode", "nearest");
  const std::string ctm = a.s("coordinate_transformation_mode", "half_pixel");
  const int64_t out_len = ax.size;
  const double scale = ax.scale;
  Taps t;
  for (int64_t o = 0; o < out_len; ++o) {
    double x;
    if (ctm == "tf_crop_and_resize") {
      const double span = static_cast<double>(in_len - 1);
      x = out_len > 1 ? ax.roi_start * span + static_cast<double>(o) * (ax.roi_end - ax.roi_start) * span / static_cast<double>(out_len - 1)
                      : 0.5 * (ax.roi_start + ax.roi_end) * span;
      t.outside.push_back(x < 0 || x > span);
    } else {
      x = source_coord(ctm, static_cast<double>(o), scale, in_len, out_len);
      t.outside.push_back(false);
    }
    auto clamp = [&](int64_t i) { return std::clamp<int64_t>(i, 0, in_len - 1); };
    if (mode == "nearest") {
      const std::string nm = a.s("nearest_mode", "round_prefer_floor");
      int64_t i;
      if (nm == "floor") i = static_cast<int64_t>(std::floor(x));
      else if (nm == "ceil") i = static_cast<int64_t>(std::ceil(x));
      else if (nm == "round_prefer_ceil") i = static_cast<int64_t>(std::floor(x + 0.5));
      else if (x == std::floor(x) + 0.5) i = static_cast<int64_t>(std::floor(x));  // round_prefer_floor at a tie
      else i = static_cast<int64_t>(std::round(x));
      t.idx.push_back({clamp(i)});
      t.w.push_back({1.0});
    } else if (mode == "linear") {
      const double fl = std::floor(x);
      const double r = x - fl;
      const int64_t i = static_cast<int64_t>(fl);
      t.idx.push_back({clamp(i), clamp(i + 1)});
      t.w.push_back({1.0 - r, r});
    } else {  // cubic
      const double A = a.f("cubic_coeff_a", -0.75);
      const double fl = std::floor(x);
      const double r = x - fl;
      const int64_t i = static_cast<int64_t>(fl);
      auto kernel = [A](double s) {
        s = std::fabs(s);
        if (s <= 1) return ((A + 2) * s - (A + 3)) * s * s + 1;
        if (s < 2) return ((A * s - 5 * A) * s + 8 * A) * s - 4 * A;
        return 0.0;
      };
      std::vector<int64_t> idx;
      std::vector<double> w;
      double total = 0;
      for (int64_t k = -1; k <= 2; ++k) {
        double wk = kernel(static_cast<double>(k) - r);
        const int64_t j = i + k;
        if (a.i("exclude_outside", 0) != 0 && (j < 0 || j >= in_len)) wk = 0;
        idx.push_back(clamp(j));
        w.push_back(wk);
        total += wk;
      }
      if (a.i("exclude_outside", 0) != 0 && total != 0)
        for (auto& v : w) v /= total;
      t.idx.push_back(idx);
      t.w.push_back(w);
    }
  }
  return t;
}

bool resize_accepts(const ir::Attributes& a, int64_t opset) {
  const std::string mode = a.s("mode", "nearest");
  const std::string policy = a.s("keep_aspect_ratio_policy", "stretch");
  return opset >= 11 && (mode == "nearest" || mode == "linear" || mode == "cubic") && a.i("antialias", 0) == 0 &&
         (policy == "stretch" || policy == "not_larger" || policy == "not_smaller");
}

Outs resize(const OnnxCall& c) {
  at::Tensor x = c.x(0);
  const int64_t r = x.dim();
  std::vector<int64_t> axes = c.a.ints("axes").value_or(std::vector<int64_t>{});
  if (axes.empty())
    for (int64_t d = 0; d < r; ++d) axes.push_back(d);
  for (auto& a : axes) a = norm_axis(a, r);
  std::vector<ResizeAxis> ax(static_cast<size_t>(r));
  for (int64_t d = 0; d < r; ++d) ax[d].size = x.size(d);
  const size_t n = axes.size();
  if (c.has(3) && c.in[3]->numel() > 0) {
    auto sizes = ints_of(*c.in[3]);
    if (sizes.size() != n) throw std::invalid_argument("sizes has the wrong length");
    const std::string policy = c.a.s("keep_aspect_ratio_policy", "stretch");
    double common = policy == "not_larger" ? std::numeric_limits<double>::infinity() : 0.0;
    for (size_t k = 0; k < n; ++k) {
      const double s = static_cast<double>(sizes[k]) / static_cast<double>(x.size(axes[k]));
      common = policy == "not_larger" ? std::min(common, s) : std::max(common, s);
    }
    for (size_t k = 0; k < n; ++k) {
      auto& a = ax[static_cast<size_t>(axes[k])];
      if (policy == "stretch") {
        a.size = sizes[k];
        a.scale = static_cast<double>(sizes[k]) / static_cast<double>(x.size(axes[k]));
      } else {  // one scale for every axis; sizes rounded half to even, as the reference does
        a.scale = common;
        a.size = static_cast<int64_t>(std::nearbyint(common * static_cast<double>(x.size(axes[k]))));
      }
    }
  } else if (c.has(2) && c.in[2]->numel() > 0) {
    auto s = c.in[2]->to(at::kDouble).contiguous();
    if (static_cast<size_t>(s.numel()) != n) throw std::invalid_argument("scales has the wrong length");
    for (size_t k = 0; k < n; ++k) {
      auto& a = ax[static_cast<size_t>(axes[k])];
      a.scale = s[static_cast<int64_t>(k)].item<double>();
      a.size = static_cast<int64_t>(std::floor(static_cast<double>(x.size(axes[k])) * a.scale));
    }
  } else {
    throw std::invalid_argument("Resize needs scales or sizes");
  }
  const bool crop = c.a.s("coordinate_transformation_mode", "half_pixel") == "tf_crop_and_resize";
  if (crop) {
    if (!c.has(1)) throw std::invalid_argument("tf_crop_and_resize needs roi");
    auto roi = c.in[1]->to(at::kDouble).contiguous();
    if (static_cast<size_t>(roi.numel()) != 2 * n) throw std::invalid_argument("roi has the wrong length");
    for (size_t k = 0; k < n; ++k) {
      ax[static_cast<size_t>(axes[k])].roi_start = roi[static_cast<int64_t>(k)].item<double>();
      ax[static_cast<size_t>(axes[k])].roi_end = roi[static_cast<int64_t>(n + k)].item<double>();
    }
  }
  const bool floating = at::isFloatingType(x.scalar_type());
  at::Tensor y = floating ? x : x.to(at::kDouble);
  at::Tensor outside;  // extrapolated positions (tf_crop_and_resize)
  for (int64_t d = 0; d < r; ++d) {
    if (!crop && ax[d].size == y.size(d) && ax[d].scale == 1.0) continue;
    Taps t = resize_taps(c.a, y.size(d), ax[d]);
    const size_t ntaps = t.idx.empty() ? 1 : t.idx[0].size();
    std::vector<int64_t> wshape(static_cast<size_t>(r), 1);
    wshape[d] = ax[d].size;
    at::Tensor acc;
    for (size_t k = 0; k < ntaps; ++k) {
      std::vector<int64_t> idx;
      std::vector<double> w;
      for (size_t o = 0; o < t.idx.size(); ++o) {
        idx.push_back(t.idx[o][k]);
        w.push_back(t.w[o][k]);
      }
      at::Tensor term = y.index_select(d, at::tensor(idx, at::kLong)) * at::tensor(w, at::kDouble).to(y.scalar_type()).reshape(wshape);
      acc = k == 0 ? term : acc + term;
    }
    y = acc;
    if (crop) {
      std::vector<uint8_t> o(t.outside.begin(), t.outside.end());
      at::Tensor axis_out = at::tensor(std::vector<int64_t>(o.begin(), o.end()), at::kLong).to(at::kBool).reshape(wshape);
      outside = outside.defined() ? at::logical_or(outside, axis_out) : axis_out;
    }
  }
  if (outside.defined()) y = at::where(outside, at::scalar_tensor(c.a.f("extrapolation_value", 0.0), y.scalar_type()), y);
  if (!floating) y = at::round(y).to(x.scalar_type());
  return one(y);
}

// ---- ConvTranspose: ATen's transposed convolution without padding, then cropped to ONNX's pads ----
Outs conv_transpose(const OnnxCall& c) {
  const at::Tensor& x = c.x(0);
  const at::Tensor& w = c.x(1);
  const int64_t nsp = x.dim() - 2;
  const int64_t group = c.a.i("group", 1);
  auto spatial = [&](const char* name, int64_t dflt) {
    auto v = c.a.ints(name).value_or(std::vector<int64_t>(static_cast<size_t>(nsp), dflt));
    if (static_cast<int64_t>(v.size()) != nsp) throw std::invalid_argument(std::string(name) + " has the wrong length");
    return v;
  };
  auto strides = spatial("strides", 1), dil = spatial("dilations", 1), out_pad = spatial("output_padding", 0);
  std::vector<int64_t> kernel(w.sizes().begin() + 2, w.sizes().end());
  at::Tensor y = at::convolution(x, w, c10::nullopt, strides, std::vector<int64_t>(nsp, 0), dil, true,
                                 std::vector<int64_t>(nsp, 0), group);
  std::vector<int64_t> pads(2 * static_cast<size_t>(nsp), 0);
  const std::string auto_pad = c.a.s("auto_pad", "NOTSET");
  auto out_shape = c.a.ints("output_shape");
  if (out_shape && static_cast<int64_t>(out_shape->size()) > nsp)
    out_shape = std::vector<int64_t>(out_shape->end() - nsp, out_shape->end());
  for (int64_t i = 0; i < nsp; ++i) {
    const int64_t full = strides[i] * (x.size(2 + i) - 1) + out_pad[i] + (kernel[i] - 1) * dil[i] + 1;
    if (out_shape || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t target = out_shape ? (*out_shape)[i] : x.size(2 + i) * strides[i];
      const int64_t total = full - target;
      const bool lower = auto_pad == "SAME_LOWER";
      pads[i] = lower ? total - total / 2 : total / 2;
      pads[nsp + i] = total - pads[i];
    } else if (auto_pad == "NOTSET") {
      auto p = c.a.ints("pads").value_or(std::vector<int64_t>(2 * static_cast<size_t>(nsp), 0));
      pads[i] = p[i];
      pads[nsp + i] = p[nsp + i];
    }
  }
  for (int64_t i = 0; i < nsp; ++i) {
    const int64_t d = 2 + i;
    if (out_pad[i] > 0) {  // output_padding extends the end with positions no input reaches
      std::vector<int64_t> grow(2 * static_cast<size_t>(y.dim() - d), 0);
      grow[grow.size() - 1] = out_pad[i];
      y = at::constant_pad_nd(y, grow, 0.0);
    }
    const int64_t len = y.size(d) - pads[i] - pads[nsp + i];
    if (pads[i] >= 0 && len >= 0 && pads[i] + len <= y.size(d)) {
      y = y.narrow(d, pads[i], len);
    } else {
      std::vector<int64_t> grow(2 * static_cast<size_t>(y.dim() - d), 0);
      grow[grow.size() - 2] = -pads[i];
      grow[grow.size() - 1] = -pads[nsp + i];
      y = at::constant_pad_nd(y, grow, 0.0);
    }
  }
  if (c.has(2)) {
    std::vector<int64_t> bshape(static_cast<size_t>(y.dim()), 1);
    bshape[1] = -1;
    y = y + c.in[2]->reshape(bshape);
  }
  return one(y.contiguous());
}

// ---- indexing ----
at::Tensor normalized_index(const at::Tensor& idx, int64_t dim) {
  at::Tensor i = idx.to(at::kLong);
  return at::where(i < 0, i + dim, i);
}

Outs gather_nd(const OnnxCall& c) {
  const at::Tensor& data = c.x(0);
  at::Tensor ind = c.x(1).to(at::kLong);
  const int64_t b = c.a.i("batch_dims", 0);
  const int64_t k = ind.size(-1);
  if (k < 1) throw Unsupported("GatherND with an empty index tuple");
  std::vector<int64_t> bshape(data.sizes().begin(), data.sizes().begin() + b);
  int64_t nb = 1;
  for (auto v : bshape) nb *= v;
  std::vector<int64_t> dshape{nb}, ishape{nb};
  dshape.insert(dshape.end(), data.sizes().begin() + b, data.sizes().end());
  ishape.insert(ishape.end(), ind.sizes().begin() + b, ind.sizes().end());
  at::Tensor d = data.reshape(dshape), id = ind.reshape(ishape);
  std::vector<at::Tensor> parts;
  for (int64_t i = 0; i < nb; ++i) {
    at::Tensor di = d[i], ii = id[i];
    c10::List<c10::optional<at::Tensor>> idx;
    for (int64_t j = 0; j < k; ++j) idx.push_back(normalized_index(ii.select(-1, j), di.size(j)));
    parts.push_back(at::index(di, idx));
  }
  std::vector<int64_t> out(bshape);
  out.insert(out.end(), ind.sizes().begin() + b, ind.sizes().end() - 1);
  out.insert(out.end(), data.sizes().begin() + b + k, data.sizes().end());
  return one(at::stack(parts).reshape(out));
}

Outs scatter_nd(const OnnxCall& c) {
  at::Tensor out = c.x(0).clone();
  const at::Tensor ind = c.x(1).to(at::kLong);
  const int64_t k = ind.size(-1);
  at::Tensor flat = ind.reshape({-1, k});
  std::vector<int64_t> ushape{flat.size(0)};
  ushape.insert(ushape.end(), out.sizes().begin() + k, out.sizes().end());
  at::Tensor upd = c.x(2).reshape(ushape);
  const std::string red = c.a.s("reduction", "none");
  if (red == "none" || red == "add") {
    c10::List<c10::optional<at::Tensor>> idx;
    for (int64_t j = 0; j < k; ++j) idx.push_back(normalized_index(flat.select(1, j), out.size(j)));
    out.index_put_(idx, upd, red == "add");
    return one(out);
  }
  auto acc = flat.contiguous();
  for (int64_t i = 0; i < acc.size(0); ++i) {
    at::Tensor view = out;
    for (int64_t j = 0; j < k; ++j) {
      int64_t v = acc[i][j].item<int64_t>();
      view = view.select(0, v < 0 ? v + view.size(0) : v);
    }
    if (red == "mul") view.mul_(upd[i]);
    else if (red == "max") view.copy_(at::maximum(view, upd[i]));
    else if (red == "min") view.copy_(at::minimum(view, upd[i]));
    else throw Unsupported("ScatterND reduction " + red);
  }
  return one(out);
}

Outs scatter_elements(const OnnxCall& c) {
  const at::Tensor& data = c.x(0);
  const int64_t axis = norm_axis(c.a.i("axis", 0), data.dim());
  at::Tensor idx = normalized_index(c.x(1), data.size(axis));
  const at::Tensor& upd = c.x(2);
  const std::string red = c.a.s("reduction", "none");
  if (red == "none") return one(at::scatter(data, axis, idx, upd));
  if (red == "add") return one(at::scatter_add(data, axis, idx, upd));
  const char* r = red == "mul" ? "prod" : red == "max" ? "amax" : red == "min" ? "amin" : nullptr;
  if (!r) throw Unsupported("ScatterElements reduction " + red);
  return one(at::scatter_reduce(data, axis, idx, upd, r, true));
}

Outs one_hot(const OnnxCall& c) {
  at::Tensor idx = c.x(0).to(at::kLong);
  const int64_t depth = static_cast<int64_t>(c.x(1).to(at::kDouble).reshape({-1})[0].item<double>());
  const at::Tensor& values = c.x(2);
  const int64_t r = idx.dim() + 1;
  int64_t axis = c.a.i("axis", -1);
  axis = norm_axis(axis, r);
  idx = at::where(idx < 0, idx + depth, idx);
  std::vector<int64_t> shape(static_cast<size_t>(r), 1);
  shape[axis] = depth;
  at::Tensor mask = idx.unsqueeze(axis) == at::arange(depth, at::kLong).reshape(shape);
  return one(at::where(mask, values.reshape({-1})[1], values.reshape({-1})[0]));
}

Outs slice(const OnnxCall& c) {
  const at::Tensor& x = c.x(0);
  std::vector<int64_t> starts, ends, axes, steps;
  if (c.opset >= 10) {
    starts = ints_of(c.x(1));
    ends = ints_of(c.x(2));
    if (c.has(3)) axes = ints_of(*c.in[3]);
    if (c.has(4)) steps = ints_of(*c.in[4]);
  } else {
    starts = c.a.ints("starts").value_or(std::vector<int64_t>{});
    ends = c.a.ints("ends").value_or(std::vector<int64_t>{});
    axes = c.a.ints("axes").value_or(std::vector<int64_t>{});
  }
  if (axes.empty())
    for (size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<int64_t>(k));
  if (steps.empty()) steps.assign(starts.size(), 1);
  at::Tensor y = x;
  for (size_t k = 0; k < starts.size(); ++k) {
    const int64_t a = norm_axis(axes[k], x.dim()), dim = x.size(a), s = steps[k];
    if (s == 0) throw std::invalid_argument("Slice step 0");
    const auto b = ir::onnx_slice_bounds(starts[k], ends[k], s, dim);
    std::vector<int64_t> idx;
    for (int64_t i = 0; i < b.len; ++i) idx.push_back(b.start + i * s);
    y = y.index_select(a, at::tensor(idx, at::kLong));
  }
  return one(y);
}

Outs reshape(const OnnxCall& c) {
  const at::Tensor& x = c.x(0);
  std::vector<int64_t> shape = c.opset >= 5 ? ints_of(c.x(1)) : c.a.ints("shape").value_or(std::vector<int64_t>{});
  const bool allowzero = c.a.i("allowzero", 0) != 0;
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] == 0 && !allowzero) shape[i] = x.size(static_cast<int64_t>(i));
  return one(x.reshape(shape).clone());
}

std::vector<int64_t> axes_arg(const OnnxCall& c, size_t slot, int64_t input_since) {
  if (c.opset >= input_since) return c.has(slot) ? ints_of(*c.in[slot]) : std::vector<int64_t>{};
  return c.a.ints("axes").value_or(std::vector<int64_t>{});
}

Outs squeeze(const OnnxCall& c) {
  const at::Tensor& x = c.x(0);
  auto axes = axes_arg(c, 1, 13);
  if (axes.empty()) return one(x.squeeze().clone());
  std::vector<int64_t> shape;
  axes = norm_axes(axes, x.dim());
  for (int64_t d = 0; d < x.dim(); ++d)
    if (!std::binary_search(axes.begin(), axes.end(), d)) shape.push_back(x.size(d));
  return one(x.reshape(shape).clone());
}

Outs unsqueeze(const OnnxCall& c) {
  const at::Tensor& x = c.x(0);
  auto axes = norm_axes(axes_arg(c, 1, 13), x.dim() + static_cast<int64_t>(axes_arg(c, 1, 13).size()));
  std::vector<int64_t> shape;
  int64_t src = 0;
  const int64_t r = x.dim() + static_cast<int64_t>(axes.size());
  for (int64_t d = 0; d < r; ++d) shape.push_back(std::binary_search(axes.begin(), axes.end(), d) ? 1 : x.size(src++));
  return one(x.reshape(shape).clone());
}

Outs split(const OnnxCall& c) {
  const size_t num_outputs = c.num_outputs;
  const at::Tensor& x = c.x(0);
  const int64_t axis = norm_axis(c.a.i("axis", 0), x.dim());
  std::vector<int64_t> sizes = c.opset >= 13 ? (c.has(1) ? ints_of(*c.in[1]) : std::vector<int64_t>{})
                                             : c.a.ints("split").value_or(std::vector<int64_t>{});
  if (sizes.empty()) {
    const int64_t n = c.a.i("num_outputs", static_cast<int64_t>(num_outputs));
    const int64_t dim = x.size(axis), chunk = (dim + n - 1) / n;
    for (int64_t k = 0; k < n; ++k) sizes.push_back(std::max<int64_t>(0, std::min(chunk, dim - k * chunk)));
  }
  Outs out;
  for (auto& t : at::split_with_sizes(x, sizes, axis)) out.push_back(t.contiguous());
  return out;
}

Outs gather(const OnnxCall& c) {
  const at::Tensor& x = c.x(0);
  const int64_t axis = norm_axis(c.a.i("axis", 0), x.dim());
  at::Tensor idx = normalized_index(c.x(1), x.size(axis));
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().begin() + axis);
  shape.insert(shape.end(), idx.sizes().begin(), idx.sizes().end());
  shape.insert(shape.end(), x.sizes().begin() + axis + 1, x.sizes().end());
  return one(x.index_select(axis, idx.reshape({-1})).reshape(shape));
}

Outs depth_to_space(const OnnxCall& c) {
  const at::Tensor& x = c.x(0);
  const int64_t b = c.a.i("blocksize", 1), n = x.size(0), ch = x.size(1), h = x.size(2), w = x.size(3);
  at::Tensor y = c.a.s("mode", "DCR") == "CRD" ? x.reshape({n, ch / (b * b), b, b, h, w}).permute({0, 1, 4, 2, 5, 3})
                                              : x.reshape({n, b, b, ch / (b * b), h, w}).permute({0, 3, 4, 1, 5, 2});
  return one(y.reshape({n, ch / (b * b), h * b, w * b}));
}

Outs space_to_depth(const OnnxCall& c) {
  const at::Tensor& x = c.x(0);
  const int64_t b = c.a.i("blocksize", 1), n = x.size(0), ch = x.size(1), h = x.size(2), w = x.size(3);
  return one(x.reshape({n, ch, h / b, b, w / b, b}).permute({0, 3, 5, 1, 2, 4}).reshape({n, ch * b * b, h / b, w / b}));
}

Outs range(const OnnxCall& c) {
  const at::Tensor& s = c.x(0);
  if (at::isFloatingType(s.scalar_type())) {
    const double a = s.item<double>(), l = c.x(1).item<double>(), d = c.x(2).item<double>();
    const int64_t n = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((l - a) / d)));
    return one((at::arange(n, at::kDouble) * d + a).to(s.scalar_type()));
  }
  const int64_t a = scalar_i(s), l = scalar_i(c.x(1)), d = scalar_i(c.x(2));
  if (d == 0) throw std::invalid_argument("Range delta 0");
  const int64_t span = l - a;
  const int64_t n = std::max<int64_t>(0, span / d + ((span % d != 0) && ((span < 0) == (d < 0)) ? 1 : 0));
  return one((at::arange(n, at::kLong) * d + a).to(s.scalar_type()));
}

Outs cumsum(const OnnxCall& c) {
  const at::Tensor& x = c.x(0);
  const int64_t axis = norm_axis(scalar_i(c.x(1)), x.dim());
  const bool rev = c.a.i("reverse", 0) != 0;
  at::Tensor y = rev ? x.flip({axis}) : x;
  at::Tensor cs = at::cumsum(y, axis);
  if (c.a.i("exclusive", 0) != 0) {
    std::vector<int64_t> grow(2 * static_cast<size_t>(x.dim() - axis), 0);
    grow[grow.size() - 2] = 1;  // one zero at the front of `axis`
    cs = at::constant_pad_nd(cs, grow, 0.0).narrow(axis, 0, x.size(axis));
  }
  if (rev) cs = cs.flip({axis});
  return one(cs.to(x.scalar_type()));
}

at::Tensor constant_of_shape(const OnnxCall& c) {
  auto shape = ints_of(c.x(0));
  ir::TensorPtr v = c.a.tensor("value");
  if (!v) return at::zeros(shape, at::kFloat);
  return to_aten(*v, false).reshape({-1})[0].expand(shape).clone();
}

at::Tensor cast_to(const at::Tensor& x, at::ScalarType t) {
  // A half destination is computed in float32; the executor rounds half-typed node outputs.
  if (t == at::kHalf || t == at::kBFloat16) {
    return x.to(t).to(at::kFloat);
  }
  return x.to(t);
}

// ---- training losses (the ONNX definitions follow PyTorch's) ----
int64_t reduction_of(const ir::Attributes& a) {
  const std::string r = a.s("reduction", "mean");
  if (r == "none") return 0;
  if (r == "sum") return 2;
  if (r == "mean") return 1;
  throw Unsupported("reduction " + r);
}
at::Tensor nll(const OnnxCall& c, const at::Tensor& log_prob, const at::Tensor& target, size_t weight_slot) {
  const int64_t ignore = c.a.has("ignore_index") ? c.a.i("ignore_index", 0) : std::numeric_limits<int64_t>::min();
  c10::optional<at::Tensor> w;
  if (c.has(weight_slot)) w = *c.in[weight_slot];
  return at::nll_loss_nd(log_prob, target.to(at::kLong), w, reduction_of(c.a), ignore);
}

// ---- quantisation (per tensor or per axis; blocked quantisation is not implemented) ----
at::Tensor along_axis(const at::Tensor& v, const at::Tensor& x, int64_t axis) {
  if (v.numel() == 1) return v.reshape({});
  std::vector<int64_t> shape(static_cast<size_t>(x.dim()), 1);
  shape[norm_axis(axis, x.dim())] = -1;
  return v.reshape(shape);
}
bool unblocked(const ir::Attributes& a, int64_t) { return a.i("block_size", 0) == 0; }
std::pair<double, double> int_range(at::ScalarType t) {
  switch (t) {
    case at::kByte: return {0, 255};
    case at::kChar: return {-128, 127};
    case at::kInt: return {-2147483648.0, 2147483647.0};
    default: throw Unsupported("quantised type");
  }
}

// ---- LRN: the sum of squares over a window of channels ----
at::Tensor lrn(const OnnxCall& c) {
  const at::Tensor& x = c.x(0);
  const int64_t size = c.a.i("size", 1);
  const int64_t before = (size - 1) / 2, after = size - 1 - before;
  at::Tensor sq = x * x;
  std::vector<int64_t> grow(2 * static_cast<size_t>(x.dim() - 1), 0);  // pad the channel axis
  grow[grow.size() - 2] = before;
  grow[grow.size() - 1] = after;
  at::Tensor padded = at::constant_pad_nd(sq, grow, 0.0);
  at::Tensor sum = at::zeros_like(x);
  for (int64_t k = 0; k < size; ++k) sum = sum + padded.narrow(1, k, x.size(1));
  const double alpha = c.a.f("alpha", 1e-4), beta = c.a.f("beta", 0.75), bias = c.a.f("bias", 1.0);
  return x / at::pow(sum * (alpha / static_cast<double>(size)) + bias, beta);
}

// ---- pooling with dilations (and MaxPool's indices): the IR's pools have none ----
struct PoolGeometry {
  std::vector<int64_t> k, s, d, pads, extra;  // pads: begins then ends; extra: ceil_mode padding at the end
};

PoolGeometry pool_geometry(const OnnxCall& c, const at::Tensor& x) {
  const int64_t nsp = x.dim() - 2;
  PoolGeometry g;
  g.k = c.a.ints("kernel_shape").value_or(std::vector<int64_t>{});
  if (static_cast<int64_t>(g.k.size()) != nsp) throw std::invalid_argument("kernel_shape has the wrong length");
  g.s = c.a.ints("strides").value_or(std::vector<int64_t>(static_cast<size_t>(nsp), 1));
  g.d = c.a.ints("dilations").value_or(std::vector<int64_t>(static_cast<size_t>(nsp), 1));
  g.pads = c.a.ints("pads").value_or(std::vector<int64_t>(2 * static_cast<size_t>(nsp), 0));
  g.extra.assign(static_cast<size_t>(nsp), 0);
  const std::string ap = c.a.s("auto_pad", "NOTSET");
  const bool ceil = c.a.i("ceil_mode", 0) != 0;
  for (int64_t i = 0; i < nsp; ++i) {
    const int64_t in = x.size(2 + i), ext = (g.k[i] - 1) * g.d[i] + 1;
    if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
      const int64_t out = (in + g.s[i] - 1) / g.s[i];
      const int64_t total = std::max<int64_t>(0, (out - 1) * g.s[i] + ext - in);
      g.pads[i] = ap == "SAME_UPPER" ? total / 2 : total - total / 2;
      g.pads[nsp + i] = total - g.pads[i];
    } else if (ap == "VALID") {
      g.pads[i] = g.pads[nsp + i] = 0;
    }
    const int64_t span = in + g.pads[i] + g.pads[nsp + i] - ext;
    int64_t out = (ceil ? (span + g.s[i] - 1) / g.s[i] : span / g.s[i]) + 1;
    if (ceil && (out - 1) * g.s[i] >= in + g.pads[i]) --out;  // the last window must start inside
    g.extra[i] = std::max<int64_t>(0, (out - 1) * g.s[i] + ext - (in + g.pads[i] + g.pads[nsp + i]));
  }
  return g;
}

at::Tensor pad_spatial(const at::Tensor& x, const PoolGeometry& g, bool with_extra, double value) {
  const size_t nsp = g.k.size();
  std::vector<int64_t> aten;
  for (size_t i = nsp; i-- > 0;) {
    aten.push_back(g.pads[i]);
    aten.push_back(g.pads[nsp + i] + (with_extra ? g.extra[i] : 0));
  }
  return at::constant_pad_nd(x, aten, value);
}

Outs max_pool(const OnnxCall& c) {
  const at::Tensor& in = c.x(0);
  const bool floating = at::isFloatingType(in.scalar_type());
  at::Tensor x = floating ? in : in.to(at::kDouble);
  const PoolGeometry g = pool_geometry(c, x);
  const size_t nsp = g.k.size();
  if (nsp < 1 || nsp > 3) throw Unsupported("MaxPool over " + std::to_string(nsp) + " spatial dims");
  at::Tensor xp = pad_spatial(x, g, true, -std::numeric_limits<double>::infinity());
  std::vector<int64_t> k = g.k, s = g.s, d = g.d;
  at::Tensor lifted = xp;
  if (nsp == 1) {  // ATen pools 2-D and 3-D: lift 1-D to 2-D
    lifted = xp.unsqueeze(-1);
    k.push_back(1), s.push_back(1), d.push_back(1);
  }
  std::vector<int64_t> zero(k.size(), 0);
  auto [y, idx] = k.size() == 2 ? at::max_pool2d_with_indices(lifted, k, s, zero, d, false)
                                 : at::max_pool3d_with_indices(lifted, k, s, zero, d, false);
  if (nsp == 1) {
    y = y.squeeze(-1);
    idx = idx.squeeze(-1);
  }
  // ATen's index is within the padded plane; ONNX's is within the whole input tensor.
  std::vector<int64_t> padded(xp.sizes().begin() + 2, xp.sizes().end()), orig(x.sizes().begin() + 2, x.sizes().end());
  at::Tensor rem = idx, flat = at::zeros_like(idx);
  std::vector<at::Tensor> coord(nsp);
  for (size_t i = nsp; i-- > 0;) {
    coord[i] = at::remainder(rem, padded[i]) - g.pads[i];
    rem = at::div(rem, padded[i], "floor");
  }
  const bool column_major = c.a.i("storage_order", 0) != 0;
  int64_t plane = 1;
  for (size_t j = 0; j < nsp; ++j) {
    const size_t i = column_major ? nsp - 1 - j : j;
    flat = flat * orig[i] + coord[i];
    plane *= orig[i];
  }
  at::Tensor nc = at::arange(x.size(0) * x.size(1), at::kLong).reshape({x.size(0), x.size(1)});
  for (size_t i = 0; i < nsp; ++i) nc = nc.unsqueeze(-1);
  Outs out{floating ? y : y.to(in.scalar_type()), flat + nc * plane};
  return out;
}

Outs average_pool(const OnnxCall& c) {
  const at::Tensor& x = c.x(0);
  const PoolGeometry g = pool_geometry(c, x);
  const int64_t nsp = static_cast<int64_t>(g.k.size());
  std::vector<int64_t> wshape{x.size(1), 1};
  wshape.insert(wshape.end(), g.k.begin(), g.k.end());
  auto window_sum = [&](const at::Tensor& t) {
    return at::convolution(t, at::ones(wshape, t.options()), c10::nullopt, g.s, std::vector<int64_t>(nsp, 0), g.d, false,
                           std::vector<int64_t>(nsp, 0), x.size(1));
  };
  at::Tensor sum = window_sum(pad_spatial(x, g, true, 0.0));
  // The divisor: with count_include_pad the input and its explicit pads that the window covers, but
  // not a ceil_mode window's overhang beyond them (onnx 1.19's reference, onnxruntime 1.32 and
  // PyTorch; onnx 1.16's test data divided by the whole kernel); else the input elements alone.
  if (c.a.i("count_include_pad", 0) != 0) {
    std::vector<int64_t> overhang;
    for (size_t i = g.extra.size(); i-- > 0;) overhang.insert(overhang.end(), {0, g.extra[i]});
    return one(sum / window_sum(at::constant_pad_nd(pad_spatial(at::ones_like(x), g, false, 1.0), overhang, 0.0)));
  }
  return one(sum / window_sum(pad_spatial(at::ones_like(x), g, true, 0.0)));
}

const std::unordered_map<std::string, Entry>& table() {
  static const std::unordered_map<std::string, Entry> t = [] {
    std::unordered_map<std::string, Entry> m;
    // elementwise, one input
    m["Neg"] = unary(at::neg);
    m["Abs"] = unary(at::abs);
    m["Exp"] = unary(at::exp);
    m["Log"] = unary(at::log);
    m["Reciprocal"] = unary(at::reciprocal);
    m["Floor"] = unary(at::floor);
    m["Ceil"] = unary(at::ceil);
    m["Round"] = unary(at::round);  // halves to even, as ONNX
    m["Sign"] = unary(sign_keeping_nan);
    m["Sin"] = unary(at::sin);
    m["Cos"] = unary(at::cos);
    m["Tan"] = unary(at::tan);
    m["Asin"] = unary(at::asin);
    m["Acos"] = unary(at::acos);
    m["Atan"] = unary(at::atan);
    m["Sinh"] = unary(at::sinh);
    m["Cosh"] = unary(at::cosh);
    m["Asinh"] = unary(at::asinh);
    m["Acosh"] = unary(at::acosh);
    m["Atanh"] = unary(at::atanh);
    m["Sqrt"] = unary(at::sqrt);
    m["Relu"] = unary(at::relu);
    m["Sigmoid"] = unary(at::sigmoid);
    m["Tanh"] = unary(at::tanh);
    m["Erf"] = unary(at::erf);
    m["IsNaN"] = unary(at::isnan);
    m["Not"] = unary(at::logical_not);
    m["BitwiseNot"] = unary(at::bitwise_not);
    m["Identity"] = {[](const OnnxCall& c) { return one(c.x(0).clone()); }, nullptr};
    m["Softsign"] = {[](const OnnxCall& c) { return one(c.x(0) / (1 + at::abs(c.x(0)))); }, nullptr};
    m["Softplus"] = {[](const OnnxCall& c) { return one(at::log1p(at::exp(-at::abs(c.x(0)))) + at::relu(c.x(0))); }, nullptr};
    m["Mish"] = {[](const OnnxCall& c) {
                   const at::Tensor& x = c.x(0);
                   return one(x * at::tanh(at::log1p(at::exp(-at::abs(x))) + at::relu(x)));
                 },
                 nullptr};
    m["IsInf"] = {[](const OnnxCall& c) {
                    const at::Tensor& x = c.x(0);
                    at::Tensor pos = at::isposinf(x), neg = at::isneginf(x);
                    const bool p = c.a.i("detect_positive", 1) != 0, n = c.a.i("detect_negative", 1) != 0;
                    return one(p && n ? at::logical_or(pos, neg) : p ? pos : n ? neg : at::zeros_like(pos));
                  },
                  nullptr};
    m["LeakyRelu"] = {[](const OnnxCall& c) { return one(at::where(c.x(0) >= 0, c.x(0), c.x(0) * c.a.f("alpha", 0.01))); }, nullptr};
    m["Elu"] = {[](const OnnxCall& c) {
                  const at::Tensor& x = c.x(0);
                  return one(at::where(x > 0, x, at::expm1(x) * c.a.f("alpha", 1.0)));
                },
                nullptr};
    m["Selu"] = {[](const OnnxCall& c) {
                   const at::Tensor& x = c.x(0);
                   const double alpha = c.a.f("alpha", 1.67326319217681884765625), gamma = c.a.f("gamma", 1.05070102214813232421875);
                   return one(at::where(x > 0, x * gamma, at::expm1(x) * (alpha * gamma)));
                 },
                 nullptr};
    m["Celu"] = {[](const OnnxCall& c) {
                   const at::Tensor& x = c.x(0);
                   const double alpha = c.a.f("alpha", 1.0);
                   return one(at::relu(x) + at::clamp_max(at::expm1(x / alpha) * alpha, 0.0));
                 },
                 nullptr};
    m["ThresholdedRelu"] = {[](const OnnxCall& c) { return one(at::where(c.x(0) > c.a.f("alpha", 1.0), c.x(0), at::zeros_like(c.x(0)))); }, nullptr};
    m["PRelu"] = {[](const OnnxCall& c) { return one(at::where(c.x(0) < 0, c.x(0) * c.x(1), c.x(0))); }, nullptr};
    m["HardSigmoid"] = {[](const OnnxCall& c) {
                          return one(at::clamp(c.x(0) * c.a.f("alpha", 0.2) + c.a.f("beta", 0.5), 0.0, 1.0));
                        },
                        nullptr};
    m["HardSwish"] = {[](const OnnxCall& c) { return one(c.x(0) * at::clamp(c.x(0) / 6.0 + 0.5, 0.0, 1.0)); }, nullptr};
    m["Clip"] = {[](const OnnxCall& c) {
                   const at::Tensor& x = c.x(0);
                   if (c.opset < 11) {
                     const double inf = std::numeric_limits<double>::infinity(), lo = c.a.f("min", -inf), hi = c.a.f("max", inf);
                     return one(at::clamp(x, std::isnan(lo) ? -inf : lo, std::isnan(hi) ? inf : hi));
                   }
                   // A NaN bound is no bound, as in onnxruntime (whose kernel compares x with it).
                   auto bound = [&](int k) { return c.has(k) && c.in[k]->numel() > 0 && !at::isnan(*c.in[k]).any().item<bool>(); };
                   at::Tensor y = x;
                   if (bound(1)) y = at::maximum(y, c.in[1]->to(x.scalar_type()));
                   if (bound(2)) y = at::minimum(y, c.in[2]->to(x.scalar_type()));
                   return one(c.has(1) || c.has(2) ? y : x.clone());
                 },
                 nullptr};
    // elementwise, two or more inputs
    m["Add"] = binary([](const at::Tensor& a, const at::Tensor& b) { return a + b; });
    m["Sub"] = binary([](const at::Tensor& a, const at::Tensor& b) { return a - b; });
    m["Mul"] = binary(at::mul);
    m["Div"] = {[](const OnnxCall& c) {
                  const at::Tensor& a = c.x(0);
                  return one(at::isFloatingType(a.scalar_type()) ? at::div(a, c.x(1)) : at::div(a, c.x(1), "trunc"));
                },
                no_legacy_broadcast};
    m["Pow"] = {[](const OnnxCall& c) { return one(at::pow(c.x(0), c.x(1).to(c.x(0).scalar_type())).to(c.x(0).scalar_type())); },
                no_legacy_broadcast};
    m["Mod"] = {[](const OnnxCall& c) {
                  return one(c.a.i("fmod", 0) != 0 ? at::fmod(c.x(0), c.x(1)) : at::remainder(c.x(0), c.x(1)));
                },
                nullptr};
    m["BitShift"] = {[](const OnnxCall& c) {
                       return one(c.a.s("direction", "") == "LEFT" ? at::bitwise_left_shift(c.x(0), c.x(1))
                                                                   : at::bitwise_right_shift(c.x(0), c.x(1)));
                     },
                     nullptr};
    m["Equal"] = binary(at::eq);
    m["Less"] = binary(at::lt);
    m["Greater"] = binary(at::gt);
    m["LessOrEqual"] = binary(at::le);
    m["GreaterOrEqual"] = binary(at::ge);
    m["And"] = binary(at::logical_and);
    m["Or"] = binary(at::logical_or);
    m["Xor"] = binary(at::logical_xor);
    m["BitwiseAnd"] = binary(at::bitwise_and);
    m["BitwiseOr"] = binary(at::bitwise_or);
    m["BitwiseXor"] = binary(at::bitwise_xor);
    m["Min"] = variadic(at::minimum);
    m["Max"] = variadic(at::maximum);
    m["Sum"] = variadic([](const at::Tensor& a, const at::Tensor& b) { return a + b; });
    m["Mean"] = variadic([](const at::Tensor& a, const at::Tensor& b) { return a + b; }, true);
    m["Where"] = {[](const OnnxCall& c) { return one(at::where(c.x(0).to(at::kBool), c.x(1), c.x(2))); }, nullptr};
    m["MatMul"] = {[](const OnnxCall& c) { return one(at::matmul(c.x(0), c.x(1))); }, nullptr};
    m["Einsum"] = {[](const OnnxCall& c) {
                     std::string eq = c.a.s("equation", "");
                     eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
                     std::vector<at::Tensor> ops;
                     for (size_t k = 0; k < c.in.size(); ++k) ops.push_back(c.x(k));
                     return one(at::einsum(eq, ops));
                   },
                   nullptr};
    // reductions
    m["ReduceSum"] = reduce(Red::kSum, 13);
    m["ReduceMean"] = reduce(Red::kMean, 18);
    m["ReduceMax"] = reduce(Red::kMax, 18);
    m["ReduceMin"] = reduce(Red::kMin, 18);
    m["ReduceProd"] = reduce(Red::kProd, 18);
    m["ReduceL1"] = reduce(Red::kL1, 18);
    m["ReduceL2"] = reduce(Red::kL2, 18);
    m["ReduceLogSum"] = reduce(Red::kLogSum, 18);
    m["ReduceLogSumExp"] = reduce(Red::kLogSumExp, 18);
    m["ReduceSumSquare"] = reduce(Red::kSumSquare, 18);
    m["ArgMax"] = arg_reduce(true);
    m["ArgMin"] = arg_reduce(false);
    m["TopK"] = {[](const OnnxCall& c) {
                   const at::Tensor& x = c.x(0);
                   const int64_t k = c.opset >= 10 ? scalar_i(c.x(1)) : c.a.i("k", 1);
                   // Among equal values the lower index comes first (TopK-11): a stable sort gives that
                   // order, which at::topk does not promise.
                   const int64_t axis = norm_axis(c.a.i("axis", -1), x.dim());
                   auto [v, i] = at::sort(x, /*stable=*/true, axis, /*descending=*/c.a.i("largest", 1) != 0);
                   return Outs{v.narrow(axis, 0, k), i.narrow(axis, 0, k)};
                 },
                 nullptr};
    m["CumSum"] = {cumsum, nullptr};
    m["Softmax"] = softmax_like([](const at::Tensor& x, int64_t a) { return at::softmax(x, a); });
    m["LogSoftmax"] = softmax_like([](const at::Tensor& x, int64_t a) { return at::log_softmax(x, a); });
    m["Hardmax"] = softmax_like(hardmax);
    m["LpNormalization"] = {[](const OnnxCall& c) {
                              const at::Tensor& x = c.x(0);
                              const int64_t axis = norm_axis(c.a.i("axis", -1), x.dim());
                              return one(x / at::norm(x, static_cast<double>(c.a.i("p", 2)), {axis}, true));
                            },
                            nullptr};
    // normalisation
    m["InstanceNormalization"] = {[](const OnnxCall& c) {
                                    return one(at::instance_norm(c.x(0), c.x(1), c.x(2), {}, {}, true, 0.0, c.a.f("epsilon", 1e-5), false));
                                  },
                                  nullptr};
    m["GroupNormalization"] = {[](const OnnxCall& c) {
                                 const at::Tensor& x = c.x(0);
                                 const int64_t g = c.a.i("num_groups", 1), ch = x.size(1);
                                 at::Tensor s = c.x(1), b = c.x(2);
                                 if (s.numel() == g && g != ch) {  // opset 18: one scale per group
                                   s = s.repeat_interleave(ch / g);
                                   b = b.repeat_interleave(ch / g);
                                 }
                                 return one(at::group_norm(x, g, s, b, c.a.f("epsilon", 1e-5), false));
                               },
                               nullptr};
    // shape and layout
    m["Shape"] = {[](const OnnxCall& c) {
                    const int64_t r = c.x(0).dim();
                    int64_t s = c.a.i("start", 0), e = c.a.i("end", r);
                    if (s < 0) s += r;
                    if (e < 0) e += r;
                    s = std::clamp<int64_t>(s, 0, r);
                    e = std::clamp<int64_t>(e, s, r);
                    std::vector<int64_t> v(c.x(0).sizes().begin() + s, c.x(0).sizes().begin() + e);
                    return one(at::tensor(v, at::kLong));
                  },
                  nullptr};
    m["Size"] = {[](const OnnxCall& c) { return one(at::scalar_tensor(c.x(0).numel(), at::kLong)); }, nullptr};
    m["ConstantOfShape"] = {[](const OnnxCall& c) { return one(constant_of_shape(c)); }, nullptr};
    m["Reshape"] = {reshape, nullptr};
    m["Squeeze"] = {squeeze, nullptr};
    m["Unsqueeze"] = {unsqueeze, nullptr};
    m["Flatten"] = {[](const OnnxCall& c) {
                      const at::Tensor& x = c.x(0);
                      int64_t axis = c.a.i("axis", 1);
                      if (axis < 0) axis += x.dim();
                      int64_t outer = 1;
                      for (int64_t d = 0; d < axis; ++d) outer *= x.size(d);
                      return one(x.reshape({outer, x.numel() / std::max<int64_t>(outer, 1)}).clone());
                    },
                    nullptr};
    m["Transpose"] = {[](const OnnxCall& c) {
                        const at::Tensor& x = c.x(0);
                        std::vector<int64_t> perm(static_cast<size_t>(x.dim()));
                        std::iota(perm.rbegin(), perm.rend(), 0);
                        return one(x.permute(c.a.ints("perm").value_or(perm)).contiguous());
                      },
                      nullptr};
    m["Concat"] = {[](const OnnxCall& c) {
                     std::vector<at::Tensor> xs;
                     for (size_t k = 0; k < c.in.size(); ++k) xs.push_back(c.x(k));
                     return one(at::cat(xs, norm_axis(c.a.i("axis", 0), xs[0].dim())));
                   },
                   nullptr};
    m["Expand"] = {[](const OnnxCall& c) {
                     const at::Tensor& x = c.x(0);
                     return one(x.expand(broadcast(x.sizes().vec(), ints_of(c.x(1)))).contiguous());
                   },
                   nullptr};
    m["Tile"] = {[](const OnnxCall& c) { return one(c.x(0).repeat(ints_of(c.x(1)))); },
                 [](const ir::Attributes&, int64_t opset) { return opset >= 6; }};
    m["Trilu"] = {[](const OnnxCall& c) {
                    const int64_t k = c.has(1) ? scalar_i(*c.in[1]) : 0;
                    return one(c.a.i("upper", 1) != 0 ? at::triu(c.x(0), k) : at::tril(c.x(0), k));
                  },
                  nullptr};
    m["Range"] = {range, nullptr};
    m["Slice"] = {slice, nullptr};
    m["Split"] = {split, nullptr};
    m["Gather"] = {gather, nullptr};
    m["GatherElements"] = {[](const OnnxCall& c) {
                             const at::Tensor& x = c.x(0);
                             const int64_t axis = norm_axis(c.a.i("axis", 0), x.dim());
                             return one(at::gather(x, axis, normalized_index(c.x(1), x.size(axis))));
                           },
                           nullptr};
    m["GatherND"] = {gather_nd, nullptr};
    m["ScatterND"] = {scatter_nd, nullptr};
    m["ScatterElements"] = {scatter_elements, nullptr};
    m["Scatter"] = {scatter_elements, nullptr};
    m["OneHot"] = {one_hot, nullptr};
    m["NonZero"] = {[](const OnnxCall& c) { return one(at::nonzero(c.x(0)).t().contiguous()); }, nullptr};
    m["Pad"] = {pad, [](const ir::Attributes& a, int64_t) {
                  const std::string mode = a.s("mode", "constant");
                  return mode == "constant" || mode == "reflect" || mode == "edge" || mode == "wrap";
                }};
    m["DepthToSpace"] = {depth_to_space, nullptr};
    m["SpaceToDepth"] = {space_to_depth, nullptr};
    m["Resize"] = {resize, resize_accepts};
    m["ConvTranspose"] = {conv_transpose, nullptr};
    m["GlobalMaxPool"] = {[](const OnnxCall& c) {
                            std::vector<int64_t> dims;
                            for (int64_t d = 2; d < c.x(0).dim(); ++d) dims.push_back(d);
                            return one(at::amax(c.x(0), dims, true));
                          },
                          nullptr};
    m["Cast"] = {[](const OnnxCall& c) { return one(cast_to(c.x(0), onnx_scalar_type(c.a.i("to", 1)))); },
                 [](const ir::Attributes& a, int64_t) { return a.i("to", 1) != 8; }};  // not to string
    m["CastLike"] = {[](const OnnxCall& c) { return one(cast_to(c.x(0), c.x(1).scalar_type())); }, nullptr};
    m["Dropout"] = {[](const OnnxCall& c) {
                      // Training mode (an input from opset 12) drops at random: nothing to compare against.
                      if (c.has(2) && c.in[2]->numel() > 0 && c.in[2]->to(at::kBool).reshape({-1})[0].item<bool>())
                        throw Unsupported("Dropout in training mode is random");
                      return Outs{c.x(0).clone(), at::ones(c.x(0).sizes(), at::kBool)};
                    },
                    [](const ir::Attributes& a, int64_t) { return a.i("training_mode", 0) == 0; }};
    m["NegativeLogLikelihoodLoss"] = {[](const OnnxCall& c) { return one(nll(c, c.x(0), c.x(1), 2)); }, nullptr};
    m["SoftmaxCrossEntropyLoss"] = {[](const OnnxCall& c) {
                                      at::Tensor log_prob = at::log_softmax(c.x(0), 1);
                                      return Outs{nll(c, log_prob, c.x(1), 2), log_prob};
                                    },
                                    nullptr};
    m["LayerNormalization"] = {[](const OnnxCall& c) {
                                 const at::Tensor& x = c.x(0);
                                 const int64_t axis = norm_axis(c.a.i("axis", -1), x.dim());
                                 std::vector<int64_t> dims;
                                 for (int64_t d = axis; d < x.dim(); ++d) dims.push_back(d);
                                 at::Tensor mean = at::mean(x, dims, true);
                                 at::Tensor var = at::mean((x - mean) * (x - mean), dims, true);
                                 at::Tensor inv = at::rsqrt(var + c.a.f("epsilon", 1e-5));
                                 at::Tensor y = (x - mean) * inv * c.x(1);
                                 if (c.has(2)) y = y + *c.in[2];
                                 return Outs{y, mean, inv};
                               },
                               nullptr};
    m["GridSample"] = {[](const OnnxCall& c) {
                         const std::string mode = c.a.s("mode", c.opset >= 20 ? "linear" : "bilinear");
                         const std::string pad = c.a.s("padding_mode", "zeros");
                         const int64_t interp = mode == "linear" || mode == "bilinear" ? 0 : mode == "nearest" ? 1 : 2;
                         const int64_t padding = pad == "zeros" ? 0 : pad == "border" ? 1 : 2;
                         if (interp != 0 && c.x(0).dim() != 4) throw Unsupported("nearest or cubic GridSample beyond 2-D");
                         return one(at::grid_sampler(c.x(0), c.x(1).to(c.x(0).scalar_type()), interp, padding,
                                                     c.a.i("align_corners", 0) != 0));
                       },
                       nullptr};
    m["DequantizeLinear"] = {[](const OnnxCall& c) {
                               const at::Tensor& x = c.x(0);
                               const int64_t axis = c.a.i("axis", 1);
                               at::Tensor scale = along_axis(c.x(1), x, axis);
                               at::Tensor v = x.to(at::kDouble);
                               if (c.has(2)) v = v - along_axis(*c.in[2], x, axis).to(at::kDouble);
                               return one((v * scale.to(at::kDouble)).to(c.x(1).scalar_type()));
                             },
                             unblocked};
    m["QuantizeLinear"] = {[](const OnnxCall& c) {
                             const at::Tensor& x = c.x(0);
                             const int64_t axis = c.a.i("axis", 1);
                             at::ScalarType to = c.has(2) ? c.in[2]->scalar_type()
                                                          : c.a.i("output_dtype", 2) == 3 ? at::kChar : at::kByte;
                             auto [lo, hi] = int_range(to);
                             // x / scale rounds in float32, as runtimes and the ONNX reference compute it.
                             at::Tensor v = at::round(x.to(at::kFloat) / along_axis(c.x(1), x, axis).to(at::kFloat)).to(at::kDouble);
                             if (c.has(2)) v = v + along_axis(*c.in[2], x, axis).to(at::kDouble);
                             return one(at::clamp(v, lo, hi).to(to));
                           },
                           unblocked};
    m["DynamicQuantizeLinear"] = {[](const OnnxCall& c) {
                                    at::Tensor x = c.x(0).to(at::kFloat);  // float32 arithmetic, as the spec's function body
                                    const float mx = std::max(0.0f, x.max().item<float>()), mn = std::min(0.0f, x.min().item<float>());
                                    const float scale = (mx - mn) / 255.0f;
                                    const float zp = scale == 0 ? 0.0f : std::clamp(std::nearbyint(-mn / scale), 0.0f, 255.0f);
                                    at::Tensor y = scale == 0 ? at::full_like(x, zp) : at::clamp(at::round(x / scale) + zp, 0.0, 255.0);
                                    return Outs{y.to(at::kByte), at::scalar_tensor(scale, at::kFloat), at::scalar_tensor(zp, at::kByte)};
                                  },
                                  nullptr};
    // (A - a_zero_point) x (B - b_zero_point) in int32: exact in double for int8 operands (|a·b|
    // <= 2^16 per product, so K up to 2^37 terms). a's zero point is a scalar or one per row of A,
    // b's a scalar or one per column of B.
    m["MatMulInteger"] = {[](const OnnxCall& c) {
                            at::Tensor a = c.x(0).to(at::kDouble), b = c.x(1).to(at::kDouble);
                            if (c.has(2)) {
                              at::Tensor z = c.in[2]->to(at::kDouble);
                              a = a - (z.dim() == 1 && z.numel() > 1 ? z.unsqueeze(-1) : z);
                            }
                            if (c.has(3)) b = b - c.in[3]->to(at::kDouble);
                            return one(at::matmul(a, b).round().to(at::kInt));
                          },
                          nullptr};
    m["EyeLike"] = {[](const OnnxCall& c) {
                      const at::Tensor& x = c.x(0);
                      const int64_t k = c.a.i("k", 0);
                      at::Tensor rows = at::arange(x.size(0), at::kLong).unsqueeze(1), cols = at::arange(x.size(1), at::kLong).unsqueeze(0);
                      at::Tensor eye = (cols - rows) == k;
                      return one(c.a.has("dtype") ? eye.to(onnx_scalar_type(c.a.i("dtype", 1))) : eye.to(x.scalar_type()));
                    },
                    nullptr};
    m["Det"] = {[](const OnnxCall& c) { return one(at::linalg_det(c.x(0))); }, nullptr};
    m["Shrink"] = {[](const OnnxCall& c) {
                     const at::Tensor& x = c.x(0);
                     const double l = c.a.f("lambd", 0.5), b = c.a.f("bias", 0.0);
                     at::Tensor v = x.to(at::kDouble);
                     at::Tensor y = at::where(v < -l, v + b, at::where(v > l, v - b, at::zeros_like(v)));
                     return one(y.to(x.scalar_type()));
                   },
                   nullptr};
    m["MeanVarianceNormalization"] = {[](const OnnxCall& c) {
                                        const at::Tensor& x = c.x(0);
                                        auto axes = norm_axes(c.a.ints("axes").value_or(std::vector<int64_t>{0, 2, 3}), x.dim());
                                        at::Tensor mean = at::mean(x, axes, true);
                                        at::Tensor var = at::mean(x * x, axes, true) - mean * mean;
                                        return one((x - mean) / (at::sqrt(var) + 1e-9));
                                      },
                                      nullptr};
    m["LRN"] = {[](const OnnxCall& c) { return one(lrn(c)); }, nullptr};
    m["ReverseSequence"] = {[](const OnnxCall& c) {
                              const at::Tensor& x = c.x(0);
                              const int64_t batch = c.a.i("batch_axis", 1), time = c.a.i("time_axis", 0);
                              auto lens = ints_of(c.x(1));
                              at::Tensor y = x.clone();
                              for (int64_t b = 0; b < x.size(batch); ++b) {
                                const int64_t n = std::clamp<int64_t>(lens[static_cast<size_t>(b)], 0, x.size(time));
                                if (n <= 1) continue;
                                at::Tensor src = x.select(batch, b);
                                const int64_t t = time > batch ? time - 1 : time;
                                y.select(batch, b).narrow(t, 0, n).copy_(src.narrow(t, 0, n).flip({t}));
                              }
                              return one(y);
                            },
                            nullptr};
    for (const char* w : {"HannWindow", "HammingWindow", "BlackmanWindow"}) {
      const std::string name = w;
      m[name] = {[name](const OnnxCall& c) {
                   const int64_t n = scalar_i(c.x(0));
                   const double d = static_cast<double>(c.a.i("periodic", 1) != 0 ? n : n - 1);
                   at::Tensor k = at::arange(n, at::kDouble) * (2.0 * M_PI / d);
                   at::Tensor y = name == "HannWindow"      ? 0.5 - 0.5 * at::cos(k)
                                  : name == "HammingWindow" ? 25.0 / 46.0 - (21.0 / 46.0) * at::cos(k)
                                                            : 0.42 - 0.5 * at::cos(k) + 0.08 * at::cos(2.0 * k);
                   return one(y.to(onnx_scalar_type(c.a.i("output_datatype", 1))));
                 },
                 nullptr};
    }
    m["CenterCropPad"] = {[](const OnnxCall& c) {
                            at::Tensor y = c.x(0);
                            auto target = ints_of(c.x(1));
                            auto axes = c.a.ints("axes").value_or(std::vector<int64_t>{});
                            if (axes.empty())
                              for (int64_t d = 0; d < y.dim(); ++d) axes.push_back(d);
                            for (size_t k = 0; k < axes.size(); ++k) {
                              const int64_t a = norm_axis(axes[k], y.dim()), dim = y.size(a), want = target[k];
                              if (want < dim) {
                                y = y.narrow(a, (dim - want) / 2, want);
                              } else if (want > dim) {
                                std::vector<int64_t> grow(2 * static_cast<size_t>(y.dim() - a), 0);
                                grow[grow.size() - 2] = (want - dim) / 2;
                                grow[grow.size() - 1] = want - dim - (want - dim) / 2;
                                y = at::constant_pad_nd(y, grow, 0.0);
                              }
                            }
                            return one(y.contiguous());
                          },
                          nullptr};
    m["Compress"] = {[](const OnnxCall& c) {
                       at::Tensor x = c.x(0);
                       at::Tensor cond = c.x(1).to(at::kBool).reshape({-1});
                       int64_t axis = 0;
                       if (c.a.has("axis")) axis = norm_axis(c.a.i("axis", 0), x.dim());
                       else x = x.reshape({-1});
                       cond = cond.narrow(0, 0, std::min<int64_t>(cond.numel(), x.size(axis)));
                       return one(x.index_select(axis, at::nonzero(cond).reshape({-1})));
                     },
                     nullptr};
    m["LpPool"] = {[](const OnnxCall& c) {
                     const at::Tensor& x = c.x(0);
                     const int64_t nsp = x.dim() - 2;
                     auto k = c.a.ints("kernel_shape").value_or(std::vector<int64_t>{});
                     if (static_cast<int64_t>(k.size()) != nsp) throw std::invalid_argument("kernel_shape has the wrong length");
                     auto st = c.a.ints("strides").value_or(std::vector<int64_t>(static_cast<size_t>(nsp), 1));
                     auto dil = c.a.ints("dilations").value_or(std::vector<int64_t>(static_cast<size_t>(nsp), 1));
                     auto pads = c.a.ints("pads").value_or(std::vector<int64_t>(2 * static_cast<size_t>(nsp), 0));
                     const std::string ap = c.a.s("auto_pad", "NOTSET");
                     for (int64_t i = 0; i < nsp; ++i) {
                       const int64_t in = x.size(2 + i), ext = (k[i] - 1) * dil[i] + 1;
                       if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
                         const int64_t out = (in + st[i] - 1) / st[i];
                         const int64_t total = std::max<int64_t>(0, (out - 1) * st[i] + ext - in);
                         pads[i] = ap == "SAME_UPPER" ? total / 2 : total - total / 2;
                         pads[nsp + i] = total - pads[i];
                       } else if (ap == "VALID") {
                         pads[i] = pads[nsp + i] = 0;
                       }
                       if (c.a.i("ceil_mode", 0) != 0) {  // extra end padding for the last partial window
                         const int64_t span = in + pads[i] + pads[nsp + i] - ext;
                         if (span % st[i] != 0) pads[nsp + i] += st[i] - span % st[i];
                       }
                     }
                     const double p = static_cast<double>(c.a.i("p", 2));
                     at::Tensor xp = at::pow(at::abs(x), p);
                     std::vector<int64_t> aten;
                     for (int64_t i = nsp; i-- > 0;) {
                       aten.push_back(pads[i]);
                       aten.push_back(pads[nsp + i]);
                     }
                     xp = at::constant_pad_nd(xp, aten, 0.0);
                     std::vector<int64_t> wshape{x.size(1), 1};
                     wshape.insert(wshape.end(), k.begin(), k.end());
                     at::Tensor sum = at::convolution(xp, at::ones(wshape, xp.options()), c10::nullopt, st, std::vector<int64_t>(nsp, 0),
                                                      dil, false, std::vector<int64_t>(nsp, 0), x.size(1));
                     return one(at::pow(sum, 1.0 / p));
                   },
                   nullptr};
    m["MaxPool"] = {max_pool, [](const ir::Attributes& a, int64_t opset) { return opset >= 8; }};
    m["AveragePool"] = {average_pool, [](const ir::Attributes& a, int64_t opset) { return opset >= 7; }};
    return m;
  }();
  return t;
}

const Entry* find(const ir::OpaqueParams& p) {
  if (!p.domain.empty() && p.domain != "ai.onnx") return nullptr;
  auto it = table().find(p.op_type);
  return it == table().end() ? nullptr : &it->second;
}

const ir::Attributes& attrs_of(const ir::OpaqueParams& p) {
  static const ir::Attributes kNone;
  return p.attrs ? *p.attrs : kNone;
}

// The node's declared dtype, as the executor computes it: float outputs stay in the wide
// compute type (float32 or float64), every other dtype is exact.
at::Tensor conform(const at::Tensor& y, ir::DType declared) {
  if (ir::is_float(declared)) {
    if (at::isFloatingType(y.scalar_type())) return ir::is_half(declared) && y.scalar_type() != at::kDouble ? y.to(at::kFloat) : y;
    return y.to(declared == ir::DType::kFloat64 ? at::kDouble : at::kFloat);
  }
  const at::ScalarType want = to_scalar_type(declared);
  return y.scalar_type() == want ? y : y.to(want);
}

}  // namespace

const at::Tensor& OnnxCall::x(size_t k) const {
  if (!has(k)) throw std::invalid_argument("required input " + std::to_string(k) + " is missing");
  return *in[k];
}

bool onnx_op_supported(const ir::OpaqueParams& p) {
  const Entry* e = find(p);
  return e && (!e->accepts || e->accepts(attrs_of(p), p.since_version));
}

Expected<std::vector<at::Tensor>> run_onnx_op(const ir::Node& n, const std::vector<at::Tensor>& in) {
  const auto& p = std::get<ir::OpaqueParams>(n.params);
  const Entry* e = find(p);
  if (!e || (e->accepts && !e->accepts(attrs_of(p), p.since_version)))
    return Error::unsupported("reference executor: cannot run ONNX op " + p.op_type + (e ? " with these attributes" : "") +
                              " (kept opaque)");
  OnnxCall call{attrs_of(p), {}, p.since_version};
  call.num_outputs = p.output_slots.empty() ? n.outputs.size() : static_cast<size_t>(p.output_slots.back() + 1);
  for (size_t k = 0; k < in.size(); ++k) {
    const size_t slot = k < p.input_slots.size() ? static_cast<size_t>(p.input_slots[k]) : k;
    if (call.in.size() <= slot) call.in.resize(slot + 1);
    call.in[slot] = in[k];
  }
  Outs outs;
  try {
    outs = e->run(call);
  } catch (const Unsupported& u) {
    return Error::unsupported("reference executor: " + p.op_type + ": " + u.what());
  }
  // Only the outputs the node uses, in its order.
  Outs used;
  const size_t count = !n.outputs.empty() ? n.outputs.size() : !p.output_slots.empty() ? p.output_slots.size() : outs.size();
  for (size_t k = 0; k < count; ++k) {
    const size_t slot = k < p.output_slots.size() ? static_cast<size_t>(p.output_slots[k]) : k;
    if (slot >= outs.size()) return Error::internal("reference executor: " + p.op_type + " produced too few outputs");
    used.push_back(k < n.outputs.size() ? conform(outs[slot], n.outputs[k].dtype) : outs[slot]);
  }
  return used;
}

at::Tensor index_pad(const at::Tensor& x, const std::vector<int64_t>& pads, const std::string& mode) {
  at::Tensor y = x;
  const int64_t r = x.dim();
  for (int64_t d = 0; d < r; ++d) {
    const int64_t b = pads[d], e = pads[r + d], n = y.size(d);
    if (b == 0 && e == 0) continue;
    if (n == 0) throw std::invalid_argument(mode + " padding of an empty axis");
    std::vector<int64_t> idx;
    for (int64_t i = -b; i < n + e; ++i) {
      int64_t j = i;
      if (mode == "edge") {
        j = std::clamp<int64_t>(i, 0, n - 1);
      } else if (mode == "wrap") {
        j = ((i % n) + n) % n;
      } else if (n > 1) {  // reflect: the edge element is not repeated
        const int64_t period = 2 * (n - 1);
        j = ((i % period) + period) % period;
        if (j >= n) j = period - j;
      } else {
        j = 0;
      }
      idx.push_back(j);
    }
    y = y.index_select(d, at::tensor(idx, at::kLong));
  }
  return y;
}

}  // namespace rlflow::exec::detail
