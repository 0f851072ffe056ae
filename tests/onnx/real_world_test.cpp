// Patterns from real exports (HuggingFace models through torch.onnx): constant chains of arbitrary
// ops fold on import through the executor, and ops the IR carries verbatim get static types and run.
#include <gtest/gtest.h>
#include "onnx/onnx_lib.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "rlflow/exec/executor.h"
#include "rlflow/onnx/model_io.h"

using namespace rlflow;
using namespace rlflow::ir;

namespace {

const exec::Executor& executor() {
  static const exec::Executor ex;
  return ex;
}

struct ModelMaker {
  onnx::ModelProto m;
  onnx::GraphProto* g;
  explicit ModelMaker(int64_t opset = 17) {
    m.set_ir_version(8);
    auto* op = m.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
    g = m.mutable_graph();
    g->set_name("real_world");
  }
  void io(bool input, const std::string& name, int32_t elem, const std::vector<int64_t>& shape) {
    auto* vi = input ? g->add_input() : g->add_output();
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    for (auto d : shape) tt->mutable_shape()->add_dim()->set_dim_value(d);
  }
  void i64(const std::string& name, const std::vector<int64_t>& dims, const std::vector<int64_t>& v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    for (auto d : dims) t->add_dims(d);
    for (auto x : v) t->add_int64_data(x);
  }
  void f32(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (auto d : dims) t->add_dims(d);
    for (auto x : v) t->add_float_data(x);
  }
  onnx::NodeProto* node(const std::string& op, std::vector<std::string> ins, std::vector<std::string> outs) {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(op + "_" + outs[0]);
    for (auto& i : ins) n->add_input(i);
    for (auto& o : outs) n->add_output(o);
    return n;
  }
  Expected<Graph> import() {
    onnxio::ImportOptions o;
    o.evaluator = &executor();
    return onnxio::import_model(m.SerializeAsString(), "real_world", ".", o);
  }
};

void int_attr(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

size_t opaque_count(const Graph& g) {
  size_t c = 0;
  for (const auto& n : g.nodes()) c += n.kind == OpKind::kOpaque;
  return c;
}

// LLaMA's causal mask reads only constants: ConstantOfShape -> Trilu -> Equal -> Where -> Expand.
TEST(RealWorld, CausalMaskChainFoldsIntoAWeight) {
  const float inf = std::numeric_limits<float>::infinity();
  ModelMaker mk;
  mk.io(true, "x", onnx::TensorProto::FLOAT, {1, 3, 3});
  mk.io(false, "y", onnx::TensorProto::FLOAT, {1, 3, 3});
  mk.i64("shape2", {2}, {3, 3});
  mk.i64("shape3", {3}, {1, 3, 3});
  mk.f32("zero", {}, {0.0f});
  mk.f32("neg_inf", {}, {-inf});
  auto* ones = mk.node("ConstantOfShape", {"shape2"}, {"ones"});
  auto* value = ones->add_attribute();
  value->set_name("value");
  value->set_type(onnx::AttributeProto::TENSOR);
  value->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
  value->mutable_t()->add_dims(1);
  value->mutable_t()->add_float_data(1.0f);
  int_attr(mk.node("Trilu", {"ones"}, {"lower"}), "upper", 0);
  mk.node("Equal", {"lower", "zero"}, {"masked"});
  mk.node("Where", {"masked", "neg_inf", "zero"}, {"mask"});
  mk.node("Expand", {"mask", "shape3"}, {"mask3"});
  mk.node("Add", {"x", "mask3"}, {"y"});
  onnxio::ImportStats stats;
  onnxio::ImportOptions o;
  o.evaluator = &executor();
  auto g = onnxio::import_model(mk.m.SerializeAsString(), "causal", ".", o, &stats);
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(opaque_count(*g), 0u);
  EXPECT_GE(stats.folded_nodes, 5);
  auto x = Tensor::from_vector<float>(DType::kFloat32, {1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  auto out = executor().run(*g, {x});
  ASSERT_TRUE(out.ok()) << out.error().message;
  EXPECT_EQ((*out)[0]->as_double(), (std::vector<double>{1, -inf, -inf, 4, 5, -inf, 7, 8, 9}));
}

// DistilBERT's padding mask: Expand(Reshape(Equal(attention_mask, 0)), Shape(scores)). The data is
// not constant, the shape is: the Expand stays an ONNX op, typed statically and run by the executor.
TEST(RealWorld, PaddingMaskExpandOfAnInputIsTypedAndRuns) {
  const float inf = std::numeric_limits<float>::infinity();
  ModelMaker mk;
  mk.io(true, "scores", onnx::TensorProto::FLOAT, {2, 1, 3, 3});
  mk.io(true, "attention_mask", onnx::TensorProto::INT64, {2, 3});
  mk.io(false, "y", onnx::TensorProto::FLOAT, {2, 1, 3, 3});
  mk.i64("zero", {}, {0});
  mk.i64("view", {4}, {2, 1, 1, 3});
  mk.f32("neg_inf", {}, {-inf});
  mk.node("Equal", {"attention_mask", "zero"}, {"pad"});
  mk.node("Reshape", {"pad", "view"}, {"pad4"});
  mk.node("Shape", {"scores"}, {"scores_shape"});
  mk.node("Expand", {"pad4", "scores_shape"}, {"pad_full"});
  mk.node("Where", {"pad_full", "neg_inf", "scores"}, {"y"});
  auto g = mk.import();
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_GE(opaque_count(*g), 2u);  // Equal and Expand (Where too) are carried verbatim
  for (const auto& n : g->nodes())
    if (n.kind == OpKind::kOpaque) EXPECT_TRUE(exec::Executor::supports(n)) << std::get<OpaqueParams>(n.params).op_type;
  std::vector<float> s(18);
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<float>(i);
  auto scores = Tensor::from_vector<float>(DType::kFloat32, {2, 1, 3, 3}, s);
  auto mask = Tensor::from_vector<int64_t>(DType::kInt64, {2, 3}, {1, 1, 0, 1, 0, 0});
  auto out = executor().run(*g, {scores, mask});
  ASSERT_TRUE(out.ok()) << out.error().message;
  const auto y = (*out)[0]->as_double();
  EXPECT_EQ(y[0], 0.0);
  EXPECT_EQ(y[2], -inf);   // batch 0, key 2 is padding
  EXPECT_EQ(y[9], 9.0);    // batch 1, key 0 is real
  EXPECT_EQ(y[10], -inf);  // batch 1, key 1 is padding
}

// A node whose inputs are constant but which would grow the weights (a large mask from a scalar)
// is not folded on import; it stays a node and runs.
TEST(RealWorld, LargeConstantExpansionStaysANode) {
  ModelMaker mk;
  mk.io(true, "x", onnx::TensorProto::FLOAT, {1024, 512});
  mk.io(false, "y", onnx::TensorProto::FLOAT, {1024, 512});
  mk.f32("half", {}, {0.5f});
  mk.i64("shape", {2}, {1024, 512});
  mk.node("Expand", {"half", "shape"}, {"halves"});
  mk.node("Mul", {"x", "halves"}, {"y"});
  auto g = mk.import();
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(opaque_count(*g), 1u);
  auto x = Tensor::from_doubles(DType::kFloat32, {1024, 512}, std::vector<double>(1024 * 512, 4.0));
  auto out = executor().run(*g, {x});
  ASSERT_TRUE(out.ok()) << out.error().message;
  EXPECT_EQ((*out)[0]->as_double()[777], 2.0);
}

}  // namespace
