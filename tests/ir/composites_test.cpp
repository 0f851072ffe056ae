// Recognition of decomposed GELU and LayerNorm chains (ir::recognise_composites): the structure
// after, and the same numbers before and after in the reference executor.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "exec/common.h"
#include "rlflow/exec/compare.h"
#include "rlflow/ir/builder.h"
#include "rlflow/ir/composites.h"

using namespace rlflow;
using namespace rlflow::ir;

namespace {

// An opset with every fused op (Gelu is opset 20): the chains are recognised whatever the builder's opset.
constexpr int64_t kEveryOp = kGeluOpset;

ValueRef scalar(GraphBuilder& b, const std::string& name, double v) {
  return b.weight(name, Tensor::scalar_f32(static_cast<float>(v)));
}

// PyTorch's opset-13..19 form of exact GELU: x * (1 + erf(x / sqrt 2)) * 0.5.
ValueRef torch_gelu(GraphBuilder& b, ValueRef x, const std::string& p) {
  auto t = b.op(OpKind::kDiv, {x, scalar(b, p + "sqrt2", 1.4142135623730951)});
  auto s = b.add(b.op(OpKind::kErf, {t}), scalar(b, p + "one", 1.0));
  return b.mul(b.mul(x, s), scalar(b, p + "half", 0.5));
}

// The tanh approximation written as 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))), with
// x^3 as Pow(x, 3).
ValueRef tanh_gelu(GraphBuilder& b, ValueRef x) {
  auto cube = b.op(OpKind::kPow, {x, scalar(b, "three", 3.0)});
  auto inner = b.add(x, b.mul(scalar(b, "kappa", 0.044715), cube));
  auto t = b.op(OpKind::kTanh, {b.mul(inner, scalar(b, "beta", 0.7978845608028654))});
  auto s = b.add(scalar(b, "one", 1.0), t);
  return b.mul(b.mul(scalar(b, "half", 0.5), x), s);
}

// PyTorch's opset-13..16 form of LayerNorm over the last axis.
ValueRef torch_layer_norm(GraphBuilder& b, ValueRef x, int64_t width, bool square_by_mul = false) {
  AxesParams last{{b.type(x).rank() - 1}, true};
  auto mean = b.op(OpKind::kReduceMean, {x}, last);
  auto d = b.op(OpKind::kSub, {x, mean});
  auto sq = square_by_mul ? b.mul(d, d) : b.op(OpKind::kPow, {d, scalar(b, "two", 2.0)});
  auto var = b.op(OpKind::kReduceMean, {sq}, last);
  auto sd = b.op(OpKind::kSqrt, {b.add(var, scalar(b, "eps", 1e-5))});
  auto n = b.op(OpKind::kDiv, {d, sd});
  auto gamma = b.weight("gamma", random_tensor({width}, 7));
  auto beta = b.weight("beta", random_tensor({width}, 8));
  return b.add(b.mul(n, gamma), beta);
}

int count(const Graph& g, OpKind k) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node.kind == k;
  return n;
}

void expect_same_numbers(const Graph& before, const Graph& after) {
  rlflow::testing::expect_same_numbers(before, after, 1e-5, exec::CompareOptions{}.rtol, /*seed=*/3);
}

}  // namespace

TEST(Composites, ExactGeluChainBecomesOneNode) {
  GraphBuilder b;
  auto x = b.input("x", {DType::kFloat32, {2, 8, 16}});
  auto h = b.matmul(x, b.weight("w", random_tensor({16, 16}, 1)));
  b.output(torch_gelu(b, h, "g_"), "y");
  const Graph before = b.graph();
  CompositeStats st;
  const Graph after = recognise_composites(before, &st, kEveryOp);
  EXPECT_EQ(st.count("gelu"), 1);
  EXPECT_EQ(st.count("gelu_tanh"), 0);
  EXPECT_EQ(st.removed_nodes, 4);  // Div, Erf, Add and the inner Mul (the root is replaced in place)
  EXPECT_EQ(count(after, OpKind::kGelu), 1);
  EXPECT_EQ(count(after, OpKind::kErf), 0);
  EXPECT_EQ(count(after, OpKind::kMul), 0);
  EXPECT_FALSE(std::get<GeluParams>(after.node(after.outputs()[0].value.node).params).tanh);
  EXPECT_TRUE(validate(after).ok());
  expect_same_numbers(before, after);
}

TEST(Composites, AChainStaysAChainWhereTheModelsOpsetHasNoFusedOp) {
  // The exporter writes Gelu back as its chain below opset 20 and LayerNormalization below 17: fusing
  // there would let a cost model credit a kernel the written file does not have.
  for (int64_t opset : {int64_t{13}, int64_t{17}, int64_t{20}}) {
    GraphBuilder b;
    auto x = b.input("x", {DType::kFloat32, {2, 8, 16}});
    b.output(torch_layer_norm(b, torch_gelu(b, x, "g_"), 16), "y");
    Graph g = b.graph();
    g.meta().opsets = {{"", opset}};
    CompositeStats st;
    recognise_composites(g, &st);  // the graph's own opset
    EXPECT_EQ(st.count("gelu"), opset >= 20 ? 1 : 0) << opset;
    EXPECT_EQ(st.count("layer_norm"), opset >= 17 ? 1 : 0) << opset;
  }
}

TEST(Composites, TanhGeluChainBecomesOneTanhGelu) {
  GraphBuilder b;
  auto x = b.input("x", {DType::kFloat32, {4, 32}});
  b.output(tanh_gelu(b, x), "y");
  const Graph before = b.graph();
  CompositeStats st;
  const Graph after = recognise_composites(before, &st, kEveryOp);
  EXPECT_EQ(st.count("gelu_tanh"), 1);
  EXPECT_EQ(count(after, OpKind::kGelu), 1);
  EXPECT_EQ(count(after, OpKind::kTanh), 0);
  EXPECT_EQ(count(after, OpKind::kPow), 0);
  EXPECT_TRUE(std::get<GeluParams>(after.node(after.outputs()[0].value.node).params).tanh);
  expect_same_numbers(before, after);
}

TEST(Composites, LayerNormChainBecomesOneLayerNorm) {
  for (bool by_mul : {false, true}) {
    GraphBuilder b;
    auto x = b.input("x", {DType::kFloat32, {2, 5, 24}});
    b.output(torch_layer_norm(b, x, 24, by_mul), "y");
    const Graph before = b.graph();
    CompositeStats st;
    const Graph after = recognise_composites(before, &st, kEveryOp);
    EXPECT_EQ(st.count("layer_norm"), 1) << "square by " << (by_mul ? "Mul" : "Pow");
    EXPECT_EQ(count(after, OpKind::kLayerNorm), 1);
    EXPECT_EQ(count(after, OpKind::kReduceMean), 0);
    const auto& ln = after.node(after.outputs()[0].value.node);
    EXPECT_EQ(std::get<NormParams>(ln.params).axis, 2);
    EXPECT_NEAR(std::get<NormParams>(ln.params).epsilon, 1e-5, 1e-12);
    expect_same_numbers(before, after);
  }
}

// A chain whose interior value something else reads must stay: fusing it would lose that value.
TEST(Composites, ChainWithAnEscapingInteriorValueIsKept) {
  GraphBuilder b;
  auto x = b.input("x", {DType::kFloat32, {3, 8}});
  auto t = b.op(OpKind::kDiv, {x, scalar(b, "sqrt2", 1.4142135623730951)});
  auto e = b.op(OpKind::kErf, {t});
  auto s = b.add(e, scalar(b, "one", 1.0));
  b.output(b.mul(b.mul(x, s), scalar(b, "half", 0.5)), "y");
  b.output(e, "erf");  // the Erf is a graph output too
  const Graph before = b.graph();
  CompositeStats st;
  const Graph after = recognise_composites(before, &st, kEveryOp);
  EXPECT_EQ(st.total(), 0);
  EXPECT_EQ(after.size(), before.size());
}

// Constants that are not GELU's (a scale of 0.6 instead of 0.5, a divisor that is not sqrt 2) mean
// another function: nothing is fused.
TEST(Composites, OtherConstantsAreNotGelu) {
  for (int variant = 0; variant < 2; ++variant) {
    GraphBuilder b;
    auto x = b.input("x", {DType::kFloat32, {3, 8}});
    auto t = b.op(OpKind::kDiv, {x, scalar(b, "d", variant == 0 ? 1.4142135623730951 : 1.5)});
    auto s = b.add(b.op(OpKind::kErf, {t}), scalar(b, "one", 1.0));
    b.output(b.mul(b.mul(x, s), scalar(b, "half", variant == 0 ? 0.6 : 0.5)), "y");
    CompositeStats st;
    recognise_composites(b.graph(), &st, kEveryOp);
    EXPECT_EQ(st.total(), 0) << "variant " << variant;
  }
}

// GELU of one value times another value is not GELU: the Erf's argument must be the multiplied x.
TEST(Composites, ErfOfAnotherValueIsNotGelu) {
  GraphBuilder b;
  auto x = b.input("x", {DType::kFloat32, {3, 8}});
  auto z = b.input("z", {DType::kFloat32, {3, 8}});
  auto t = b.op(OpKind::kDiv, {z, scalar(b, "sqrt2", 1.4142135623730951)});
  auto s = b.add(b.op(OpKind::kErf, {t}), scalar(b, "one", 1.0));
  b.output(b.mul(b.mul(x, s), scalar(b, "half", 0.5)), "y");
  CompositeStats st;
  recognise_composites(b.graph(), &st, kEveryOp);
  EXPECT_EQ(st.total(), 0);
}

// A transformer FFN block: LayerNorm(x + W2 GELU(W1 x)), both chains fused, same numbers.
TEST(Composites, FeedForwardBlockFusesBothChains) {
  GraphBuilder b;
  auto x = b.input("x", {DType::kFloat32, {1, 6, 16}});
  auto h = b.add(b.matmul(x, b.weight("w1", random_tensor({16, 32}, 1))), b.weight("b1", random_tensor({32}, 2)));
  auto f = b.matmul(torch_gelu(b, h, "g_"), b.weight("w2", random_tensor({32, 16}, 3)));
  b.output(torch_layer_norm(b, b.add(x, f), 16), "y");
  const Graph before = b.graph();
  CompositeStats st;
  const Graph after = recognise_composites(before, &st, kEveryOp);
  EXPECT_EQ(st.count("gelu"), 1);
  EXPECT_EQ(st.count("layer_norm"), 1);
  EXPECT_TRUE(validate(after).ok());
  expect_same_numbers(before, after);
}

// HF's LlamaRMSNorm and eager attention cast float32 to float32 (to(torch.float32), softmax(dtype=
// float32).to(dtype)): such a Cast computes nothing and goes at any opset; its readers read its input.
// A Cast that changes the type stays, and so does one that is a graph output (it produces that output).
TEST(Composites, NoOpCastsAreDroppedAtAnyOpset) {
  GraphBuilder b;
  auto x = b.input("x", {DType::kFloat32, {2, 8}});
  auto twice = b.op(OpKind::kCast, {b.op(OpKind::kCast, {x}, CastParams{DType::kFloat32})}, CastParams{DType::kFloat32});
  auto r = b.op(OpKind::kRelu, {twice});
  auto s = b.op(OpKind::kSigmoid, {b.op(OpKind::kCast, {r}, CastParams{DType::kFloat32})});
  b.output(b.op(OpKind::kCast, {s}, CastParams{DType::kFloat32}), "y");                      // a graph output: kept
  b.output(b.op(OpKind::kCast, {b.op(OpKind::kCast, {r}, CastParams{DType::kFloat16})}, CastParams{DType::kFloat32}),
           "z");  // float32 -> float16 -> float32 rounds: kept
  Graph g = b.graph();
  g.meta().opsets = {{"", 13}};
  CompositeStats st;
  const Graph after = recognise_composites(g, &st);
  EXPECT_EQ(st.count("noop_cast"), 3);
  EXPECT_EQ(st.total(), 3);
  EXPECT_EQ(st.removed_nodes, 3);
  EXPECT_EQ(count(after, OpKind::kCast), 3);
  EXPECT_TRUE(is_noop_cast(after, after.outputs()[0].value.node));
  EXPECT_EQ(after.node(after.outputs()[0].value.node).kind, OpKind::kCast);
  EXPECT_TRUE(validate(after).ok());
  expect_same_numbers(g, after);

  // Nothing to drop: the graph comes back as it was.
  GraphBuilder c;
  auto u = c.input("u", {DType::kFloat32, {4}});
  c.output(c.op(OpKind::kRelu, {c.op(OpKind::kCast, {u}, CastParams{DType::kFloat16})}), "v");
  CompositeStats none;
  const Graph same = recognise_composites(c.graph(), &none);
  EXPECT_EQ(none.total(), 0);
  EXPECT_EQ(same.num_ops(), c.graph().num_ops());
}

TEST(Composites, TheRegistryNamesEachFusionOnceWithItsOpAndOpset) {
  std::set<std::string> names, keys;
  for (const auto& f : fusions()) {
    EXPECT_TRUE(names.insert(f.name).second) << f.name;
    EXPECT_FALSE(f.onnx_op.empty()) << f.name;
    EXPECT_GE(f.since_opset, 1) << f.name;
    ASSERT_FALSE(f.count_keys.empty()) << f.name;
    EXPECT_EQ(f.count_keys.front(), f.name);
    for (const auto& k : f.count_keys) EXPECT_TRUE(keys.insert(k).second) << k;
  }
  EXPECT_EQ(fusion_names().size(), names.size());
  EXPECT_EQ(fusion_count_keys().back(), "noop_cast");
  EXPECT_EQ(fusion_count_keys().size(), keys.size() + 1);
  // The fusions the pipeline's help and targets name: the six of today, each writing its own op.
  EXPECT_EQ(fusion_names(), (std::vector<std::string>{"layer_norm", "gelu", "hard_swish", "rms_norm", "rotary_embedding", "attention"}));
}

TEST(Composites, ARejectedCandidateSaysWhyAndAPlainMulSaysNothing) {
  // 0.49 * x * (1 + erf(x / sqrt 2)): a GELU candidate whose constant is wrong.
  GraphBuilder b;
  auto x = b.input("x", {DType::kFloat32, {2, 16}});
  auto t = b.op(OpKind::kDiv, {x, scalar(b, "sqrt2", 1.4142135623730951)});
  auto s = b.add(b.op(OpKind::kErf, {t}), scalar(b, "one", 1.0));
  auto y = b.mul(b.mul(x, s), scalar(b, "half", 0.49));
  const ValueRef plain = b.mul(y, b.input("z", {DType::kFloat32, {2, 16}}));  // a plain Mul after it
  b.output(plain, "out");
  CompositeStats st;
  const Graph after = recognise_composites(b.graph(), &st, kEveryOp);
  EXPECT_EQ(st.total(), 0);
  // Roots are tried last to first: the outer Mul is the first candidate (the inner x * (1 + erf)
  // is one too, with a constant factor of 1).
  ASSERT_GE(st.rejections.size(), 1u);
  EXPECT_EQ(st.rejections[0].root, y.node);
  EXPECT_EQ(st.rejections[0].fusion, "gelu");
  EXPECT_NE(st.rejections[0].why.find("0.49"), std::string::npos) << st.rejections[0].why;
  for (const auto& r : st.rejections) EXPECT_NE(r.root, plain.node) << r.why;
  EXPECT_EQ(after.num_ops(), b.graph().num_ops());
}

TEST(Composites, FusionChainsFindsAFusionsChainsAtAnyOpset) {
  GraphBuilder b;
  auto x = b.input("x", {DType::kFloat32, {2, 8, 16}});
  b.output(torch_layer_norm(b, x, 16), "y");
  Graph g = b.graph();
  g.meta().opsets = {{"", 13}};
  const auto chains = fusion_chains(g, "layer_norm");
  ASSERT_EQ(chains.size(), 1u);
  EXPECT_EQ(chains[0].size(), 9u);
  EXPECT_EQ(g.node(chains[0][0]).kind, OpKind::kAdd);  // the root first
  EXPECT_TRUE(fusion_chains(g, "gelu").empty());
  EXPECT_TRUE(fusion_chains(g, "no_such_fusion").empty());
}

TEST(Composites, SummaryNamesWhatFiredInRegistryOrder) {
  CompositeStats st;
  EXPECT_EQ(st.summary(), "");
  st.counts = {{"noop_cast", 2}, {"gelu", 1}, {"layer_norm", 3}};
  EXPECT_EQ(st.summary(), "3 layer_norm, 1 gelu, 2 noop_cast");
  EXPECT_EQ(st.total(), 6);
}
