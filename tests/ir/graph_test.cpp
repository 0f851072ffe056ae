#include <gtest/gtest.h>

#include <algorithm>

#include <set>

#include "rlflow/ir/op_def.h"
#include "rlflow/ir/builder.h"
#include "rlflow/ir/evaluator.h"
#include "rlflow/ir/summary.h"

using namespace rlflow::ir;

namespace {

Graph small_cnn(uint64_t seed = 1) {
  GraphBuilder b;
  auto x = b.input("x", {DType::kFloat32, {1, 4, 8, 8}});
  auto w = b.weight("w", random_tensor({8, 4, 3, 3}, seed));
  auto y = b.relu(b.conv(x, w, {1, 1}, {1, 1, 1, 1}));
  b.output(y, "y");
  return std::move(b).build();
}

}  // namespace

TEST(Graph, CopySharesWeightBuffers) {
  Graph a = small_cnn();
  Graph b = a;
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(a.node(1).value.get(), b.node(1).value.get());  // same buffer, not a copy
  b.mutable_node(1).name = "renamed";
  EXPECT_EQ(a.node(1).name, "w");  // value semantics for everything else
}

TEST(Graph, AddRejectsForwardReferences) {
  Graph g;
  Node n;
  n.kind = OpKind::kRelu;
  n.inputs = {{0, 0}};
  n.outputs = {{DType::kFloat32, {1}}};
  EXPECT_THROW(g.add(n), std::invalid_argument);
}

TEST(Graph, ValidateAcceptsBuilderGraphs) {
  auto st = validate(small_cnn());
  EXPECT_TRUE(st.ok()) << st.error().message;
}

TEST(Graph, ValidateNamesTheFirstBadNode) {
  Graph g = small_cnn();
  g.mutable_node(2).outputs[0].shape = {1, 8, 9, 9};  // the conv's stored type is now wrong
  auto st = validate(g);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("Conv"), std::string::npos) << st.error().message;
  EXPECT_NE(st.error().message.find("#2"), std::string::npos) << st.error().message;
}

TEST(Graph, ValidateRejectsWeightTypeMismatch) {
  Graph g = small_cnn();
  g.mutable_node(1).outputs[0].shape = {8, 4, 1, 1};
  EXPECT_FALSE(validate(g).ok());
}

TEST(Graph, ValidateRequiresOutputs) {
  GraphBuilder b;
  b.input("x", {DType::kFloat32, {2}});
  EXPECT_FALSE(validate(b.graph()).ok());
}

TEST(Graph, RemoveDeadNodesKeepsInputsAndOutputs) {
  GraphBuilder b;
  auto x = b.input("x", {DType::kFloat32, {2, 3}});
  auto unused = b.input("unused", {DType::kFloat32, {1}});
  (void)unused;
  b.relu(x);  // dead
  auto y = b.op(OpKind::kSigmoid, {x});
  b.output(y, "y");
  Graph g = remove_dead_nodes(b.graph());
  EXPECT_EQ(g.size(), 3u);
  EXPECT_EQ(g.inputs().size(), 2u);
  EXPECT_EQ(g.node(g.outputs()[0].value.node).kind, OpKind::kSigmoid);
  EXPECT_TRUE(validate(g).ok());
}

TEST(Graph, TopoSortRestoresOrderAndDetectsCycles) {
  Graph g = small_cnn();
  std::vector<Node> nodes(g.nodes().rbegin(), g.nodes().rend());  // reversed: ids 3,2,1,0
  const int n = static_cast<int>(nodes.size());
  for (auto& nd : nodes)
    for (auto& in : nd.inputs) in.node = n - 1 - in.node;
  std::vector<GraphOutput> outs = {{{n - 1 - g.outputs()[0].value.node, 0}, "y"}};
  auto sorted = topo_sorted(nodes, outs, g.meta());
  ASSERT_TRUE(sorted.ok()) << sorted.error().message;
  EXPECT_TRUE(structurally_equal(*sorted, g));

  std::vector<Node> cyc = g.nodes();
  cyc[2].inputs[0] = {3, 0};  // conv reads the relu that reads the conv
  auto bad = topo_sorted(cyc, g.outputs(), g.meta());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("cycle"), std::string::npos);
}

TEST(Graph, IsConstantFollowsWeightsOnly) {
  GraphBuilder b;
  auto x = b.input("x", {DType::kFloat32, {4}});
  auto w = b.weight("w", random_tensor({4}, 3));
  auto wt = b.op(OpKind::kRelu, {w});
  auto y = b.add(x, wt);
  b.output(y, "y");
  EXPECT_TRUE(constant_nodes(b.graph())[static_cast<size_t>(wt.node)]);
  EXPECT_FALSE(constant_nodes(b.graph())[static_cast<size_t>(y.node)]);
}

TEST(Summary, CountsOpsParametersAndFlops) {
  auto s = summarize(small_cnn());
  EXPECT_EQ(s.num_ops, 2);
  EXPECT_EQ(s.op_counts.at("Conv"), 1);
  EXPECT_EQ(s.op_counts.at("Relu"), 1);
  EXPECT_EQ(s.num_parameters, 8 * 4 * 3 * 3);
  // conv: 2 * (1*8*8*8 outputs) * (4*3*3) MACs; relu: one per output element
  EXPECT_DOUBLE_EQ(s.flops, 2.0 * 512 * 36 + 512);
}

TEST(OpTable, OneRowPerKindWithItsName) {
  for (int i = 0; i < kNumOpKinds; ++i) {
    const auto k = static_cast<OpKind>(i);
    EXPECT_EQ(op_info(k).kind, k);
    EXPECT_EQ(op_from_name(op_name(k)), k) << op_name(k);
  }
  EXPECT_EQ(op_name(OpKind::kGlobalAveragePool), "GlobalAveragePool");
  EXPECT_FALSE(op_from_name("Nope"));
}

TEST(OpTable, FormsAndOnnxNames) {
  using K = OpKind;
  std::set<K> unary, binary, source;
  for (int i = 0; i < kNumOpKinds; ++i) {
    const auto k = static_cast<OpKind>(i);
    if (is_elementwise_unary(k)) unary.insert(k);
    if (is_elementwise_binary(k)) binary.insert(k);
    if (is_source(k)) source.insert(k);
  }
  // The ops with converters of their own, and plain ops (OpInfo::plain), which the row describes.
  for (auto k : unary)
    if (!op_info(k).plain) EXPECT_TRUE((std::set<K>{K::kRelu, K::kSigmoid, K::kTanh, K::kErf, K::kSqrt, K::kClip, K::kScalarMul, K::kCast,
                                                   K::kGelu, K::kHardSigmoid, K::kHardSwish}.count(k))) << op_name(k);
  EXPECT_EQ(unary.size() - std::count_if(unary.begin(), unary.end(), [](K k) { return op_info(k).plain; }), 11u);
  for (auto k : binary)
    if (!op_info(k).plain) EXPECT_TRUE((std::set<K>{K::kAdd, K::kSub, K::kMul, K::kDiv, K::kPow}.count(k))) << op_name(k);
  EXPECT_EQ(binary.size() - std::count_if(binary.begin(), binary.end(), [](K k) { return op_info(k).plain; }), 5u);
  // A plain op is written as the ONNX op of its own name and has an elementwise form, or a record
  // (ir/op_def.h) with a shape function and a sane input count.
  for (int i = 0; i < kNumOpKinds; ++i) {
    const auto& info = op_info(static_cast<K>(i));
    if (!info.plain) continue;
    EXPECT_EQ(info.onnx_type, info.name);
    if (info.def) {
      EXPECT_NE(info.def->infer, nullptr) << info.name;
      EXPECT_LE(1, info.def->min_inputs) << info.name;
      EXPECT_LE(info.def->min_inputs, info.def->max_inputs) << info.name;
      EXPECT_TRUE(info.def->until == 0 || info.def->until >= info.since) << info.name;
    } else {
      EXPECT_TRUE(info.form == OpForm::kElementwiseUnary || info.form == OpForm::kElementwiseBinary) << info.name;
    }
    EXPECT_GE(info.since, 1) << info.name;
  }
  EXPECT_EQ(op_info(K::kDequantizeLinear).def->max_inputs, 3);
  EXPECT_EQ(op_info(K::kRotaryEmbedding).def->min_inputs, 3);
  EXPECT_EQ(source, (std::set<K>{K::kInput, K::kWeight, K::kConstant}));
  Node bn;
  bn.kind = K::kBatchNorm;
  EXPECT_EQ(op_display_name(bn), "BatchNormalization");
  Node scale;
  scale.kind = K::kScalarMul;
  EXPECT_EQ(op_display_name(scale), "Mul");
  Node c;
  c.kind = K::kConstant;
  EXPECT_EQ(op_display_name(c), "Constant");
  Node opaque;
  opaque.kind = K::kOpaque;
  opaque.params = OpaqueParams{"com.microsoft", "FusedMatMul"};
  EXPECT_EQ(op_display_name(opaque), "FusedMatMul");
}

TEST(Constant, IdentityConvKernelHasOnesAtTheCentre) {
  ConstantParams p{ConstantFill::kIdentityConv, {3, 3, 3, 3}, DType::kFloat32, 0};
  auto t = materialize_constant(p);
  auto v = t->data<float>();
  float sum = 0;
  for (float x : v) sum += x;
  EXPECT_EQ(sum, 3.0f);
  EXPECT_EQ(v[((1 * 3 + 1) * 3 + 1) * 3 + 1], 1.0f);
}
