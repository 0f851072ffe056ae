#include <gtest/gtest.h>

#include "rlflow/ir/builder.h"

using namespace rlflow::ir;

namespace {

// Two independent branches added in either order.
Graph two_branches(bool swap, uint64_t wseed = 5) {
  GraphBuilder b;
  auto x = b.input("x", {DType::kFloat32, {1, 4, 8, 8}});
  auto w1 = b.weight("w1", random_tensor({4, 4, 1, 1}, wseed));
  auto w2 = b.weight("w2", random_tensor({4, 4, 3, 3}, wseed + 1));
  ValueRef a, c;
  if (!swap) {
    a = b.conv(x, w1, {1, 1}, {0, 0, 0, 0});
    c = b.conv(x, w2, {1, 1}, {1, 1, 1, 1});
  } else {
    c = b.conv(x, w2, {1, 1}, {1, 1, 1, 1});
    a = b.conv(x, w1, {1, 1}, {0, 0, 0, 0});
  }
  b.output(b.add(a, c), "y");
  return std::move(b).build();
}

}  // namespace

TEST(Hash, IndependentOfInsertionOrderAndNames) {
  Graph a = two_branches(false), b = two_branches(true);
  EXPECT_EQ(a.hash(), b.hash());
  EXPECT_TRUE(structurally_equal(a, b));
  b.mutable_node(0).name = "other_name";
  EXPECT_EQ(a.hash(), b.hash());
}

TEST(Hash, SeesParametersShapesAndWeights) {
  Graph a = two_branches(false);
  Graph other_weights = two_branches(false, 99);
  EXPECT_NE(a.hash(), other_weights.hash());
  EXPECT_FALSE(structurally_equal(a, other_weights));

  GraphBuilder b;
  auto x = b.input("x", {DType::kFloat32, {1, 4, 8, 8}});
  auto w = b.weight("w", random_tensor({4, 4, 3, 3}, 1));
  b.output(b.conv(x, w, {1, 1}, {1, 1, 1, 1}), "y");
  GraphBuilder c;
  auto x2 = c.input("x", {DType::kFloat32, {1, 4, 8, 8}});
  auto w2 = c.weight("w", random_tensor({4, 4, 3, 3}, 1));
  c.output(c.conv(x2, w2, {2, 2}, {1, 1, 1, 1}), "y");
  EXPECT_NE(b.graph().hash(), c.graph().hash());
}

TEST(Hash, EqualWeightContentInDifferentBuffersHashesEqual) {
  GraphBuilder a, b;
  auto xa = a.input("x", {DType::kFloat32, {4}});
  a.output(a.add(xa, a.weight("w", random_tensor({4}, 7))), "y");
  auto xb = b.input("x", {DType::kFloat32, {4}});
  b.output(b.add(xb, b.weight("w", random_tensor({4}, 7))), "y");
  EXPECT_NE(a.graph().node(1).value.get(), b.graph().node(1).value.get());
  EXPECT_EQ(a.graph().hash(), b.graph().hash());
  EXPECT_TRUE(structurally_equal(a.graph(), b.graph()));
}

TEST(Hash, OperandOrderMatters) {
  GraphBuilder a, b;
  auto x = a.input("x", {DType::kFloat32, {4}});
  auto y = a.input("y", {DType::kFloat32, {4}});
  a.output(a.op(OpKind::kSub, {x, y}), "z");
  auto x2 = b.input("x", {DType::kFloat32, {4}});
  auto y2 = b.input("y", {DType::kFloat32, {4}});
  b.output(b.op(OpKind::kSub, {y2, x2}), "z");
  EXPECT_NE(a.graph().hash(), b.graph().hash());
  EXPECT_FALSE(structurally_equal(a.graph(), b.graph()));
}

TEST(Hash, StableAcrossRuns) {
  // A fixed graph has a fixed hash: no addresses or unordered containers feed into it.
  EXPECT_EQ(two_branches(false).hash(), two_branches(false).hash());
}
