// RMSNorm (ONNX RMSNormalization, opset 23), end to end: the executor's numbers against a hand
// computation, the export at opset 23 (one node, passing onnx.checker) and below it (the chain
// PyTorch writes), both equal to the original through the executor, and composite recognition
// fusing the chain of tests/data/tiny_rmsnorm.onnx only where the opset has the op.
#include <gtest/gtest.h>

#include "onnx/onnx_lib.h"
#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "exec/common.h"
#include "rlflow/exec/executor.h"
#include "rlflow/ir/builder.h"
#include "rlflow/ir/composites.h"
#include "rlflow/onnx/model_io.h"
#include "onnx/opset_test_helpers.h"

using namespace rlflow;
using namespace rlflow::ir;
namespace fs = std::filesystem;

using namespace rlflow_onnx_test;

namespace {

const fs::path kData = RLFLOW_TEST_DATA;

GraphBuilder builder_at_opset(int64_t opset) {
  ModelMeta meta;
  meta.opsets = {{"", opset}};
  return GraphBuilder(meta);
}

// x [2, 3, 8] -> RMSNorm over the last axis (or the last two) with a scale, in a model of opset 17 raised
// to `opset` as `optimise --opset` does (which raises the IR version with it).
Graph rms_graph(int64_t opset, int64_t axis = 2) {
  GraphBuilder b = builder_at_opset(17);
  auto x = b.input("x", {DType::kFloat32, {2, 3, 8}});
  const Shape scale_shape = axis == 2 ? Shape{8} : Shape{3, 8};
  auto y = b.op(OpKind::kRMSNorm, {x, b.weight("scale", random_tensor(scale_shape, 5))},
                NormParams{axis, static_cast<double>(1e-5f)});  // ONNX stores epsilon as float
  b.output(y, "y");
  Graph g = std::move(b).build();
  g.meta().ir_version = 8;
  if (opset > 17) EXPECT_TRUE(onnxio::set_output_opset(&g, opset).ok());
  return g;
}

}  // namespace

TEST(RMSNorm, OpTableRow) {
  const auto& info = op_info(OpKind::kRMSNorm);
  EXPECT_EQ(info.name, "RMSNorm");
  EXPECT_EQ(info.onnx_type, "RMSNormalization");
  EXPECT_EQ(info.cost, CostClass::kVector);
  EXPECT_EQ(op_from_name("RMSNorm"), OpKind::kRMSNorm);
}

TEST(RMSNorm, ExecutorMatchesAHandComputation) {
  GraphBuilder b = builder_at_opset(23);
  auto x = b.input("x", {DType::kFloat32, {2, 4}});
  auto y = b.op(OpKind::kRMSNorm, {x, b.weight("scale", Tensor::from_vector<float>(DType::kFloat32, {4}, {1.f, 2.f, 0.5f, -1.f}))},
                NormParams{1, 0.25});
  b.output(y, "y");
  const Graph g = std::move(b).build();
  const std::vector<float> xv = {1, 2, 3, 4, -2, 0, 2, 0};
  auto out = executor().run(g, {Tensor::from_vector<float>(DType::kFloat32, {2, 4}, xv)});
  ASSERT_TRUE(out.ok()) << out.error().message;
  const auto got = (*out)[0]->as_double();
  ASSERT_EQ(got.size(), 8u);
  // Row 1: mean(x^2) = 30/4 = 7.5, rms = sqrt(7.75). Row 2: mean(x^2) = 8/4 = 2, rms = sqrt(2.25) = 1.5.
  const double r1 = std::sqrt(7.75), r2 = 1.5;
  const std::vector<double> scale = {1, 2, 0.5, -1};
  for (int j = 0; j < 4; ++j) {
    EXPECT_NEAR(got[static_cast<size_t>(j)], xv[static_cast<size_t>(j)] / r1 * scale[static_cast<size_t>(j)], 1e-6) << j;
    EXPECT_NEAR(got[static_cast<size_t>(4 + j)], xv[static_cast<size_t>(4 + j)] / r2 * scale[static_cast<size_t>(j)], 1e-6) << j;
  }
}

TEST(RMSNorm, ShapeInferenceRejectsAScaleThatDoesNotFit) {
  GraphBuilder b = builder_at_opset(23);
  auto x = b.input("x", {DType::kFloat32, {2, 4}});
  auto bad = infer_types(OpKind::kRMSNorm, NormParams{1, 1e-5}, {b.type(x), TensorType{DType::kFloat32, {3}}});
  EXPECT_FALSE(bad.ok());
  auto ok = infer_types(OpKind::kRMSNorm, NormParams{1, 1e-5}, {b.type(x), TensorType{DType::kFloat32, {4}}});
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ((*ok)[0], b.type(x));
}

// At opset 23 the op is one RMSNormalization node that passes the checker and re-imports as the same
// graph; at 17 and 18 (ReduceMean's axes an attribute, then an input) it is the chain, which computes
// the same and which composite recognition fuses back into the op.
TEST(RMSNorm, ExportIsOneNodeAtOpset23AndTheChainBelow) {
  for (int64_t axis : {2, 1}) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    const Graph r23 = expect_one_node_at_23(rms_graph(23, axis), "RMSNormalization");
    for (int64_t opset : {17, 18}) {
      SCOPED_TRACE("opset " + std::to_string(opset));
      const Graph g = rms_graph(opset, axis);
      const auto [ops, r] = expect_chain_below_23(g, r23);
      EXPECT_EQ(ops, (std::vector<std::string>{"Pow", "ReduceMean", "Add", "Sqrt", "Div", "Mul"}));
      EXPECT_EQ(count_kind(r, OpKind::kRMSNorm), 0u);
      CompositeStats none;
      EXPECT_EQ(recognise_composites(r, &none).num_ops(), r.num_ops());  // the file's own opset has no RMSNorm
      EXPECT_EQ(none.count("rms_norm"), 0);
      CompositeStats st;
      const Graph fused = recognise_composites(r, &st, kRMSNormOpset);
      EXPECT_EQ(st.count("rms_norm"), 1);
      EXPECT_TRUE(structurally_equal(fused, g)) << "the chain fuses back into the op it was written from";
    }
  }
}

TEST(RMSNorm, ImportReadsTheAttributesAndRefusesAnotherStashType) {
  auto m = parse(export_checked(rms_graph(23)).model_bytes);
  auto* n = m.mutable_graph()->mutable_node(0);
  for (auto& a : *n->mutable_attribute())
    if (a.name() == "axis") a.set_i(-1);
  auto g = onnxio::import_model(m.SerializeAsString(), "m", ".", import_options());
  ASSERT_TRUE(g.ok()) << g.error().message;
  const Node& rn = g->node(g->outputs()[0].value.node);
  ASSERT_EQ(rn.kind, OpKind::kRMSNorm);
  EXPECT_EQ(std::get<NormParams>(rn.params).axis, 2);  // -1 normalised
  EXPECT_NEAR(std::get<NormParams>(rn.params).epsilon, 1e-5, 1e-12);
  auto* stash = n->add_attribute();
  stash->set_name("stash_type");
  stash->set_type(onnx::AttributeProto::INT);
  stash->set_i(10);  // float16
  auto bad = onnxio::import_model(m.SerializeAsString(), "m", ".", import_options());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::kUnsupported);
  EXPECT_NE(bad.error().message.find("stash_type"), std::string::npos) << bad.error().message;
}

// tiny_rmsnorm.onnx (opset 17) holds HF LlamaRMSNorm as PyTorch writes it: float32 Casts, Pow,
// ReduceMean, Add, Sqrt, Div(1, .), Mul(x, .), Mul(weight, .). At its own opset nothing fuses; at
// 23 the chain is one RMSNorm, the graph computes the same, and it is written as one node.
TEST(RMSNorm, TheLlamaChainFusesOnlyAtOpset23) {
  auto g = onnxio::import_model_file((kData / "tiny_rmsnorm.onnx").string(), import_options());
  ASSERT_TRUE(g.ok()) << g.error().message;
  ASSERT_EQ(g->meta().opset(""), 17);
  CompositeStats at17;
  const Graph same = recognise_composites(*g, &at17);
  EXPECT_EQ(at17.count("rms_norm"), 0);
  EXPECT_EQ(at17.total(), at17.count("noop_cast"));  // only the float32 -> float32 Casts go
  EXPECT_EQ(count_kind(same, OpKind::kRMSNorm), 0u);
  EXPECT_EQ(same.num_ops(), g->num_ops() - static_cast<size_t>(at17.count("noop_cast")));

  Graph up = *g;
  ASSERT_TRUE(onnxio::set_output_opset(&up, 23).ok());
  CompositeStats st;
  const Graph fused = recognise_composites(up, &st);
  EXPECT_EQ(st.count("rms_norm"), 1);
  EXPECT_EQ(st.total(), 1 + st.count("noop_cast"));  // a no-op Cast outside the chain goes too
  EXPECT_EQ(count_kind(fused, OpKind::kRMSNorm), 1u);
  EXPECT_EQ(count_kind(fused, OpKind::kPow), 0u);
  EXPECT_EQ(count_kind(fused, OpKind::kSqrt), 0u);
  EXPECT_EQ(count_kind(fused, OpKind::kReduceMean), 0u);
  EXPECT_GE(st.removed_nodes, 6);
  for (const auto& n : fused.nodes())
    if (n.kind == OpKind::kRMSNorm) {
      EXPECT_EQ(std::get<NormParams>(n.params).axis, 2);
      EXPECT_NEAR(std::get<NormParams>(n.params).epsilon, 1e-6, 1e-12);
    }
  rlflow::testing::expect_same_numbers(*g, fused, 1e-5, 1e-5);

  auto m = export_checked(fused);
  const auto p = parse(m.model_bytes);
  const auto ops = op_types(p);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "RMSNormalization"), 1);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "Pow"), 0);
  expect_checker_passes(p);
  const Graph back = reimport(m.model_bytes);
  rlflow::testing::expect_same_numbers(*g, back, 1e-5, 1e-5);
  // Written at the input's opset instead, the op goes back to the chain.
  Graph down = fused;
  down.meta().opsets = g->meta().opsets;
  down.meta().ir_version = g->meta().ir_version;
  const auto ops17 = op_types(parse(export_checked(down).model_bytes));
  EXPECT_EQ(std::count(ops17.begin(), ops17.end(), "RMSNormalization"), 0);
  EXPECT_EQ(std::count(ops17.begin(), ops17.end(), "ReduceMean"), 1);
}

// The dynamo exporter writes rsqrt as Reciprocal(Sqrt(.)); the IR keeps Reciprocal opaque, and the
// chain through it fuses all the same.
TEST(RMSNorm, TheChainThroughReciprocalFuses) {
  auto m = parse([] {
    std::ifstream f(kData / "tiny_rmsnorm.onnx", std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  }());
  bool replaced = false;
  for (auto& n : *m.mutable_graph()->mutable_node())
    if (n.op_type() == "Div" && n.output(0) == "inv_rms") {
      n.set_op_type("Reciprocal");
      const std::string rms = n.input(1);
      n.clear_input();
      n.add_input(rms);
      replaced = true;
    }
  ASSERT_TRUE(replaced);
  auto g = onnxio::import_model(m.SerializeAsString(), "reciprocal", ".", import_options());
  ASSERT_TRUE(g.ok()) << g.error().message;
  ASSERT_TRUE(onnxio::set_output_opset(&*g, 23).ok());
  CompositeStats st;
  const Graph fused = recognise_composites(*g, &st);
  EXPECT_EQ(st.count("rms_norm"), 1);
  EXPECT_EQ(count_kind(fused, OpKind::kRMSNorm), 1u);
  EXPECT_EQ(count_kind(fused, OpKind::kOpaque), 0u);
  rlflow::testing::expect_same_numbers(*g, fused, 1e-5, 1e-5);  // the executor runs opaque Reciprocal
}
