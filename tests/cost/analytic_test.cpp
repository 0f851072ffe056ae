// The analytic model against hand computation, its monotonicity, signatures, node_costs and
// device profiles.
#include <gtest/gtest.h>

#include <fstream>

#include "common.h"
#include "rlflow/cost/analytic.h"
#include "rlflow/ir/builder.h"
#include "rlflow/ir/summary.h"

using namespace rlflow;
using namespace rlflow::cost;
using namespace rlflow::cost::testing;
using ir::OpKind;

namespace {

// Round numbers so every expected cost below can be checked by hand.
DeviceProfile toy_profile() {
  DeviceProfile p;
  p.name = "toy";
  p.device = "cpu";
  p.conv = {100, 1};     // GFLOP/s
  p.matmul = {400, 0.5}; // 200 effective
  p.vector = {10, 1};
  p.special = {0.5, 1};
  p.pool = {4, 0.5};
  p.stream = {10, 1};    // GB/s
  p.layout = {10, 0.5};  // 5 effective
  p.kernel_overhead_us = 5;
  p.view_overhead_us = 1;
  return p;
}

double cost_of(AnalyticCostModel& m, const OpSignature& s) {
  auto c = m.op_cost(s);
  EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.error().message);
  return c.ok() ? *c : -1;
}

TEST(Analytic, ConvIsComputeBound) {
  AnalyticCostModel m(toy_profile());
  auto s = sig(OpKind::kConv, conv2d(3), {{{1, 64, 56, 56}}, {{64, 64, 3, 3}, true}});
  // FLOPs = 2 * (64*56*56 outputs) * (64*3*3) = 231,211,008 -> 2.31211008 ms at 100 GFLOP/s.
  // Bytes = 2 * 802,816 + 147,456 = 1,753,088 -> 0.1753088 ms at 10 GB/s: compute wins.
  const auto w = op_work(s);
  EXPECT_DOUBLE_EQ(w.flops, 231211008.0);
  EXPECT_DOUBLE_EQ(w.bytes, 1753088.0);
  EXPECT_NEAR(cost_of(m, s), 0.005 + 2.31211008, 1e-12);
}

TEST(Analytic, ElementwiseIsMemoryBound) {
  AnalyticCostModel m(toy_profile());
  // Relu over 200,704 floats: 0.0200704 ms of compute, 1,605,632 bytes = 0.1605632 ms.
  EXPECT_NEAR(cost_of(m, sig(OpKind::kRelu, {}, {{{1, 64, 56, 56}}})), 0.005 + 0.1605632, 1e-12);
  // Add with a broadcast bias reads the bias once: (98,304 + 768 + 98,304) * 4 bytes.
  EXPECT_NEAR(cost_of(m, sig(OpKind::kAdd, {}, {{{1, 128, 768}}, {{768}, true}})), 0.005 + 789504.0 / 10 * 1e-6, 1e-12);
}

TEST(Analytic, MatMulUsesTheMatMulRate) {
  AnalyticCostModel m(toy_profile());
  // 2*128*768*768 = 150,994,944 FLOPs at 200 GFLOP/s = 0.75497472 ms; 3,145,728 bytes = 0.3145728 ms.
  EXPECT_NEAR(cost_of(m, sig(OpKind::kMatMul, {}, {{{128, 768}}, {{768, 768}, true}})), 0.005 + 0.75497472, 1e-12);
}

TEST(Analytic, OpClasses) {
  AnalyticCostModel m(toy_profile());
  // A pointwise conv is a GEMM: 2 * 256*56*56 * 64 = 102,760,448 FLOPs at the matmul rate (200).
  const auto pw = sig(OpKind::kConv, conv2d(1), {{{1, 64, 56, 56}}, {{256, 64, 1, 1}, true}});
  EXPECT_EQ(op_work(pw).compute, ComputeClass::kMatMul);
  EXPECT_NEAR(cost_of(m, pw), 0.005 + 102760448.0 / 200 * 1e-6, 1e-12);
  EXPECT_EQ(op_work(sig(OpKind::kConv, conv2d(1, 2), {{{1, 64, 56, 56}}, {{256, 64, 1, 1}, true}})).compute, ComputeClass::kConv);
  // Erf: 393,216 FLOPs at 0.5 GFLOP/s = 0.786432 ms beats 3,145,728 bytes at 10 GB/s = 0.3145728 ms.
  const auto erf = sig(OpKind::kErf, {}, {{{1, 128, 3072}}});
  EXPECT_EQ(op_work(erf).compute, ComputeClass::kSpecial);
  EXPECT_NEAR(cost_of(m, erf), 0.005 + 0.786432, 1e-12);
  // MaxPool 3x3/2: 64*56*56 outputs * 9 = 1,806,336 FLOPs at 2 effective GFLOP/s = 0.903168 ms.
  ir::PoolParams pool;
  pool.kernel = {3, 3};
  pool.strides = {2, 2};
  pool.pads = {1, 1, 1, 1};
  const auto mp = sig(OpKind::kMaxPool, pool, {{{1, 64, 112, 112}}});
  EXPECT_EQ(op_work(mp).compute, ComputeClass::kPool);
  EXPECT_NEAR(cost_of(m, mp), 0.005 + 0.903168, 1e-12);
}

TEST(Analytic, LayoutAndViewOps) {
  AnalyticCostModel m(toy_profile());
  // Transpose moves 2 * 98,304 floats at the layout rate (5 GB/s).
  EXPECT_NEAR(cost_of(m, sig(OpKind::kTranspose, ir::TransposeParams{{0, 2, 1, 3}}, {{{1, 128, 12, 64}}})),
              0.005 + 786432.0 / 5 * 1e-6, 1e-12);
  // Slice reads only what it keeps: 2 * 768 floats.
  EXPECT_NEAR(cost_of(m, sig(OpKind::kSlice, ir::SliceParams{{0}, {1}, {1}, {1}}, {{{1, 197, 768}}})), 0.005 + 6144.0 / 5 * 1e-6,
              1e-12);
  // A reshape is a view: only the view overhead.
  EXPECT_DOUBLE_EQ(cost_of(m, sig(OpKind::kReshape, ir::ReshapeParams{{1, 128, 12, 64}}, {{{1, 128, 768}}})), 0.001);
}

TEST(Analytic, OpaqueGetsTheFixedCost) {
  AnalyticCostModel m(toy_profile());
  OpSignature s;
  s.kind = OpKind::kOpaque;
  s.params = ir::OpaqueParams{"", "Foo", "", 1, {0}, {0}};
  s.inputs = {{ir::DType::kFloat32, {4}}};
  s.outputs = {{ir::DType::kFloat32, {4}}};
  EXPECT_EQ(cost_of(m, s), kOpaqueCostMs);
}

TEST(Analytic, Monotonicity) {
  for (const char* name : {"h100", "h200", "cpu-2core"}) {
    auto p = load_profile(name);
    ASSERT_TRUE(p.ok()) << p.error().message;
    AnalyticCostModel m(*p);
    SCOPED_TRACE(name);
    auto conv = [&](int64_t c, int64_t hw, ir::Activation act = ir::Activation::kNone) {
      return cost_of(m, sig(OpKind::kConv, conv2d(3, 1, act), {{{1, c, hw, hw}}, {{c, c, 3, 3}, true}, {{c}, true}}));
    };
    EXPECT_LT(conv(64, 28), conv(64, 56));
    EXPECT_LT(conv(64, 56), conv(128, 56));
    // Fusing the activation saves a whole memory pass and a kernel.
    const double relu = cost_of(m, sig(OpKind::kRelu, {}, {{{1, 64, 56, 56}}}));
    EXPECT_GT(relu, 0);
    EXPECT_LT(conv(64, 56, ir::Activation::kRelu), conv(64, 56) + relu);
    EXPECT_LE(conv(64, 56, ir::Activation::kRelu), conv(64, 56) * 1.000001);
    // Bigger GEMMs and elementwise ops cost more.
    EXPECT_LT(cost_of(m, sig(OpKind::kMatMul, {}, {{{128, 768}}, {{768, 768}, true}})),
              cost_of(m, sig(OpKind::kMatMul, {}, {{{128, 768}}, {{768, 3072}, true}})));
    EXPECT_LT(cost_of(m, sig(OpKind::kAdd, {}, {{{1, 64, 56, 56}}, {{1, 64, 56, 56}}})),
              cost_of(m, sig(OpKind::kAdd, {}, {{{1, 256, 56, 56}}, {{1, 256, 56, 56}}})));
  }
}

TEST(Analytic, DeterministicFingerprint) {
  AnalyticCostModel a(toy_profile()), b(toy_profile());
  EXPECT_EQ(a.device_fingerprint(), b.device_fingerprint());
  auto p = toy_profile();
  p.stream.efficiency = 0.9;
  EXPECT_NE(AnalyticCostModel(p).device_fingerprint(), a.device_fingerprint());
}

// ---- signatures ----

ir::Graph small_cnn(int64_t channels, ir::Activation act = ir::Activation::kNone) {
  ir::GraphBuilder b;
  auto x = b.input("x", {ir::DType::kFloat32, {1, 3, 16, 16}});
  auto w1 = b.weight("w1", ir::random_tensor({channels, 3, 3, 3}, 1));
  auto w2 = b.weight("w2", ir::random_tensor({channels, channels, 1, 1}, 2));
  auto y = b.conv(x, w1, {1, 1}, {1, 1, 1, 1}, act);
  if (act == ir::Activation::kNone) y = b.relu(y);
  y = b.conv(y, w2, {1, 1}, {0, 0, 0, 0});
  b.output(y, "y");
  return std::move(b).build();
}

// x·W, Transpose, Softmax: a MatMul with a constant operand and two layout/normalisation ops.
ir::Graph small_matmul_softmax() {
  ir::GraphBuilder b;
  auto x = b.input("x", {ir::DType::kFloat32, {2, 8, 32}});
  auto w = b.weight("w", ir::random_tensor({32, 16}, 3));
  auto m = b.matmul(x, w);
  auto t = b.op(OpKind::kTranspose, {m}, ir::TransposeParams{{0, 2, 1}});
  auto s = b.op(OpKind::kSoftmax, {t}, ir::AxisParams{2});
  b.output(s, "y");
  return std::move(b).build();
}

TEST(Signature, FlopsMatchNodeFlops) {
  for (const auto& g : {small_cnn(8), small_matmul_softmax()}) {
    const auto constant = constant_nodes(g);
    for (size_t i = 0; i < g.size(); ++i) {
      const auto id = static_cast<ir::NodeId>(i);
      const auto k = g.node(id).kind;
      if (k == OpKind::kInput || k == OpKind::kWeight) continue;
      EXPECT_DOUBLE_EQ(signature_flops(OpSignature::of(g, id, constant)), ir::node_flops(g, id)) << ir::node_label(g, id);
    }
  }
}

TEST(Signature, HashOfTheGraphNodeEqualsTheBuiltSignaturesHash) {
  // The memo keys costs by hash_of (no allocation); caches and recorded tables key by hash().
  int checked = 0;
  for (const auto& g : {small_cnn(8), small_cnn(4, ir::Activation::kRelu), small_matmul_softmax()}) {
    const auto constant = constant_nodes(g);
    for (size_t i = 0; i < g.size(); ++i) {
      const auto id = static_cast<ir::NodeId>(i);
      EXPECT_EQ(OpSignature::hash_of(g, id, constant), OpSignature::of(g, id, constant).hash()) << ir::node_label(g, id);
      ++checked;
    }
  }
  EXPECT_GT(checked, 10);
}

TEST(Signature, HashIgnoresIdsAndSeesEverythingElse) {
  const auto g1 = small_cnn(8);
  // The same conv in a graph with an extra leading node: different ids, equal signature.
  ir::GraphBuilder b;
  auto unused = b.input("u", {ir::DType::kFloat32, {1}});
  (void)unused;
  auto x = b.input("x", {ir::DType::kFloat32, {1, 3, 16, 16}});
  auto w1 = b.weight("w1", ir::random_tensor({8, 3, 3, 3}, 99));  // other values: the signature ignores contents
  b.output(b.conv(x, w1, {1, 1}, {1, 1, 1, 1}), "y");
  const auto g2 = std::move(b).build();
  auto find_conv = [](const ir::Graph& g) {
    for (size_t i = 0; i < g.size(); ++i)
      if (g.node(static_cast<ir::NodeId>(i)).kind == OpKind::kConv) return static_cast<ir::NodeId>(i);
    return ir::NodeId{-1};
  };
  const auto s1 = OpSignature::of(g1, find_conv(g1));
  const auto s2 = OpSignature::of(g2, find_conv(g2));
  EXPECT_EQ(s1, s2);
  EXPECT_EQ(s1.hash(), s2.hash());
  EXPECT_EQ(s1.str(), s2.str());
  EXPECT_EQ(s1, OpSignature::of(g1, find_conv(g1), constant_nodes(g1)));
  ASSERT_EQ(s1.input_is_constant, (std::vector<bool>{false, true}));

  auto other = s1;
  other.input_is_constant[1] = false;
  EXPECT_NE(other.hash(), s1.hash());
  other = s1;
  other.inputs[0].shape[2] = 17;
  EXPECT_NE(other.hash(), s1.hash());
  other = s1;
  std::get<ir::ConvParams>(other.params).act = ir::Activation::kRelu;
  EXPECT_NE(other.hash(), s1.hash());
  other = s1;
  other.inputs[0].dtype = ir::DType::kFloat64;
  EXPECT_NE(other.hash(), s1.hash());
}

// ---- node_costs ----

TEST(NodeCosts, FoldedOpaqueAndSkipped) {
  ir::GraphBuilder b;
  auto x = b.input("x", {ir::DType::kFloat32, {1, 4, 8, 8}});
  auto w = b.weight("w", ir::random_tensor({4, 4, 3, 3}, 1));
  auto s = b.weight("s", ir::random_tensor({4, 4, 3, 3}, 2));
  auto ws = b.add(w, s);  // weight-only: folds at export
  auto y = b.conv(x, ws, {1, 1}, {1, 1, 1, 1});
  auto op = b.op_with_types(OpKind::kOpaque, {y}, ir::OpaqueParams{"", "Foo", "", 1, {0}, {0}}, {b.type(y)}, "foo")[0];
  // An op fed only by constants through an opaque node cannot fold: opaque nodes never run.
  auto c_op = b.op_with_types(OpKind::kOpaque, {w}, ir::OpaqueParams{"", "Bar", "", 1, {0}, {0}}, {b.type(w)}, "bar")[0];
  auto after = b.relu(c_op);
  b.output(b.relu(op), "y");
  b.output(after, "z");
  const auto g = std::move(b).build();

  AnalyticCostModel m(toy_profile());
  auto costs = node_costs(g, m);
  ASSERT_TRUE(costs.ok()) << costs.error().message;
  ASSERT_EQ(costs->size(), g.num_ops());
  double sum = 0;
  int folded = 0, opaque = 0;
  for (const auto& c : *costs) {
    const auto& n = g.node(c.node);
    EXPECT_NE(n.kind, OpKind::kInput);
    EXPECT_NE(n.kind, OpKind::kWeight);
    if (n.kind == OpKind::kAdd) {
      EXPECT_TRUE(c.folded);
      EXPECT_EQ(c.ms, 0);
    } else if (n.kind == OpKind::kOpaque) {
      EXPECT_TRUE(c.opaque);
      EXPECT_EQ(c.ms, kOpaqueCostMs);
    } else {
      EXPECT_FALSE(c.folded) << ir::node_label(g, c.node);
      EXPECT_GT(c.ms, 0);
    }
    folded += c.folded;
    opaque += c.opaque;
    sum += c.ms;
  }
  EXPECT_EQ(folded, 1);
  EXPECT_EQ(opaque, 2);
  // A Reshape kept opaque (its shape follows a dynamic axis) is a view: it costs nothing.
  ir::Node reshape;
  reshape.kind = OpKind::kOpaque;
  reshape.params = ir::OpaqueParams{"", "Reshape", "", 14, {0, 1}, {0}};
  EXPECT_TRUE(opaque_is_view(reshape));
  reshape.params = ir::OpaqueParams{"com.example", "Reshape", "", 1, {0}, {0}};
  EXPECT_FALSE(opaque_is_view(reshape));
  auto total = graph_cost(g, m);
  ASSERT_TRUE(total.ok());
  EXPECT_DOUBLE_EQ(*total, sum);
}

TEST(NodeCosts, ProgressAndErrors) {
  const auto g = small_cnn(4);
  AnalyticCostModel m(toy_profile());
  size_t calls = 0, last = 0;
  auto costs = node_costs(g, m, [&](size_t done, size_t total) {
    ++calls;
    last = done;
    EXPECT_EQ(total, g.num_ops());
  });
  ASSERT_TRUE(costs.ok());
  EXPECT_EQ(calls, g.num_ops());
  EXPECT_EQ(last, g.num_ops());

  // A backend error names the node; a negative cost is refused.
  struct Failing : CostModel {
    double value = -1;
    bool fail = true;
    Expected<double> op_cost(const OpSignature&) override {
      if (fail) return Error::internal("boom");
      return value;
    }
    std::string device_fingerprint() const override { return "failing"; }
    std::string name() const override { return "failing"; }
  } bad;
  auto r = node_costs(g, bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("Conv"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("boom"), std::string::npos);
  bad.fail = false;
  EXPECT_FALSE(graph_cost(g, bad).ok());
}

// A file cannot carry a Conv with a fused activation (it writes the Conv, then the activation), so
// a fused Conv is priced as the runtime will run the file: under a profile without a runtime, the
// Conv and the Relu as two kernels; under onnxruntime's, one fused kernel, whichever form the graph
// has. Either way fusing earns nothing that the written file does not have.
TEST(NodeCosts, AConvActivationIsPricedAsTheWrittenFileRuns) {
  for (const char* name : {"h100", "cpu-2core", "ort-cpu"}) {
    auto p = load_profile(name);
    ASSERT_TRUE(p.ok()) << p.error().message;
    AnalyticCostModel m(*p);
    auto unfused = graph_cost(small_cnn(64), m), fused = graph_cost(small_cnn(64, ir::Activation::kRelu), m);
    ASSERT_TRUE(unfused.ok() && fused.ok());
    EXPECT_DOUBLE_EQ(*fused, *unfused) << name;
    auto costs = node_costs(small_cnn(64, ir::Activation::kRelu), m);
    ASSERT_TRUE(costs.ok());
    EXPECT_EQ(costs->size(), 2u) << "the Relu's kernel is part of its Conv's cost";
  }
  auto plain = load_profile("cpu-2core");
  AnalyticCostModel m(*plain);
  const auto relu = sig(OpKind::kRelu, {}, {{{1, 64, 16, 16}}});
  auto costs = node_costs(small_cnn(64, ir::Activation::kRelu), m);
  auto alone = node_costs(small_cnn(64), m);
  ASSERT_TRUE(costs.ok() && alone.ok());
  EXPECT_DOUBLE_EQ((*costs)[0].ms, (*alone)[0].ms + *m.op_cost(relu));
}

TEST(Analytic, HalfOpsUseTheHalfRatesAndMoveHalfTheBytes) {
  auto conv16 = sig(OpKind::kConv, conv2d(3), {{{1, 64, 56, 56}, false, ir::DType::kFloat16}, {{64, 64, 3, 3}, true, ir::DType::kFloat16}});
  auto relu16 = sig(OpKind::kRelu, {}, {{{1, 64, 56, 56}, false, ir::DType::kFloat16}});
  EXPECT_TRUE(op_work(conv16).half);
  EXPECT_DOUBLE_EQ(op_work(conv16).bytes, 1753088.0 / 2);
  // Without half rates (CPU runtimes compute half in float32) the float32 compute rate applies.
  AnalyticCostModel plain(toy_profile());
  EXPECT_NEAR(cost_of(plain, conv16), 0.005 + 2.31211008, 1e-12);
  EXPECT_NEAR(cost_of(plain, relu16), 0.005 + 0.1605632 / 2, 1e-12);
  DeviceProfile p = toy_profile();
  p.half_conv = {400, 1};
  p.half_matmul = {800, 1};
  p.half_vector = p.half_special = p.half_pool = {20, 1};
  ASSERT_TRUE(p.validate().ok());
  AnalyticCostModel half(p);
  EXPECT_NEAR(cost_of(half, conv16), 0.005 + 2.31211008 / 4, 1e-12);
  EXPECT_NE(half.device_fingerprint(), plain.device_fingerprint());
  auto back = parse_profile(profile_yaml(p), "half round trip");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, p);
  // The shipped GPU profiles carry datasheet half rates: tensor cores twice the TF32 peak.
  auto h100 = load_profile("h100");
  ASSERT_TRUE(h100.ok());
  ASSERT_TRUE(h100->has_half_rates());
  EXPECT_DOUBLE_EQ(h100->half_matmul.peak, 2 * h100->matmul.peak);
  EXPECT_NE(h100->half_source.find("datasheet"), std::string::npos);
}

// ---- profiles ----

TEST(Profile, ShippedProfilesLoadAndRoundTrip) {
  for (const char* name : {"h100", "h200", "cpu-2core"}) {
    auto p = load_profile(name);
    ASSERT_TRUE(p.ok()) << p.error().message;
    EXPECT_EQ(p->name, name);
    EXPECT_TRUE(p->validate().ok());
    EXPECT_FALSE(p->source.empty());
    auto again = parse_profile(profile_yaml(*p), "round trip");
    ASSERT_TRUE(again.ok()) << again.error().message;
    EXPECT_EQ(*again, *p);
  }
  auto h100 = load_profile("h100"), h200 = load_profile("h200");
  ASSERT_TRUE(h100.ok() && h200.ok());
  EXPECT_EQ(h100->device, "gpu");
  EXPECT_GT(h200->stream.peak, h100->stream.peak);  // HBM3e 4.8 TB/s vs HBM3 3.35 TB/s
}

TEST(Profile, WriteAndLoadByPath) {
  TempDir dir;
  auto p = toy_profile();
  p.description = "quotes \" and\nnewlines";
  const auto path = dir.file("sub/toy.yaml");
  ASSERT_TRUE(write_profile(p, path).ok());
  auto back = load_profile(path);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, p);
}

TEST(Profile, BadProfilesAreErrors) {
  EXPECT_FALSE(parse_profile("", "empty").ok());
  EXPECT_FALSE(parse_profile("[1, 2]", "list").ok());
  EXPECT_FALSE(parse_profile("name: x\ndevice: cpu\n", "no rates").ok());
  EXPECT_FALSE(parse_profile("{{{{", "garbage").ok());
  auto text = profile_yaml(toy_profile());
  auto neg = text;
  neg.replace(neg.find("peak: 100"), 9, "peak: -10");
  auto r = parse_profile(neg, "negative");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("conv"), std::string::npos) << r.error().message;
  auto wrong_type = text;
  wrong_type.replace(wrong_type.find("peak: 100"), 9, "peak: abc");
  EXPECT_FALSE(parse_profile(wrong_type, "type").ok());
  auto missing = load_profile("no-such-device");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("h100"), std::string::npos) << "lists the available profiles: " << missing.error().message;
}

}  // namespace
