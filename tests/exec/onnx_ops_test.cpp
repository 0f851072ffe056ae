// The executor's ONNX op table (ops the IR carries verbatim): values worked out by hand from the
// ONNX operator specification. The ONNX backend node tests (scripts/checks/node_tests) cover the breadth.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "rlflow/exec/executor.h"
#include "rlflow/ir/builder.h"

using namespace rlflow;
using namespace rlflow::ir;
using rlflow::exec::Executor;

namespace {

TensorPtr f32(Shape s, std::vector<float> v) { return Tensor::from_vector<float>(DType::kFloat32, std::move(s), v); }
TensorPtr i64(Shape s, std::vector<int64_t> v) { return Tensor::from_vector<int64_t>(DType::kInt64, std::move(s), v); }

struct Op {
  std::string type;
  std::shared_ptr<Attributes> attrs = std::make_shared<Attributes>();
  int64_t opset = 17;
  Op& set(const std::string& name, AttrValue v) {
    attrs->set(name, std::move(v));
    return *this;
  }
};

// Runs one opaque node on weights; `slots` gives each input's ONNX slot (default 0..n-1).
std::vector<TensorPtr> run(const Op& op, const std::vector<TensorPtr>& inputs, const std::vector<TensorType>& outs,
                           std::vector<int64_t> slots = {}) {
  ModelMeta meta;
  meta.opsets = {{"", op.opset}};
  GraphBuilder b(meta);
  OpaqueParams p;
  p.op_type = op.type;
  p.since_version = op.opset;
  p.attrs = op.attrs;
  std::vector<ValueRef> ins;
  for (size_t k = 0; k < inputs.size(); ++k) {
    ins.push_back(b.weight("w" + std::to_string(k), inputs[k]));
    p.input_slots.push_back(slots.empty() ? static_cast<int64_t>(k) : slots[k]);
  }
  for (size_t k = 0; k < outs.size(); ++k) p.output_slots.push_back(static_cast<int64_t>(k));
  auto ys = b.op_with_types(OpKind::kOpaque, ins, p, outs, op.type);
  for (size_t k = 0; k < ys.size(); ++k) b.output(ys[k], "y" + std::to_string(k));
  EXPECT_TRUE(Executor::supports(b.graph().node(ys[0].node))) << op.type;
  auto r = Executor().run(b.graph(), {});
  EXPECT_TRUE(r.ok()) << op.type << ": " << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : std::vector<TensorPtr>{};
}

std::vector<double> vals(const TensorPtr& t) { return t ? t->as_double() : std::vector<double>{}; }

TEST(OnnxOps, WhereEqualAndExpandBroadcast) {
  auto cond = run({"Equal"}, {i64({2, 1}, {0, 1}), i64({1}, {0})}, {{DType::kBool, {2, 1}}});
  ASSERT_EQ(cond.size(), 1u);
  EXPECT_EQ(cond[0]->dtype(), DType::kBool);
  EXPECT_EQ(vals(cond[0]), (std::vector<double>{1, 0}));
  auto w = run({"Where"}, {cond[0], f32({1, 3}, {1, 2, 3}), f32({}, {-1})}, {{DType::kFloat32, {2, 3}}});
  EXPECT_EQ(vals(w[0]), (std::vector<double>{1, 2, 3, -1, -1, -1}));
  // Expand broadcasts both ways: [3,1] with shape [2,1,4] gives [2,3,4].
  auto e = run({"Expand"}, {f32({3, 1}, {1, 2, 3}), i64({3}, {2, 1, 4})}, {{DType::kFloat32, {2, 3, 4}}});
  EXPECT_EQ(e[0]->shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(vals(e[0])[4], 2.0);
}

TEST(OnnxOps, TriluCausalMaskAndCumSum) {
  Op tril{"Trilu"};
  tril.set("upper", int64_t{0});
  auto t = run(tril, {f32({3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 1})}, {{DType::kFloat32, {3, 3}}});
  EXPECT_EQ(vals(t[0]), (std::vector<double>{1, 0, 0, 1, 1, 0, 1, 1, 1}));
  auto upper = run({"Trilu"}, {f32({2, 2}, {1, 2, 3, 4}), i64({}, {1})}, {{DType::kFloat32, {2, 2}}});
  EXPECT_EQ(vals(upper[0]), (std::vector<double>{0, 2, 0, 0}));
  Op cs{"CumSum"};
  cs.set("exclusive", int64_t{1}).set("reverse", int64_t{1});
  auto c = run(cs, {f32({4}, {1, 2, 3, 4}), i64({}, {0})}, {{DType::kFloat32, {4}}});
  EXPECT_EQ(vals(c[0]), (std::vector<double>{9, 7, 4, 0}));
}

TEST(OnnxOps, ModFollowsTheDivisorSignUnlessFmod) {
  auto m = run({"Mod"}, {i64({2}, {-7, 7}), i64({2}, {3, -3})}, {{DType::kInt64, {2}}});
  EXPECT_EQ(vals(m[0]), (std::vector<double>{2, -2}));
  Op fm{"Mod"};
  fm.set("fmod", int64_t{1});
  auto f = run(fm, {f32({2}, {-7, 7}), f32({2}, {3, -3})}, {{DType::kFloat32, {2}}});
  EXPECT_EQ(vals(f[0]), (std::vector<double>{-1, 1}));
}

TEST(OnnxOps, RangeCountsAsTheSpecSays) {
  auto r = run({"Range"}, {f32({}, {1}), f32({}, {2}), f32({}, {0.3f})}, {{DType::kFloat32, {4}}});
  ASSERT_EQ(r[0]->numel(), 4);  // ceil((2 - 1) / 0.3) = 4
  EXPECT_NEAR(vals(r[0])[3], 1.9, 1e-6);
  auto down = run({"Range"}, {i64({}, {10}), i64({}, {4}), i64({}, {-3})}, {{DType::kInt64, {2}}});
  EXPECT_EQ(vals(down[0]), (std::vector<double>{10, 7}));
}

TEST(OnnxOps, ReductionsReadAxesFromAttributesOrInputs) {
  Op old{"ReduceMax", std::make_shared<Attributes>(), 13};
  old.set("axes", std::vector<int64_t>{1}).set("keepdims", int64_t{0});
  auto a = run(old, {f32({2, 3}, {1, 5, 2, 7, 0, 3})}, {{DType::kFloat32, {2}}});
  EXPECT_EQ(vals(a[0]), (std::vector<double>{5, 7}));
  Op now{"ReduceSum", std::make_shared<Attributes>(), 13};
  auto s = run(now, {f32({2, 3}, {1, 5, 2, 7, 0, 3}), i64({1}, {0})}, {{DType::kFloat32, {1, 3}}});
  EXPECT_EQ(vals(s[0]), (std::vector<double>{8, 5, 5}));
  Op last{"ArgMax"};
  last.set("axis", int64_t{1}).set("select_last_index", int64_t{1});
  auto am = run(last, {f32({1, 4}, {3, 1, 3, 0})}, {{DType::kInt64, {1, 1}}});
  EXPECT_EQ(vals(am[0]), (std::vector<double>{2}));
}

TEST(OnnxOps, GatherNDAndScatterNDWithBatchDims) {
  Op g{"GatherND"};
  g.set("batch_dims", int64_t{1});
  // data [2,2,2], indices [2,1]: batch b picks row indices[b] of data[b].
  auto r = run(g, {f32({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7}), i64({2, 1}, {1, 0})}, {{DType::kFloat32, {2, 2}}});
  EXPECT_EQ(vals(r[0]), (std::vector<double>{2, 3, 4, 5}));
  Op s{"ScatterND"};
  s.set("reduction", std::string("add"));
  auto sc = run(s, {f32({4}, {1, 1, 1, 1}), i64({3, 1}, {1, 1, -1}), f32({3}, {10, 20, 5})}, {{DType::kFloat32, {4}}});
  EXPECT_EQ(vals(sc[0]), (std::vector<double>{1, 31, 1, 6}));
}

TEST(OnnxOps, OneHotTakesNegativeIndicesAndAnAxis) {
  Op o{"OneHot"};
  o.set("axis", int64_t{0});
  auto r = run(o, {i64({2}, {1, -1}), i64({}, {3}), f32({2}, {0, 5})}, {{DType::kFloat32, {3, 2}}});
  EXPECT_EQ(vals(r[0]), (std::vector<double>{0, 0, 5, 0, 0, 5}));
}

TEST(OnnxOps, SliceWithNegativeStepsAndClampedBounds) {
  const auto max = std::numeric_limits<int64_t>::max(), min = std::numeric_limits<int64_t>::min();
  auto r = run({"Slice"}, {f32({5}, {0, 1, 2, 3, 4}), i64({1}, {max}), i64({1}, {min}), i64({1}, {0}), i64({1}, {-2})},
               {{DType::kFloat32, {3}}});
  EXPECT_EQ(vals(r[0]), (std::vector<double>{4, 2, 0}));
}

TEST(OnnxOps, ResizeNearestAndLinear) {
  Op nearest{"Resize"};
  nearest.set("coordinate_transformation_mode", std::string("asymmetric")).set("nearest_mode", std::string("floor"));
  auto n = run(nearest, {f32({1, 1, 1, 2}, {1, 2}), f32({4}, {1, 1, 1, 2})}, {{DType::kFloat32, {1, 1, 1, 4}}}, {0, 2});
  EXPECT_EQ(vals(n[0]), (std::vector<double>{1, 1, 2, 2}));
  Op linear{"Resize"};
  linear.set("mode", std::string("linear")).set("coordinate_transformation_mode", std::string("align_corners"));
  auto l = run(linear, {f32({1, 1, 1, 2}, {0, 3}), i64({4}, {1, 1, 1, 4})}, {{DType::kFloat32, {1, 1, 1, 4}}}, {0, 3});
  EXPECT_EQ(vals(l[0]), (std::vector<double>{0, 1, 2, 3}));
}

TEST(OnnxOps, ConvTransposeWithAsymmetricPadsAndOutputPadding) {
  // One channel, kernel [1,1,2] of ones, stride 2: each input lands twice, side by side.
  Op ct{"ConvTranspose"};
  ct.set("strides", std::vector<int64_t>{2}).set("pads", std::vector<int64_t>{1, 0}).set("output_padding", std::vector<int64_t>{1});
  auto r = run(ct, {f32({1, 1, 3}, {1, 2, 3}), f32({1, 1, 2}, {1, 1}), f32({1}, {10})}, {{DType::kFloat32, {1, 1, 6}}});
  // Full result 1 1 2 2 3 3, one zero of output padding, the first element cropped; plus the bias.
  EXPECT_EQ(vals(r[0]), (std::vector<double>{11, 12, 12, 13, 13, 10}));
}

TEST(OnnxOps, EinsumAndSplitIntoUnevenParts) {
  Op e{"Einsum"};
  e.set("equation", std::string("ij, jk -> ik"));
  auto r = run(e, {f32({1, 2}, {1, 2}), f32({2, 1}, {3, 4})}, {{DType::kFloat32, {1, 1}}});
  EXPECT_EQ(vals(r[0]), (std::vector<double>{11}));
  Op s{"Split", std::make_shared<Attributes>(), 18};
  s.set("num_outputs", int64_t{2});
  auto parts = run(s, {f32({3}, {1, 2, 3})}, {{DType::kFloat32, {2}}, {DType::kFloat32, {1}}});
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(vals(parts[1]), (std::vector<double>{3}));
}

TEST(OnnxOps, UnknownOpsAndUnimplementedAttributesAreNotSupported) {
  GraphBuilder b;
  auto x = b.input("x", {DType::kFloat32, {4}});
  OpaqueParams unknown{"com.example", "Foo", "", 1, {0}, {0}};
  auto y = b.op_with_types(OpKind::kOpaque, {x}, unknown, {{DType::kFloat32, {4}}});
  EXPECT_FALSE(Executor::supports(b.graph().node(y[0].node)));
  OpaqueParams crop{"", "Resize", "", 17, {0}, {0}};
  auto a = std::make_shared<Attributes>();
  a->set("antialias", int64_t{1});
  crop.attrs = a;
  auto z = b.op_with_types(OpKind::kOpaque, {x}, crop, {{DType::kFloat32, {4}}});
  EXPECT_FALSE(Executor::supports(b.graph().node(z[0].node)));
}

}  // namespace

// Issue 41, case 7: where the spec leaves a value open, the executor computes what onnxruntime
// does (scripts/checks/check_folding.py tests this over random constant graphs against onnxruntime).
TEST(OnnxOpsLikeOnnxruntime, SignOfNaNIsNaNAndEmptyMaxIsMinusInfinity) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  auto s = run({"Sign"}, {f32({3}, {nan, -2.f, 0.f})}, {{DType::kFloat32, {3}}});
  ASSERT_EQ(s.size(), 1u);
  EXPECT_TRUE(std::isnan(vals(s[0])[0]));
  EXPECT_EQ(vals(s[0])[1], -1.0);
  Op mx{"ReduceMax"};
  mx.opset = 18;
  mx.set("keepdims", int64_t{0});
  auto m = run(mx, {f32({0, 2}, {}), i64({1}, {0})}, {{DType::kFloat32, {2}}});
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(vals(m[0]), (std::vector<double>{-inf, -inf}));
  Op mean{"ReduceMean"};
  mean.opset = 18;
  auto z = run(mean, {f32({0}, {})}, {{DType::kFloat32, {1}}});
  ASSERT_EQ(z.size(), 1u);
  EXPECT_EQ(vals(z[0]), (std::vector<double>{0.0}));  // onnxruntime: 0, not NaN
  auto c = run({"Clip"}, {f32({3}, {-5.f, 0.5f, 5.f}), f32({}, {nan}), f32({}, {1.f})}, {{DType::kFloat32, {3}}});
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(vals(c[0]), (std::vector<double>{-5.0, 0.5, 1.0}));  // a NaN bound is no bound
}

// A NaN where onnxruntime's answer depends on its position, and an integer sum that overflows:
// no value is claimed (the node then stays in the graph for the runtime to compute).
TEST(OnnxOpsLikeOnnxruntime, NoValueClaimedWhereOnnxruntimeIsPositionDependent) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  ModelMeta meta;
  meta.opsets = {{"", 18}};
  for (const std::string op : {"ArgMax", "ReduceMax", "ReduceSum"}) {
    SCOPED_TRACE(op);
    GraphBuilder b(meta);
    OpaqueParams p;
    p.op_type = op;
    p.since_version = 18;
    p.attrs = std::make_shared<Attributes>();
    p.input_slots = {0};
    p.output_slots = {0};
    const bool sum = op == "ReduceSum";
    auto x = sum ? b.weight("x", i64({2}, {std::numeric_limits<int64_t>::max(), 1})) : b.weight("x", f32({3}, {1.f, nan, 2.f}));
    const TensorType out{op == "ArgMax" ? DType::kInt64 : sum ? DType::kInt64 : DType::kFloat32, {1}};
    auto y = b.op_with_types(OpKind::kOpaque, {x}, p, {out}, op);
    b.output(y[0], "y");
    auto r = Executor().run(b.graph(), {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::kUnsupported) << r.error().message;
  }
}
