#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "rlflow/ir/shape_inference.h"

using namespace rlflow;
using namespace rlflow::ir;

namespace {

TensorType f32(Shape s) { return {DType::kFloat32, std::move(s)}; }
TensorType i64(Shape s) { return {DType::kInt64, std::move(s)}; }

// The single output type of a successful inference; fails the test otherwise.
TensorType infer1(OpKind k, const OpParams& p, const std::vector<TensorType>& in) {
  auto r = infer_types(k, p, in);
  EXPECT_TRUE(r.ok()) << op_name(k) << ": " << (r.ok() ? "" : r.error().message);
  if (!r.ok()) return {};
  EXPECT_EQ(r->size(), 1u);
  return r->empty() ? TensorType{} : r->front();
}

// Asserts inference fails and that the message starts with the op's name.
std::string expect_error(OpKind k, const OpParams& p, const std::vector<TensorType>& in) {
  auto r = infer_types(k, p, in);
  EXPECT_FALSE(r.ok()) << op_name(k) << " unexpectedly inferred " << (r.ok() && !r->empty() ? r->front().str() : "");
  if (r.ok()) return {};
  EXPECT_EQ(r.error().code, ErrorCode::kBadInput);
  const std::string prefix = std::string(op_name(k)) + ":";
  EXPECT_EQ(r.error().message.rfind(prefix, 0), 0u) << "error does not name the op: " << r.error().message;
  return r.error().message;
}

ConvParams conv_params(std::vector<int64_t> strides, std::vector<int64_t> pads, std::vector<int64_t> dil, int64_t group = 1) {
  ConvParams p;
  p.strides = std::move(strides);
  p.pads = std::move(pads);
  p.dilations = std::move(dil);
  p.group = group;
  return p;
}

PoolParams pool_params(std::vector<int64_t> k, std::vector<int64_t> s, std::vector<int64_t> pads, bool ceil) {
  PoolParams p;
  p.kernel = std::move(k);
  p.strides = std::move(s);
  p.pads = std::move(pads);
  p.ceil_mode = ceil;
  return p;
}

}  // namespace

// ---- helpers ----

TEST(ShapeInference, BroadcastShapes) {
  EXPECT_EQ(*broadcast_shapes({2, 1, 4}, {3, 1}), (Shape{2, 3, 4}));
  EXPECT_EQ(*broadcast_shapes({}, {5}), (Shape{5}));
  EXPECT_EQ(*broadcast_shapes({1}, {}), (Shape{1}));
  EXPECT_EQ(*broadcast_shapes({0, 3}, {1, 3}), (Shape{0, 3}));
  auto bad = broadcast_shapes({2, 3}, {4, 3});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("[2,3]"), std::string::npos) << bad.error().message;
}

TEST(ShapeInference, NormalizeAxis) {
  EXPECT_EQ(*normalize_axis(-1, 3), 2);
  EXPECT_EQ(*normalize_axis(0, 3), 0);
  EXPECT_EQ(*normalize_axis(-3, 3), 0);
  EXPECT_FALSE(normalize_axis(3, 3).ok());
  EXPECT_FALSE(normalize_axis(-4, 3).ok());
  EXPECT_EQ(*normalize_axis(0, 0), 0);  // a scalar still has axis 0 for Gather/Concat-style ops
}

TEST(ShapeInference, NumOutputs) {
  EXPECT_EQ(num_outputs(OpKind::kSplit, SplitParams{0, {1, 2, 3}}), 3);
  EXPECT_EQ(num_outputs(OpKind::kRelu, {}), 1);
}

// ---- sources and opaque ----

TEST(ShapeInference, SourcesAndOpaqueAreNotInferred) {
  expect_error(OpKind::kInput, {}, {});
  expect_error(OpKind::kWeight, {}, {});
  expect_error(OpKind::kOpaque, OpaqueParams{}, {f32({2})});
}

TEST(ShapeInference, Constant) {
  ConstantParams p;
  p.shape = {2, 3};
  p.dtype = DType::kInt64;
  p.value = 7;
  EXPECT_EQ(infer1(OpKind::kConstant, p, {}), i64({2, 3}));
  expect_error(OpKind::kConstant, {}, {});  // missing parameters
}

// ---- Conv ----

TEST(ShapeInference, ConvBasic) {
  auto t = infer1(OpKind::kConv, conv_params({1, 1}, {1, 1, 1, 1}, {1, 1}), {f32({2, 3, 8, 8}), f32({16, 3, 3, 3})});
  EXPECT_EQ(t, f32({2, 16, 8, 8}));
  // Bias of the right shape.
  t = infer1(OpKind::kConv, conv_params({1, 1}, {0, 0, 0, 0}, {1, 1}), {f32({1, 3, 5, 5}), f32({4, 3, 3, 3}), f32({4})});
  EXPECT_EQ(t, f32({1, 4, 3, 3}));
}

TEST(ShapeInference, ConvStridesDilationsAsymmetricPadsGroups) {
  // H: (10 + 1 + 2 - 2*(3-1) - 1) / 2 + 1 = 5;  W: (10 + 0 + 1 - 1*(3-1) - 1) / 1 + 1 = 9.
  auto p = conv_params({2, 1}, {1, 0, 2, 1}, {2, 1}, 2);
  EXPECT_EQ(infer1(OpKind::kConv, p, {f32({1, 4, 10, 10}), f32({8, 2, 3, 3})}), f32({1, 8, 5, 9}));
  // Depthwise: group == channels.
  EXPECT_EQ(infer1(OpKind::kConv, conv_params({2, 2}, {1, 1, 1, 1}, {1, 1}, 6), {f32({1, 6, 7, 7}), f32({6, 1, 3, 3})}),
            f32({1, 6, 4, 4}));
  // 1-D and 3-D convolutions.
  EXPECT_EQ(infer1(OpKind::kConv, conv_params({3}, {0, 2}, {1}), {f32({1, 2, 10}), f32({5, 2, 4})}), f32({1, 5, 3}));
  EXPECT_EQ(infer1(OpKind::kConv, conv_params({1, 1, 1}, {0, 0, 0, 0, 0, 0}, {1, 1, 1}),
                   {f32({1, 2, 4, 5, 6}), f32({3, 2, 1, 2, 3})}),
            f32({1, 3, 4, 4, 4}));
}

TEST(ShapeInference, ConvErrors) {
  // Weight expects 2 * 2 = 4 input channels, the input has 6.
  auto m = expect_error(OpKind::kConv, conv_params({1, 1}, {0, 0, 0, 0}, {1, 1}, 2), {f32({1, 6, 5, 5}), f32({4, 2, 3, 3})});
  EXPECT_NE(m.find("input channels"), std::string::npos) << m;
  // Group does not divide the output channels.
  expect_error(OpKind::kConv, conv_params({1, 1}, {0, 0, 0, 0}, {1, 1}, 2), {f32({1, 4, 5, 5}), f32({3, 2, 3, 3})});
  // Wrong pad / stride / dilation counts.
  expect_error(OpKind::kConv, conv_params({1, 1}, {0, 0}, {1, 1}), {f32({1, 3, 5, 5}), f32({4, 3, 3, 3})});
  expect_error(OpKind::kConv, conv_params({1}, {0, 0, 0, 0}, {1, 1}), {f32({1, 3, 5, 5}), f32({4, 3, 3, 3})});
  expect_error(OpKind::kConv, conv_params({1, 1}, {0, 0, 0, 0}, {1}), {f32({1, 3, 5, 5}), f32({4, 3, 3, 3})});
  expect_error(OpKind::kConv, conv_params({0, 1}, {0, 0, 0, 0}, {1, 1}), {f32({1, 3, 5, 5}), f32({4, 3, 3, 3})});
  expect_error(OpKind::kConv, conv_params({1, 1}, {-1, 0, 0, 0}, {1, 1}), {f32({1, 3, 5, 5}), f32({4, 3, 3, 3})});
  // Kernel larger than the padded input.
  expect_error(OpKind::kConv, conv_params({1, 1}, {0, 0, 0, 0}, {1, 1}), {f32({1, 3, 2, 2}), f32({4, 3, 3, 3})});
  // Bias of the wrong shape; rank mismatch; wrong input count.
  expect_error(OpKind::kConv, conv_params({1, 1}, {0, 0, 0, 0}, {1, 1}), {f32({1, 3, 5, 5}), f32({4, 3, 3, 3}), f32({3})});
  expect_error(OpKind::kConv, conv_params({1, 1}, {0, 0, 0, 0}, {1, 1}), {f32({1, 3, 5, 5}), f32({4, 3, 3})});
  expect_error(OpKind::kConv, conv_params({1, 1}, {0, 0, 0, 0}, {1, 1}), {f32({1, 3, 5, 5})});
  expect_error(OpKind::kConv, {}, {f32({1, 3, 5, 5}), f32({4, 3, 3, 3})});  // missing parameters
}

// ---- pools ----

TEST(ShapeInference, PoolFloorAndCeil) {
  // 5 wide, kernel 2, stride 2: floor gives 2 windows, ceil gives 3 (the last one overhangs).
  EXPECT_EQ(infer1(OpKind::kMaxPool, pool_params({2, 2}, {2, 2}, {0, 0, 0, 0}, false), {f32({1, 3, 5, 5})}), f32({1, 3, 2, 2}));
  EXPECT_EQ(infer1(OpKind::kMaxPool, pool_params({2, 2}, {2, 2}, {0, 0, 0, 0}, true), {f32({1, 3, 5, 5})}), f32({1, 3, 3, 3}));
  EXPECT_EQ(infer1(OpKind::kAveragePool, pool_params({3, 3}, {2, 2}, {1, 1, 1, 1}, false), {f32({2, 4, 8, 8})}),
            f32({2, 4, 4, 4}));
  // Asymmetric pads: H (6 + 1 + 0 - 3) / 1 + 1 = 5, W (6 + 0 + 2 - 3) / 1 + 1 = 6.
  EXPECT_EQ(infer1(OpKind::kAveragePool, pool_params({3, 3}, {1, 1}, {1, 0, 0, 2}, false), {f32({1, 1, 6, 6})}),
            f32({1, 1, 5, 6}));
  // 1-D pooling.
  EXPECT_EQ(infer1(OpKind::kMaxPool, pool_params({3}, {2}, {0, 0}, true), {f32({1, 2, 8})}), f32({1, 2, 4}));
}

TEST(ShapeInference, PoolCeilDropsWindowStartingInRightPadding) {
  // 3 wide, kernel 2, stride 2, pads 1/1: ceil((3+2-2)/2)+1 = 3, but the third window would start
  // at padded position 4, inside the right padding, so ONNX drops it.
  EXPECT_EQ(infer1(OpKind::kAveragePool, pool_params({2, 2}, {2, 2}, {1, 1, 1, 1}, true), {f32({1, 1, 3, 3})}),
            f32({1, 1, 2, 2}));
  // 4 wide, kernel 3, stride 2, pads 1/1: the third window starts on the last real element: kept.
  EXPECT_EQ(infer1(OpKind::kAveragePool, pool_params({1, 3}, {1, 2}, {0, 1, 0, 1}, true), {f32({1, 1, 1, 4})}),
            f32({1, 1, 1, 3}));
}

TEST(ShapeInference, PoolErrors) {
  expect_error(OpKind::kMaxPool, pool_params({2, 2}, {1, 1}, {0, 0, 0, 0}, false), {f32({1, 8})});
  expect_error(OpKind::kMaxPool, pool_params({2}, {1, 1}, {0, 0, 0, 0}, false), {f32({1, 1, 4, 4})});
  auto m = expect_error(OpKind::kMaxPool, pool_params({2, 2}, {1, 1}, {2, 0, 0, 0}, false), {f32({1, 1, 4, 4})});
  EXPECT_NE(m.find("pad"), std::string::npos) << m;
  expect_error(OpKind::kAveragePool, pool_params({5, 5}, {1, 1}, {0, 0, 0, 0}, false), {f32({1, 1, 4, 4})});
  expect_error(OpKind::kAveragePool, {}, {f32({1, 1, 4, 4})});
}

TEST(ShapeInference, GlobalAveragePool) {
  EXPECT_EQ(infer1(OpKind::kGlobalAveragePool, {}, {f32({2, 3, 5, 7})}), f32({2, 3, 1, 1}));
  expect_error(OpKind::kGlobalAveragePool, {}, {f32({2, 3})});
}

// ---- MatMul / Gemm ----

TEST(ShapeInference, MatMul) {
  EXPECT_EQ(infer1(OpKind::kMatMul, {}, {f32({2, 3}), f32({3, 4})}), f32({2, 4}));
  // 1-D operands: the inserted dimension is removed again.
  EXPECT_EQ(infer1(OpKind::kMatMul, {}, {f32({3}), f32({3})}), f32({}));
  EXPECT_EQ(infer1(OpKind::kMatMul, {}, {f32({3}), f32({2, 3, 4})}), f32({2, 4}));
  EXPECT_EQ(infer1(OpKind::kMatMul, {}, {f32({2, 5, 3}), f32({3})}), f32({2, 5}));
  // Batched broadcasting of the leading dimensions.
  EXPECT_EQ(infer1(OpKind::kMatMul, {}, {f32({2, 1, 3, 4}), f32({5, 4, 6})}), f32({2, 5, 3, 6}));
  EXPECT_EQ(infer1(OpKind::kMatMul, {}, {f32({7, 3, 4}), f32({4, 2})}), f32({7, 3, 2}));
}

TEST(ShapeInference, MatMulErrors) {
  auto m = expect_error(OpKind::kMatMul, {}, {f32({2, 3}), f32({4, 5})});
  EXPECT_NE(m.find("inner"), std::string::npos) << m;
  expect_error(OpKind::kMatMul, {}, {f32({2, 3, 4}), f32({3, 4, 5})});  // batch 2 vs 3
  expect_error(OpKind::kMatMul, {}, {f32({}), f32({3})});
  expect_error(OpKind::kMatMul, {}, {f32({2, 3}), TensorType{DType::kFloat64, {3, 2}}});
  expect_error(OpKind::kMatMul, {}, {f32({2, 3})});
}

TEST(ShapeInference, GemmTransposes) {
  GemmParams p;
  EXPECT_EQ(infer1(OpKind::kGemm, p, {f32({4, 3}), f32({3, 5})}), f32({4, 5}));
  p.trans_a = true;
  p.trans_b = true;
  // A^T: [3, 4] -> M = 3, K = 4; B^T: [5, 4] -> K = 4, N = 5.
  EXPECT_EQ(infer1(OpKind::kGemm, p, {f32({4, 3}), f32({5, 4})}), f32({3, 5}));
  // C broadcasts to [M, N] from [N], [M, 1] or a scalar.
  EXPECT_EQ(infer1(OpKind::kGemm, p, {f32({4, 3}), f32({5, 4}), f32({5})}), f32({3, 5}));
  EXPECT_EQ(infer1(OpKind::kGemm, p, {f32({4, 3}), f32({5, 4}), f32({3, 1})}), f32({3, 5}));
  EXPECT_EQ(infer1(OpKind::kGemm, p, {f32({4, 3}), f32({5, 4}), f32({})}), f32({3, 5}));
  GemmParams tb;
  tb.trans_b = true;
  EXPECT_EQ(infer1(OpKind::kGemm, tb, {f32({2, 8}), f32({10, 8})}), f32({2, 10}));
}

TEST(ShapeInference, GemmErrors) {
  GemmParams p;
  expect_error(OpKind::kGemm, p, {f32({4, 3}), f32({4, 5})});
  expect_error(OpKind::kGemm, p, {f32({4, 3, 1}), f32({3, 5})});
  auto m = expect_error(OpKind::kGemm, p, {f32({4, 3}), f32({3, 5}), f32({4})});
  EXPECT_NE(m.find("C"), std::string::npos) << m;
  // C may not enlarge the result.
  expect_error(OpKind::kGemm, p, {f32({4, 3}), f32({3, 5}), f32({2, 4, 5})});
  expect_error(OpKind::kGemm, {}, {f32({4, 3}), f32({3, 5})});
}

// ---- elementwise ----

TEST(ShapeInference, BinaryBroadcasting) {
  for (OpKind k : {OpKind::kAdd, OpKind::kSub, OpKind::kMul, OpKind::kDiv, OpKind::kPow}) {
    EXPECT_EQ(infer1(k, {}, {f32({2, 1, 4}), f32({3, 1})}), f32({2, 3, 4})) << op_name(k);
    EXPECT_EQ(infer1(k, {}, {f32({5}), f32({})}), f32({5})) << op_name(k);
    auto m = expect_error(k, {}, {f32({2, 3}), f32({4, 5})});
    EXPECT_NE(m.find("broadcast"), std::string::npos) << m;
  }
  // Pow may raise to an exponent of another dtype; the others need equal dtypes.
  EXPECT_EQ(infer1(OpKind::kPow, {}, {f32({2}), i64({})}), f32({2}));
  expect_error(OpKind::kAdd, {}, {f32({2}), i64({2})});
  expect_error(OpKind::kMul, {}, {f32({2})});
}

TEST(ShapeInference, UnaryKeepsType) {
  for (OpKind k : {OpKind::kRelu, OpKind::kSigmoid, OpKind::kTanh, OpKind::kErf, OpKind::kSqrt}) {
    EXPECT_EQ(infer1(k, {}, {f32({2, 3})}), f32({2, 3})) << op_name(k);
    expect_error(k, {}, {f32({2}), f32({2})});
  }
  EXPECT_EQ(infer1(OpKind::kClip, ClipParams{0.0, 6.0}, {f32({4})}), f32({4}));
  EXPECT_EQ(infer1(OpKind::kScalarMul, ScalarParams{2.0}, {TensorType{DType::kFloat64, {3}}}), (TensorType{DType::kFloat64, {3}}));
}

TEST(ShapeInference, Cast) {
  EXPECT_EQ(infer1(OpKind::kCast, CastParams{DType::kInt64}, {f32({2, 3})}), i64({2, 3}));
  EXPECT_EQ(infer1(OpKind::kCast, CastParams{DType::kFloat32}, {i64({})}), f32({}));
  expect_error(OpKind::kCast, {}, {f32({2})});
  expect_error(OpKind::kCast, CastParams{DType::kInt64}, {});
}

// ---- normalisation and reductions ----

TEST(ShapeInference, Softmax) {
  EXPECT_EQ(infer1(OpKind::kSoftmax, AxisParams{1}, {f32({2, 5})}), f32({2, 5}));
  EXPECT_EQ(infer1(OpKind::kSoftmax, AxisParams{0}, {f32({2, 5})}), f32({2, 5}));
  expect_error(OpKind::kSoftmax, AxisParams{2}, {f32({2, 5})});
  expect_error(OpKind::kSoftmax, AxisParams{-1}, {f32({2, 5})});  // axes are normalised before they get here
  expect_error(OpKind::kSoftmax, {}, {f32({2, 5})});
}

TEST(ShapeInference, LayerNorm) {
  NormParams p{1, 1e-5};
  EXPECT_EQ(infer1(OpKind::kLayerNorm, p, {f32({2, 3, 4}), f32({3, 4}), f32({3, 4})}), f32({2, 3, 4}));
  EXPECT_EQ(infer1(OpKind::kLayerNorm, p, {f32({2, 3, 4}), f32({4})}), f32({2, 3, 4}));  // broadcastable scale
  NormParams last{2, 1e-5};
  EXPECT_EQ(infer1(OpKind::kLayerNorm, last, {f32({2, 3, 4}), f32({4}), f32({4})}), f32({2, 3, 4}));
  auto m = expect_error(OpKind::kLayerNorm, last, {f32({2, 3, 4}), f32({5})});
  EXPECT_NE(m.find("scale"), std::string::npos) << m;
  expect_error(OpKind::kLayerNorm, last, {f32({2, 3, 4}), f32({3, 4})});  // scale wider than the normalised shape
  expect_error(OpKind::kLayerNorm, NormParams{3, 1e-5}, {f32({2, 3, 4}), f32({4})});
  expect_error(OpKind::kLayerNorm, last, {f32({2, 3, 4})});
}

TEST(ShapeInference, BatchNorm) {
  NormParams p{1, 1e-5};
  const auto c = f32({3});
  EXPECT_EQ(infer1(OpKind::kBatchNorm, p, {f32({2, 3, 4, 4}), c, c, c, c}), f32({2, 3, 4, 4}));
  EXPECT_EQ(infer1(OpKind::kBatchNorm, p, {f32({2, 3}), c, c, c, c}), f32({2, 3}));
  auto m = expect_error(OpKind::kBatchNorm, p, {f32({2, 3, 4, 4}), c, c, f32({4}), c});
  EXPECT_NE(m.find("[C]"), std::string::npos) << m;
  expect_error(OpKind::kBatchNorm, p, {f32({2, 3, 4, 4}), c, c, c});
  expect_error(OpKind::kBatchNorm, p, {f32({3}), c, c, c, c});
}

TEST(ShapeInference, ReduceMeanKeepdims) {
  EXPECT_EQ(infer1(OpKind::kReduceMean, AxesParams{{1}, true}, {f32({2, 3, 4})}), f32({2, 1, 4}));
  EXPECT_EQ(infer1(OpKind::kReduceMean, AxesParams{{1}, false}, {f32({2, 3, 4})}), f32({2, 4}));
  EXPECT_EQ(infer1(OpKind::kReduceMean, AxesParams{{0, 2}, true}, {f32({2, 3, 4})}), f32({1, 3, 1}));
  EXPECT_EQ(infer1(OpKind::kReduceMean, AxesParams{{0, 2}, false}, {f32({2, 3, 4})}), f32({3}));
  // No axes: reduce everything.
  EXPECT_EQ(infer1(OpKind::kReduceMean, AxesParams{{}, true}, {f32({2, 3, 4})}), f32({1, 1, 1}));
  EXPECT_EQ(infer1(OpKind::kReduceMean, AxesParams{{}, false}, {f32({2, 3, 4})}), f32({}));
  expect_error(OpKind::kReduceMean, AxesParams{{3}, true}, {f32({2, 3, 4})});
  expect_error(OpKind::kReduceMean, AxesParams{{-1}, true}, {f32({2, 3, 4})});
  expect_error(OpKind::kReduceMean, {}, {f32({2, 3, 4})});
}

// ---- data movement ----

TEST(ShapeInference, Concat) {
  EXPECT_EQ(infer1(OpKind::kConcat, AxisParams{1}, {f32({2, 3}), f32({2, 5}), f32({2, 1})}), f32({2, 9}));
  EXPECT_EQ(infer1(OpKind::kConcat, AxisParams{0}, {f32({2, 3})}), f32({2, 3}));
  auto m = expect_error(OpKind::kConcat, AxisParams{1}, {f32({2, 3}), f32({3, 5})});
  EXPECT_NE(m.find("off the axis"), std::string::npos) << m;
  expect_error(OpKind::kConcat, AxisParams{0}, {f32({2, 3}), f32({2})});
  expect_error(OpKind::kConcat, AxisParams{0}, {f32({2, 3}), i64({2, 3})});
  expect_error(OpKind::kConcat, AxisParams{2}, {f32({2, 3}), f32({2, 3})});
  expect_error(OpKind::kConcat, AxisParams{0}, {});
}

TEST(ShapeInference, Split) {
  auto r = infer_types(OpKind::kSplit, SplitParams{1, {1, 2, 3}}, {f32({4, 6})});
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0], f32({4, 1}));
  EXPECT_EQ((*r)[1], f32({4, 2}));
  EXPECT_EQ((*r)[2], f32({4, 3}));
  auto m = expect_error(OpKind::kSplit, SplitParams{1, {1, 2}}, {f32({4, 6})});
  EXPECT_NE(m.find("sum"), std::string::npos) << m;
  expect_error(OpKind::kSplit, SplitParams{1, {7, -1}}, {f32({4, 6})});
  expect_error(OpKind::kSplit, SplitParams{2, {6}}, {f32({4, 6})});
  expect_error(OpKind::kSplit, SplitParams{0, {}}, {f32({0, 6})});
}

TEST(ShapeInference, Transpose) {
  EXPECT_EQ(infer1(OpKind::kTranspose, TransposeParams{{2, 0, 1}}, {f32({2, 3, 4})}), f32({4, 2, 3}));
  EXPECT_EQ(infer1(OpKind::kTranspose, TransposeParams{{1, 0}}, {i64({5, 7})}), i64({7, 5}));
  expect_error(OpKind::kTranspose, TransposeParams{{0, 0, 1}}, {f32({2, 3, 4})});
  expect_error(OpKind::kTranspose, TransposeParams{{0, 1}}, {f32({2, 3, 4})});
  expect_error(OpKind::kTranspose, TransposeParams{{0, 1, 3}}, {f32({2, 3, 4})});
}

TEST(ShapeInference, Reshape) {
  EXPECT_EQ(infer1(OpKind::kReshape, ReshapeParams{{6, 4}}, {f32({2, 3, 4})}), f32({6, 4}));
  EXPECT_EQ(infer1(OpKind::kReshape, ReshapeParams{{}}, {f32({1, 1})}), f32({}));
  auto m = expect_error(OpKind::kReshape, ReshapeParams{{5, 5}}, {f32({2, 3, 4})});
  EXPECT_NE(m.find("cannot reshape"), std::string::npos) << m;
  expect_error(OpKind::kReshape, ReshapeParams{{-1, 4}}, {f32({2, 3, 4})});  // must be resolved
  expect_error(OpKind::kReshape, {}, {f32({2, 3, 4})});
}

TEST(ShapeInference, Flatten) {
  EXPECT_EQ(infer1(OpKind::kFlatten, AxisParams{1}, {f32({2, 3, 4})}), f32({2, 12}));
  EXPECT_EQ(infer1(OpKind::kFlatten, AxisParams{0}, {f32({2, 3, 4})}), f32({1, 24}));
  EXPECT_EQ(infer1(OpKind::kFlatten, AxisParams{3}, {f32({2, 3, 4})}), f32({24, 1}));
  expect_error(OpKind::kFlatten, AxisParams{4}, {f32({2, 3, 4})});
}

TEST(ShapeInference, Pad) {
  EXPECT_EQ(infer1(OpKind::kPad, PadParams{{1, 0, 2, 3}}, {f32({2, 3})}), f32({5, 6}));
  // Negative pads crop.
  EXPECT_EQ(infer1(OpKind::kPad, PadParams{{0, -1, 0, -1}}, {f32({2, 3})}), f32({2, 1}));
  expect_error(OpKind::kPad, PadParams{{0, -2, 0, -2}}, {f32({2, 3})});
  auto m = expect_error(OpKind::kPad, PadParams{{1, 1}}, {f32({2, 3})});
  EXPECT_NE(m.find("2*rank"), std::string::npos) << m;
}

TEST(ShapeInference, SliceNormalisedPositiveSteps) {
  SliceParams p{{2}, {8}, {1}, {3}};  // 2, 5
  EXPECT_EQ(infer1(OpKind::kSlice, p, {f32({4, 10})}), f32({4, 2}));
  p = SliceParams{{0, 1}, {4, 9}, {0, 1}, {1, 2}};  // 4 rows; 1,3,5,7
  EXPECT_EQ(infer1(OpKind::kSlice, p, {f32({4, 10})}), f32({4, 4}));
  p = SliceParams{{5}, {5}, {1}, {1}};  // empty
  EXPECT_EQ(infer1(OpKind::kSlice, p, {f32({4, 10})}), f32({4, 0}));
  p = SliceParams{{3}, {100}, {1}, {1}};  // ends clamp to the extent
  EXPECT_EQ(infer1(OpKind::kSlice, p, {f32({4, 10})}), f32({4, 7}));
}

TEST(ShapeInference, SliceNegativeStepWithEndMinusOne) {
  // Normalised form: absolute positions; end -1 means "through index 0".
  SliceParams p{{9}, {-1}, {1}, {-1}};  // the whole axis reversed
  EXPECT_EQ(infer1(OpKind::kSlice, p, {f32({4, 10})}), f32({4, 10}));
  p = SliceParams{{8}, {1}, {1}, {-3}};  // 8, 5, 2
  EXPECT_EQ(infer1(OpKind::kSlice, p, {f32({4, 10})}), f32({4, 3}));
  p = SliceParams{{3}, {-1}, {0}, {-2}};  // 3, 1
  EXPECT_EQ(infer1(OpKind::kSlice, p, {f32({4, 10})}), f32({2, 10}));
  p = SliceParams{{2}, {5}, {1}, {-1}};  // start before end with a negative step: empty
  EXPECT_EQ(infer1(OpKind::kSlice, p, {f32({4, 10})}), f32({4, 0}));
}

TEST(ShapeInference, SliceErrors) {
  expect_error(OpKind::kSlice, SliceParams{{0}, {1}, {1}, {0}}, {f32({4, 10})});      // step 0
  expect_error(OpKind::kSlice, SliceParams{{0}, {1}, {2}, {1}}, {f32({4, 10})});      // axis out of range
  expect_error(OpKind::kSlice, SliceParams{{0, 1}, {1}, {1}, {1}}, {f32({4, 10})});   // lengths differ
  expect_error(OpKind::kSlice, {}, {f32({4, 10})});
}

TEST(ShapeInference, Gather) {
  EXPECT_EQ(infer1(OpKind::kGather, AxisParams{1}, {f32({5, 6, 7}), i64({2, 3})}), f32({5, 2, 3, 7}));
  EXPECT_EQ(infer1(OpKind::kGather, AxisParams{0}, {f32({5, 6}), i64({})}), f32({6}));
  EXPECT_EQ(infer1(OpKind::kGather, AxisParams{0}, {i64({3}), TensorType{DType::kInt32, {2, 2}}}), i64({2, 2}));
}

TEST(ShapeInference, GatherErrors) {
  auto m = expect_error(OpKind::kGather, AxisParams{0}, {f32({5, 6}), f32({2})});
  EXPECT_NE(m.find("indices"), std::string::npos) << m;
  expect_error(OpKind::kGather, AxisParams{2}, {f32({5, 6}), i64({2})});
  expect_error(OpKind::kGather, AxisParams{0}, {f32({5, 6})});
}

TEST(ShapeInference, SqueezeUnsqueeze) {
  EXPECT_EQ(infer1(OpKind::kSqueeze, AxesParams{{0, 2}}, {f32({1, 3, 1, 2})}), f32({3, 2}));
  EXPECT_EQ(infer1(OpKind::kUnsqueeze, AxesParams{{0, 3}}, {f32({3, 2})}), f32({1, 3, 2, 1}));
  EXPECT_EQ(infer1(OpKind::kUnsqueeze, AxesParams{{0}}, {f32({})}), f32({1}));
  EXPECT_EQ(infer1(OpKind::kUnsqueeze, AxesParams{{1, 2}}, {f32({4})}), f32({4, 1, 1}));
  auto m = expect_error(OpKind::kSqueeze, AxesParams{{1}}, {f32({1, 3})});
  EXPECT_NE(m.find("extent 3"), std::string::npos) << m;
  expect_error(OpKind::kSqueeze, AxesParams{{2}}, {f32({1, 3})});  // axis past the rank
  expect_error(OpKind::kUnsqueeze, AxesParams{{4}}, {f32({3, 2})});
}

TEST(ShapeInference, Enlarge) {
  EXPECT_EQ(infer1(OpKind::kEnlarge, EnlargeParams{{3, 3}}, {f32({8, 4, 1, 1})}), f32({8, 4, 3, 3}));
  EXPECT_EQ(infer1(OpKind::kEnlarge, EnlargeParams{{5, 3}}, {f32({8, 4, 3, 3})}), f32({8, 4, 5, 3}));
  auto m = expect_error(OpKind::kEnlarge, EnlargeParams{{2, 2}}, {f32({8, 4, 1, 1})});
  EXPECT_NE(m.find("even"), std::string::npos) << m;
  expect_error(OpKind::kEnlarge, EnlargeParams{{1, 1}}, {f32({8, 4, 3, 3})});  // shrinking
  expect_error(OpKind::kEnlarge, EnlargeParams{{3}}, {f32({8, 4, 1, 1})});
}

TEST(ShapeInference, WrongInputCountNamesTheOp) {
  auto m = expect_error(OpKind::kTranspose, TransposeParams{{0}}, {f32({2}), f32({2})});
  EXPECT_NE(m.find("expects 1 inputs, got 2"), std::string::npos) << m;
}

// Issue 41 (field-mutation fuzzer): a float16 bias or a float64 weight on a float32 Conv reached the
// exporter's checker and exited 5; inference refuses it as a bad input naming the dtypes.
TEST(ShapeInference, ConvInputsOfDifferentDtypesAreABadInput) {
  const auto p = conv_params({1, 1}, {0, 0, 0, 0}, {1, 1});
  TensorType half_bias{DType::kFloat16, {4}};
  EXPECT_NE(expect_error(OpKind::kConv, p, {f32({1, 3, 5, 5}), f32({4, 3, 3, 3}), half_bias}).find("dtypes differ"), std::string::npos);
  TensorType double_w{DType::kFloat64, {4, 3, 3, 3}};
  EXPECT_NE(expect_error(OpKind::kConv, p, {f32({1, 3, 5, 5}), double_w}).find("dtypes differ"), std::string::npos);
}
