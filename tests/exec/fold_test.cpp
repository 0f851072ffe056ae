#include <gtest/gtest.h>

#include <algorithm>

#include "exec/common.h"
#include "rlflow/exec/compare.h"
#include "rlflow/exec/executor.h"
#include "rlflow/ir/builder.h"
#include "rlflow/ir/evaluator.h"

using namespace rlflow;
using namespace rlflow::ir;

namespace {

size_t count_kind(const Graph& g, OpKind k) {
  return static_cast<size_t>(std::count_if(g.nodes().begin(), g.nodes().end(), [k](const Node& n) { return n.kind == k; }));
}

Graph fold_ok(const Graph& g) {
  exec::Executor ex;
  auto r = fold_constants(g, ex);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  if (!r.ok()) return g;
  auto st = validate(*r);
  EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message);
  return std::move(*r);
}

void expect_same_numerics(const Graph& a, const Graph& b) { rlflow::testing::expect_same_numbers(a, b, 1e-6, 1e-6); }

}  // namespace

TEST(Fold, WeightOnlySubgraphBecomesOneWeight) {
  GraphBuilder b;
  auto x = b.input("x", {DType::kFloat32, {3, 4}});
  auto w = b.weight("w", random_tensor({5, 4}, 1));
  auto wt = b.op(OpKind::kTranspose, {w}, TransposeParams{{1, 0}});  // [4, 5], weight-only
  auto y = b.matmul(x, wt);
  b.output(y, "y");
  const Graph g = b.graph();
  ASSERT_EQ(g.num_ops(), 2u);

  Graph f = fold_ok(g);
  EXPECT_EQ(count_kind(f, OpKind::kTranspose), 0u);
  EXPECT_EQ(count_kind(f, OpKind::kWeight), 1u);  // the original w is dead and dropped
  EXPECT_EQ(count_kind(f, OpKind::kMatMul), 1u);
  EXPECT_EQ(f.num_ops(), 1u);
  // The folded weight holds the transposed values.
  const auto& mm = f.node(f.outputs()[0].value.node);
  const auto& folded = f.node(mm.inputs[1].node);
  ASSERT_EQ(folded.kind, OpKind::kWeight);
  ASSERT_TRUE(folded.value);
  EXPECT_EQ(folded.value->shape(), (Shape{4, 5}));
  auto src = g.node(w.node).value->data<float>();
  auto dst = folded.value->data<float>();
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 5; ++c) EXPECT_EQ(dst[static_cast<size_t>(r * 5 + c)], src[static_cast<size_t>(c * 4 + r)]);
  EXPECT_EQ(f.outputs()[0].name, "y");
  expect_same_numerics(g, f);
}

TEST(Fold, ChainsOfWeightOpsFoldTransitively) {
  GraphBuilder b;
  auto x = b.input("x", {DType::kFloat32, {2, 6}});
  auto w = b.weight("w", random_tensor({2, 3, 2}, 4));
  auto r = b.op(OpKind::kReshape, {w}, ReshapeParams{{6, 2}});
  auto s = b.op(OpKind::kScalarMul, {r}, ScalarParams{0.5});
  auto a = b.add(s, b.weight("bias", random_tensor({2}, 5)));
  b.output(b.relu(b.matmul(x, a)), "y");
  const Graph g = b.graph();
  Graph f = fold_ok(g);
  EXPECT_EQ(f.num_ops(), 2u);  // MatMul + Relu
  EXPECT_EQ(count_kind(f, OpKind::kWeight), 1u);
  expect_same_numerics(g, f);
}

TEST(Fold, ConstantNodesMaterialise) {
  GraphBuilder b;
  auto x = b.input("x", {DType::kFloat32, {2, 3}});
  ConstantParams cp;
  cp.shape = {2, 3};
  cp.value = 2.5;
  auto c = b.op(OpKind::kConstant, {}, cp);
  b.output(b.add(x, c), "y");
  const Graph g = b.graph();
  Graph f = fold_ok(g);
  EXPECT_EQ(count_kind(f, OpKind::kConstant), 0u);
  ASSERT_EQ(count_kind(f, OpKind::kWeight), 1u);
  for (const auto& n : f.nodes())
    if (n.kind == OpKind::kWeight) {
      ASSERT_EQ(n.value->type(), (TensorType{DType::kFloat32, {2, 3}}));
      for (float v : n.value->data<float>()) EXPECT_EQ(v, 2.5f);
    }
  expect_same_numerics(g, f);
}

TEST(Fold, MaterializeConstantFills) {
  ConstantParams id;
  id.fill = ConstantFill::kIdentityConv;
  id.shape = {2, 2, 3, 3};
  auto t = materialize_constant(id);
  ASSERT_EQ(t->shape(), (Shape{2, 2, 3, 3}));
  auto v = t->data<float>();
  float total = 0;
  for (float x : v) total += x;
  EXPECT_EQ(total, 2.0f);
  EXPECT_EQ(v[(0 * 2 + 0) * 9 + 4], 1.0f);  // out 0 reads in 0 at the centre
  EXPECT_EQ(v[(1 * 2 + 1) * 9 + 4], 1.0f);  // out 1 reads in 1 at the centre

  ConstantParams avg;
  avg.fill = ConstantFill::kAvgPoolKernel;
  avg.shape = {3, 1, 2, 2};
  auto avg_t = materialize_constant(avg);  // keep the tensor alive while iterating its data
  ASSERT_EQ(avg_t->numel(), 12);
  for (float x : avg_t->data<float>()) EXPECT_FLOAT_EQ(x, 0.25f);

  ConstantParams ints;
  ints.shape = {3};
  ints.dtype = DType::kInt64;
  ints.value = 7;
  EXPECT_EQ(materialize_constant(ints)->as_int64(), (std::vector<int64_t>{7, 7, 7}));
}

TEST(Fold, NodesDependingOnInputsAreKept) {
  GraphBuilder b;
  auto x = b.input("x", {DType::kFloat32, {2, 4}});
  auto w = b.weight("w", random_tensor({4, 4}, 2));
  auto h = b.relu(b.matmul(x, w));
  auto y = b.op(OpKind::kSigmoid, {b.add(h, b.weight("bias", random_tensor({4}, 3)))});
  b.output(y, "y");
  const Graph g = b.graph();
  Graph f = fold_ok(g);
  EXPECT_EQ(f.size(), g.size());
  EXPECT_TRUE(structurally_equal(g, f));
  EXPECT_EQ(f.hash(), g.hash());
}

TEST(Fold, OpaqueNodesTheExecutorCannotRunAreNeverFolded) {
  GraphBuilder b;
  auto x = b.input("x", {DType::kFloat32, {4}});
  auto w = b.weight("w", random_tensor({4}, 2));
  OpaqueParams p;
  p.domain = "com.example";
  p.op_type = "FancySwish";
  auto o = b.op_with_types(OpKind::kOpaque, {w}, p, {{DType::kFloat32, {4}}});
  b.output(b.add(x, o[0]), "y");
  Graph f = fold_ok(b.graph());
  EXPECT_EQ(count_kind(f, OpKind::kOpaque), 1u);
  EXPECT_EQ(f.size(), b.graph().size());
}

// An ONNX op from the executor's table folds like any IR op, unless folding would grow the
// weights past kMaxFoldGrowthBytes (an Expand of a scalar to a large mask stays a node).
TEST(Fold, ExecutableOpaqueNodesFoldUnlessTheyGrowTheWeights) {
  GraphBuilder b;
  auto x = b.input("x", {DType::kFloat32, {4}});
  auto w = b.weight("w", random_tensor({4}, 2));
  OpaqueParams neg{"", "Neg", "", 17, {0}, {0}};
  auto o = b.op_with_types(OpKind::kOpaque, {w}, neg, {{DType::kFloat32, {4}}});
  auto shape = b.weight("shape", Tensor::i64({1024, 1024}));
  OpaqueParams expand{"", "Expand", "", 17, {0, 1}, {0}};
  auto big = b.op_with_types(OpKind::kOpaque, {b.weight("one", Tensor::scalar_f32(1.0f)), shape}, expand,
                             {{DType::kFloat32, {1024, 1024}}});
  b.output(b.add(x, o[0]), "y");
  b.output(big[0], "mask");
  Graph f = fold_ok(b.graph());
  EXPECT_EQ(count_kind(f, OpKind::kOpaque), 1u);  // the Expand: 4 MB from 4 bytes
  auto want = exec::Executor().run(b.graph(), {random_tensor({4}, 5)});
  auto got = exec::Executor().run(f, {random_tensor({4}, 5)});
  ASSERT_TRUE(want.ok() && got.ok());
  EXPECT_TRUE((*want)[0]->same_content(*(*got)[0]));
}

TEST(Fold, MultiOutputSplitOfAWeightFoldsIntoSeveralWeights) {
  GraphBuilder b;
  auto x = b.input("x", {DType::kFloat32, {2, 3}});
  auto w = b.weight("w", random_tensor({3, 7}, 9));
  auto parts = b.ops(OpKind::kSplit, {w}, SplitParams{1, {2, 5}});
  ASSERT_EQ(parts.size(), 2u);
  b.output(b.matmul(x, parts[0]), "a");
  b.output(b.relu(b.matmul(x, parts[1])), "b");
  const Graph g = b.graph();
  Graph f = fold_ok(g);
  EXPECT_EQ(count_kind(f, OpKind::kSplit), 0u);
  EXPECT_EQ(count_kind(f, OpKind::kWeight), 2u);
  std::vector<Shape> shapes;
  for (const auto& n : f.nodes())
    if (n.kind == OpKind::kWeight) shapes.push_back(n.value->shape());
  std::sort(shapes.begin(), shapes.end());
  EXPECT_EQ(shapes, (std::vector<Shape>{{3, 2}, {3, 5}}));
  expect_same_numerics(g, f);
}

TEST(Fold, OnlyTheUsedSplitOutputSurvives) {
  GraphBuilder b;
  auto x = b.input("x", {DType::kFloat32, {2, 3}});
  auto parts = b.ops(OpKind::kSplit, {b.weight("w", random_tensor({3, 4}, 9))}, SplitParams{1, {1, 3}});
  b.output(b.matmul(x, parts[1]), "y");
  Graph f = fold_ok(b.graph());
  EXPECT_EQ(count_kind(f, OpKind::kWeight), 1u);
  expect_same_numerics(b.graph(), f);
}

TEST(Fold, AWeightOnlyGraphOutputFolds) {
  GraphBuilder b;
  b.input("x", {DType::kFloat32, {1}});
  auto w = b.weight("w", random_tensor({2, 2}, 1));
  b.output(b.op(OpKind::kTranspose, {w}, TransposeParams{{1, 0}}), "wt");
  Graph f = fold_ok(b.graph());
  ASSERT_EQ(f.outputs().size(), 1u);
  EXPECT_EQ(f.node(f.outputs()[0].value.node).kind, OpKind::kWeight);
  EXPECT_EQ(f.inputs().size(), 1u);  // unused inputs stay part of the interface
  EXPECT_EQ(f.outputs()[0].name, "wt");
}
