// Attention (ONNX opset 23), end to end: the executor against a hand computation of the ONNX
// definition (4-D, GQA, causal with S != L, bool and float masks, an explicit scale), the 3-D form
// as the 4-D one on split heads, the shape rule, the export at opset 23 (one node, passing
// onnx.checker, re-importing as the same graph) and below it (the eager chain, computing the same),
// and the forms import refuses.
#include <gtest/gtest.h>

#include "onnx/onnx_lib.h"
#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "exec/common.h"
#include "rlflow/exec/executor.h"
#include "rlflow/ir/builder.h"
#include "rlflow/ir/composites.h"
#include "rlflow/ir/shape_inference.h"
#include "rlflow/onnx/model_io.h"
#include "onnx/opset_test_helpers.h"

using namespace rlflow;
using namespace rlflow::ir;

using namespace rlflow_onnx_test;

namespace {

constexpr int64_t B = 2, E = 4, Ev = 3;

enum class Mask { kNone, kBool, kFloat2D };

struct Case {
  int64_t hq = 2, hkv = 2, s = 3, l = 3;
  bool causal = false;
  Mask mask = Mask::kNone;
  double scale = 0.0;
};

std::vector<float> values(size_t n, float scale, float offset) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = offset + scale * static_cast<float>((i * 7) % 13);
  return v;
}

// The bool mask (B, 1, S, L): key j hidden from query i when (i + 2 * j + b) % 3 == 2, but never key 0.
bool attends(int64_t b, int64_t i, int64_t j) { return j == 0 || (i + 2 * j + b) % 3 != 2; }
// The float mask (S, L): a bias, -1e9 on one key for the last query.
double bias(const Case& c, int64_t i, int64_t j) { return i == c.s - 1 && j == c.l - 1 ? -1e9 : 0.1 * static_cast<double>(i - j); }

TensorPtr mask_tensor(const Case& c) {
  if (c.mask == Mask::kBool) {
    std::vector<uint8_t> m;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < c.s; ++i)
        for (int64_t j = 0; j < c.l; ++j) m.push_back(attends(b, i, j) ? 1 : 0);
    std::vector<double> d(m.begin(), m.end());
    return Tensor::from_doubles(DType::kBool, {B, 1, c.s, c.l}, d);
  }
  std::vector<double> m;
  for (int64_t i = 0; i < c.s; ++i)
    for (int64_t j = 0; j < c.l; ++j) m.push_back(bias(c, i, j));
  return Tensor::from_doubles(DType::kFloat32, {c.s, c.l}, m);
}

ModelMeta meta_at(int64_t opset) {
  ModelMeta meta;
  meta.opsets = {{"", opset}};
  meta.ir_version = opset >= 23 ? 11 : 8;
  return meta;
}

// Q (B, Hq, S, E), K (B, Hkv, L, E), V (B, Hkv, L, Ev) inputs -> Attention [with the mask a weight].
Graph attention_graph(int64_t opset, const Case& c) {
  GraphBuilder b(meta_at(opset));
  auto q = b.input("q", {DType::kFloat32, {B, c.hq, c.s, E}});
  auto k = b.input("k", {DType::kFloat32, {B, c.hkv, c.l, E}});
  auto v = b.input("v", {DType::kFloat32, {B, c.hkv, c.l, Ev}});
  std::vector<ValueRef> ins{q, k, v};
  if (c.mask != Mask::kNone) ins.push_back(b.weight("mask", mask_tensor(c)));
  b.output(b.op(OpKind::kAttention, ins, AttentionParams{c.causal, c.scale, 0, 0}), "y");
  return std::move(b).build();
}

struct Inputs {
  std::vector<float> q, k, v;
};
Inputs inputs(const Case& c) {
  return {values(static_cast<size_t>(B * c.hq * c.s * E), 0.21f, -1.2f), values(static_cast<size_t>(B * c.hkv * c.l * E), 0.17f, -0.9f),
          values(static_cast<size_t>(B * c.hkv * c.l * Ev), 0.3f, -1.5f)};
}

// The ONNX definition on the 4-D layout, in double.
std::vector<double> hand_attention(const Case& c, const Inputs& in) {
  const double scale = c.scale != 0.0 ? c.scale : 1.0 / std::sqrt(static_cast<double>(E));
  const int64_t group = c.hq / c.hkv;
  std::vector<double> y(static_cast<size_t>(B * c.hq * c.s * Ev), 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < c.hq; ++h) {
      const int64_t g = h / group;
      for (int64_t i = 0; i < c.s; ++i) {
        std::vector<double> w(static_cast<size_t>(c.l));
        double top = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < c.l; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < E; ++e)
            dot += static_cast<double>(in.q[static_cast<size_t>(((b * c.hq + h) * c.s + i) * E + e)]) *
                   static_cast<double>(in.k[static_cast<size_t>(((b * c.hkv + g) * c.l + j) * E + e)]);
          double sc = dot * scale;
          if (c.mask == Mask::kBool && !attends(b, i, j)) sc = -std::numeric_limits<double>::infinity();
          if (c.mask == Mask::kFloat2D) sc += bias(c, i, j);
          if (c.causal && j > i) sc = -std::numeric_limits<double>::infinity();
          w[static_cast<size_t>(j)] = sc;
          top = std::max(top, sc);
        }
        double sum = 0;
        for (auto& x : w) sum += (x = std::exp(x - top));
        for (int64_t d = 0; d < Ev; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < c.l; ++j)
            acc += w[static_cast<size_t>(j)] / sum * static_cast<double>(in.v[static_cast<size_t>(((b * c.hkv + g) * c.l + j) * Ev + d)]);
          y[static_cast<size_t>(((b * c.hq + h) * c.s + i) * Ev + d)] = acc;
        }
      }
    }
  return y;
}

void expect_matches_hand(const Case& c) {
  const Graph g = attention_graph(23, c);
  const Inputs in = inputs(c);
  auto out = executor().run(g, {Tensor::from_vector<float>(DType::kFloat32, {B, c.hq, c.s, E}, in.q),
                                Tensor::from_vector<float>(DType::kFloat32, {B, c.hkv, c.l, E}, in.k),
                                Tensor::from_vector<float>(DType::kFloat32, {B, c.hkv, c.l, Ev}, in.v)});
  ASSERT_TRUE(out.ok()) << out.error().message;
  const auto got = (*out)[0]->as_double();
  const auto want = hand_attention(c, in);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
}

const std::vector<std::pair<std::string, Case>>& cases() {
  static const std::vector<std::pair<std::string, Case>> all = {
      {"plain", Case{}},
      {"GQA 4 query heads on 2 kv heads", Case{4, 2, 3, 5}},
      {"causal, S 3 < L 5 (upper-left aligned)", Case{2, 2, 3, 5, true}},
      {"bool mask (B, 1, S, L)", Case{2, 2, 3, 4, false, Mask::kBool}},
      {"float mask (S, L), causal, GQA, scale 0.25", Case{4, 1, 4, 4, true, Mask::kFloat2D, 0.25}},
  };
  return all;
}

onnx::ModelProto attention_model(const std::vector<std::string>& node_inputs, const std::vector<std::string>& node_outputs,
                                 const std::function<void(onnx::NodeProto*)>& attrs) {
  onnx::ModelProto m;
  m.set_ir_version(11);
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(23);
  auto* g = m.mutable_graph();
  g->set_name("attention");
  auto add_value = [](google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* to, const std::string& name, std::vector<int64_t> shape) {
    auto* vi = to->Add();
    vi->set_name(name);
    auto* t = vi->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    for (auto d : shape) t->mutable_shape()->add_dim()->set_dim_value(d);
  };
  for (const auto& name : node_inputs)
    if (!name.empty()) add_value(g->mutable_input(), name, name == "past_key" || name == "past_value" ? std::vector<int64_t>{1, 2, 2, 4} : std::vector<int64_t>{1, 2, 3, 4});
  auto* n = g->add_node();
  n->set_op_type("Attention");
  n->set_name("attn");
  for (const auto& name : node_inputs) n->add_input(name);
  for (const auto& name : node_outputs) n->add_output(name);
  attrs(n);
  add_value(g->mutable_output(), "y", {1, 2, 3, 4});
  return m;
}

}  // namespace

TEST(Attention, OpTableRow) {
  const auto& info = op_info(OpKind::kAttention);
  EXPECT_EQ(info.name, "Attention");
  EXPECT_EQ(info.onnx_type, "Attention");
  EXPECT_EQ(info.cost, CostClass::kMatMul);
  EXPECT_EQ(op_from_name("Attention"), OpKind::kAttention);
}

TEST(Attention, ExecutorMatchesAHandComputation) {
  for (const auto& [name, c] : cases()) {
    SCOPED_TRACE(name);
    expect_matches_hand(c);
  }
}

// The 3-D form (B, S, H*E) with q_num_heads and kv_num_heads is the 4-D one on the heads split out.
TEST(Attention, ThreeDimensionalInputsAreTheFourDimensionalOnesOnSplitHeads) {
  const Case c{4, 2, 3, 5, true};
  const Inputs in = inputs(c);
  auto to3 = [&](const std::vector<float>& x4, int64_t h, int64_t s, int64_t d) {
    std::vector<float> x3(x4.size());
    for (int64_t b = 0; b < B; ++b)
      for (int64_t hh = 0; hh < h; ++hh)
        for (int64_t i = 0; i < s; ++i)
          for (int64_t e = 0; e < d; ++e)
            x3[static_cast<size_t>(((b * s + i) * h + hh) * d + e)] = x4[static_cast<size_t>(((b * h + hh) * s + i) * d + e)];
    return x3;
  };
  GraphBuilder b(meta_at(23));
  auto q = b.input("q", {DType::kFloat32, {B, c.s, c.hq * E}});
  auto k = b.input("k", {DType::kFloat32, {B, c.l, c.hkv * E}});
  auto v = b.input("v", {DType::kFloat32, {B, c.l, c.hkv * Ev}});
  auto y = b.op(OpKind::kAttention, {q, k, v}, AttentionParams{true, 0.0, c.hq, c.hkv});
  b.output(y, "y");
  const Graph g = std::move(b).build();
  ASSERT_EQ(g.type(y).shape, (Shape{B, c.s, c.hq * Ev}));
  auto out = executor().run(g, {Tensor::from_vector<float>(DType::kFloat32, {B, c.s, c.hq * E}, to3(in.q, c.hq, c.s, E)),
                                Tensor::from_vector<float>(DType::kFloat32, {B, c.l, c.hkv * E}, to3(in.k, c.hkv, c.l, E)),
                                Tensor::from_vector<float>(DType::kFloat32, {B, c.l, c.hkv * Ev}, to3(in.v, c.hkv, c.l, Ev))});
  ASSERT_TRUE(out.ok()) << out.error().message;
  const auto got = (*out)[0]->as_double();
  const auto want = hand_attention(c, in);
  for (int64_t bb = 0; bb < B; ++bb)
    for (int64_t h = 0; h < c.hq; ++h)
      for (int64_t i = 0; i < c.s; ++i)
        for (int64_t d = 0; d < Ev; ++d)
          EXPECT_NEAR(got[static_cast<size_t>(((bb * c.s + i) * c.hq + h) * Ev + d)], want[static_cast<size_t>(((bb * c.hq + h) * c.s + i) * Ev + d)], 1e-5);
}

TEST(Attention, ShapeInferenceChecksHeadsAndMask) {
  const TensorType q{DType::kFloat32, {B, 4, 3, E}}, k{DType::kFloat32, {B, 2, 5, E}}, v{DType::kFloat32, {B, 2, 5, Ev}};
  auto ok = infer_types(OpKind::kAttention, AttentionParams{}, {q, k, v});
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ((*ok)[0], (TensorType{DType::kFloat32, {B, 4, 3, Ev}}));
  // Masks broadcastable to (B, Hq, S, L): bool or Q's type.
  EXPECT_TRUE(infer_types(OpKind::kAttention, AttentionParams{}, {q, k, v, {DType::kBool, {B, 1, 3, 5}}}).ok());
  EXPECT_TRUE(infer_types(OpKind::kAttention, AttentionParams{}, {q, k, v, {DType::kFloat32, {3, 5}}}).ok());
  EXPECT_FALSE(infer_types(OpKind::kAttention, AttentionParams{}, {q, k, v, {DType::kFloat32, {3, 4}}}).ok());
  EXPECT_FALSE(infer_types(OpKind::kAttention, AttentionParams{}, {q, k, v, {DType::kInt64, {3, 5}}}).ok());
  // Query heads must be a multiple of the kv heads; K's head size Q's.
  EXPECT_FALSE(infer_types(OpKind::kAttention, AttentionParams{}, {{DType::kFloat32, {B, 3, 3, E}}, k, v}).ok());
  EXPECT_FALSE(infer_types(OpKind::kAttention, AttentionParams{}, {q, {DType::kFloat32, {B, 2, 5, E + 1}}, v}).ok());
  // The 3-D form needs the head counts.
  const TensorType q3{DType::kFloat32, {B, 3, 4 * E}}, k3{DType::kFloat32, {B, 5, 2 * E}}, v3{DType::kFloat32, {B, 5, 2 * Ev}};
  EXPECT_FALSE(infer_types(OpKind::kAttention, AttentionParams{}, {q3, k3, v3}).ok());
  auto ok3 = infer_types(OpKind::kAttention, AttentionParams{false, 0.0, 4, 2}, {q3, k3, v3});
  ASSERT_TRUE(ok3.ok()) << ok3.error().message;
  EXPECT_EQ((*ok3)[0], (TensorType{DType::kFloat32, {B, 3, 4 * Ev}}));
}

// At opset 23 the op is one Attention node that passes the checker and re-imports as the same graph;
// at 17 and 11 it is the eager chain (Expand for GQA, Where for a bool mask, a constant causal bias),
// which computes the same.
TEST(Attention, ExportIsOneNodeAtOpset23AndTheChainBelow) {
  for (const auto& [name, c] : cases()) {
    SCOPED_TRACE(name);
    const Graph r23 = expect_one_node_at_23(attention_graph(23, c), "Attention");
    for (int64_t opset : {17, 11}) {
      SCOPED_TRACE("opset " + std::to_string(opset));
      const auto [ops, r] = expect_chain_below_23(attention_graph(opset, c), r23);
      EXPECT_EQ(std::count(ops.begin(), ops.end(), "Attention"), 0);
      EXPECT_EQ(std::count(ops.begin(), ops.end(), "MatMul"), 2);
      EXPECT_EQ(std::count(ops.begin(), ops.end(), "Softmax"), 1);
      EXPECT_EQ(std::count(ops.begin(), ops.end(), "Expand"), c.hq != c.hkv ? 2 : 0);
      EXPECT_EQ(std::count(ops.begin(), ops.end(), "Where"), c.mask == Mask::kBool ? 1 : 0);
    }
  }
}

TEST(Attention, TheThreeDimensionalFormIsNotWrittenBelowOpset23) {
  auto build = [](int64_t opset) {
    GraphBuilder b(meta_at(opset));
    auto q = b.input("q", {DType::kFloat32, {B, 3, 2 * E}});
    auto k = b.input("k", {DType::kFloat32, {B, 3, 2 * E}});
    auto v = b.input("v", {DType::kFloat32, {B, 3, 2 * Ev}});
    b.output(b.op(OpKind::kAttention, {q, k, v}, AttentionParams{false, 0.0, 2, 2}), "y");
    return std::move(b).build();
  };
  auto m23 = export_checked(build(23));
  const auto p23 = parse(m23.model_bytes);
  expect_checker_passes(p23);
  EXPECT_TRUE(structurally_equal(build(23), reimport(m23.model_bytes)));
  onnxio::ExportOptions o;
  o.evaluator = &executor();
  auto r = onnxio::export_model(build(17), o, "model.onnx");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUnsupported);
  EXPECT_NE(r.error().message.find("3-D"), std::string::npos) << r.error().message;
}

// What the IR does not model is refused as unsupported (exit 3), never run wrong or kept opaque.
TEST(Attention, ImportRefusesTheFormsItDoesNotModel) {
  auto none = [](onnx::NodeProto*) {};
  {
    auto m = attention_model({"q", "k", "v"}, {"y"}, none);
    auto g = onnxio::import_model(m.SerializeAsString(), "plain", ".", import_options());
    ASSERT_TRUE(g.ok()) << g.error().message;
    EXPECT_EQ(count_kind(*g, OpKind::kAttention), 1u);
  }
  struct Refusal {
    std::string name;
    onnx::ModelProto model;
    std::string says;
  };
  const std::vector<Refusal> refusals = {
      {"past_key/past_value", attention_model({"q", "k", "v", "", "past_key", "past_value"}, {"y", "present_key", "present_value"}, none), "KV cache"},
      {"present outputs", attention_model({"q", "k", "v"}, {"y", "present_key", "present_value"}, none), "output"},
      {"qk_matmul_output", attention_model({"q", "k", "v"}, {"y", "", "", "qk"}, none), "output"},
      {"softcap", attention_model({"q", "k", "v"}, {"y"}, [](onnx::NodeProto* n) {
         auto* a = n->add_attribute();
         a->set_name("softcap");
         a->set_type(onnx::AttributeProto::FLOAT);
         a->set_f(2.0f);
       }), "softcap"},
      {"qk_matmul_output_mode", attention_model({"q", "k", "v"}, {"y"}, [](onnx::NodeProto* n) {
         auto* a = n->add_attribute();
         a->set_name("qk_matmul_output_mode");
         a->set_type(onnx::AttributeProto::INT);
         a->set_i(1);
       }), "qk_matmul_output_mode"},
  };
  for (const auto& r : refusals) {
    SCOPED_TRACE(r.name);
    auto g = onnxio::import_model(r.model.SerializeAsString(), r.name, ".", import_options());
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.error().code, ErrorCode::kUnsupported) << g.error().message;
    EXPECT_NE(g.error().message.find(r.says), std::string::npos) << g.error().message;
  }
}

// tiny_attention_causal.onnx (opset 17) holds four eager attention chains: GPT-style with a constant
// causal mask, BERT-style with a padding mask computed from an input, nn.MultiheadAttention's 3-D
// form, and HF LLaMA's GQA through repeat_kv. At its own opset nothing fuses; at 23 each becomes one
// Attention op (the causal constants as is_causal, the (1, 1, 1, S) padding mask broadcast to
// (1, 1, S, S), the 3-D one between an Unsqueeze and a Squeeze, the LLaMA one reading one kv head),
// the graph computes the same, and the file is written with the ops and passes the checker.
TEST(Attention, TheEagerChainsFuseOnlyAtOpset23) {
  namespace fs = std::filesystem;
  auto g = onnxio::import_model_file((fs::path(RLFLOW_TEST_DATA) / "tiny_attention_causal.onnx").string(), import_options());
  ASSERT_TRUE(g.ok()) << g.error().message;
  ASSERT_EQ(g->meta().opset(""), 17);
  CompositeStats at17;
  recognise_composites(*g, &at17);
  EXPECT_EQ(at17.count("attention"), 0);

  Graph up = *g;
  ASSERT_TRUE(onnxio::set_output_opset(&up, 23).ok());
  CompositeStats off;  // attention off (optimise's fallback candidate): the chains stay
  EXPECT_EQ(count_kind(recognise_composites(up, &off, std::nullopt, {"attention"}), OpKind::kSoftmax), 4u);
  EXPECT_EQ(off.count("attention"), 0);
  CompositeStats st;
  const Graph fused = recognise_composites(up, &st);
  // The chain over an additive float mask input stays a chain: a row the caller masks wholly with
  // -inf is NaN there and not in Attention (AMaskThatCanHoldMinusInfinityIsNotFused...).
  EXPECT_EQ(st.count("attention"), 3);
  EXPECT_EQ(count_kind(fused, OpKind::kAttention), 3u);
  EXPECT_EQ(count_kind(fused, OpKind::kSoftmax), 1u);
  ASSERT_EQ(st.rejections.size(), 1u);
  EXPECT_NE(st.rejections[0].why.find("may hold -inf"), std::string::npos) << st.rejections[0].why;
  int causal = 0, masked = 0, gqa = 0, flat = 0;
  for (const auto& n : fused.nodes()) {
    if (n.kind != OpKind::kAttention) continue;
    const auto& p = std::get<AttentionParams>(n.params);
    causal += p.is_causal;
    if (n.inputs.size() > 3) {
      ++masked;
      EXPECT_EQ(fused.type(n.inputs[3]).shape, (Shape{1, 1, 6, 6}));  // never (B, 1, 1, L): onnxruntime refuses it
    }
    if (fused.type(n.inputs[1]).shape[1] != fused.type(n.inputs[0]).shape[1]) ++gqa;
    if (fused.type(n.inputs[0]).shape[1] == 1) ++flat;
  }
  EXPECT_EQ(causal, 2);
  EXPECT_EQ(masked, 0);
  EXPECT_EQ(gqa, 1);
  EXPECT_EQ(flat, 1);
  EXPECT_TRUE(validate(fused).ok());
  rlflow::testing::expect_same_numbers(*g, fused, 1e-5, 1e-4);

  auto m = export_checked(fused);
  const auto p = parse(m.model_bytes);
  const auto ops = op_types(p);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "Attention"), 3);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "Softmax"), 1);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "Expand"), 0);
  expect_checker_passes(p);
  rlflow::testing::expect_same_numbers(*g, reimport(m.model_bytes), 1e-5, 1e-4);
}

// A chain whose scores another node also reads is left alone, as every recogniser requires.
TEST(Attention, AChainWithAnEscapingInteriorValueIsNotFused) {
  GraphBuilder b(meta_at(23));
  auto q = b.input("q", {DType::kFloat32, {1, 2, 3, E}});
  auto k = b.input("k", {DType::kFloat32, {1, 2, 3, E}});
  auto v = b.input("v", {DType::kFloat32, {1, 2, 3, Ev}});
  auto kt = b.op(OpKind::kTranspose, {k}, TransposeParams{{0, 1, 3, 2}});
  auto scores = b.op(OpKind::kMatMul, {q, kt});
  auto probs = b.op(OpKind::kSoftmax, {scores}, AxisParams{3});
  b.output(b.op(OpKind::kMatMul, {probs, v}), "y");
  const Graph plain = b.build();
  b.output(scores, "scores");
  const Graph escaping = std::move(b).build();
  CompositeStats st;
  recognise_composites(escaping, &st);
  EXPECT_EQ(st.count("attention"), 0);
  CompositeStats ok;
  const Graph fused = recognise_composites(plain, &ok);
  EXPECT_EQ(ok.count("attention"), 1);
  ASSERT_EQ(count_kind(fused, OpKind::kAttention), 1u);
  for (const auto& n : fused.nodes())
    if (n.kind == OpKind::kAttention) EXPECT_EQ(std::get<AttentionParams>(n.params).scale, 1.0);  // no scale in the chain
  rlflow::testing::expect_same_numbers(plain, fused, 1e-6, 1e-5);
}

namespace {

// MatMul(Softmax(MatMul(q, k^T) + mask), v) over a mask of (1, 1, 3, 3), made by `make_mask`.
Graph masked_chain(const std::function<ValueRef(GraphBuilder&)>& make_mask) {
  GraphBuilder b(meta_at(23));
  auto q = b.input("q", {DType::kFloat32, {1, 2, 3, E}});
  auto k = b.input("k", {DType::kFloat32, {1, 2, 3, E}});
  auto v = b.input("v", {DType::kFloat32, {1, 2, 3, Ev}});
  auto kt = b.op(OpKind::kTranspose, {k}, TransposeParams{{0, 1, 3, 2}});
  auto scores = b.op(OpKind::kAdd, {b.op(OpKind::kMatMul, {q, kt}), make_mask(b)});
  auto probs = b.op(OpKind::kSoftmax, {scores}, AxisParams{3});
  b.output(b.op(OpKind::kMatMul, {probs, v}), "y");
  return std::move(b).build();
}

}  // namespace

// A row the mask hides wholly with -inf is NaN through the chain and not through Attention (zeros in
// onnxruntime's kernel, the mean of V once the mask is floored): a mask that can hold -inf (an
// additive float input or one computed from it, a constant with -inf) stays a chain. A mask cast
// from bool and scaled by a finite fill is fused, floored at -1e30 (torch's finfo.min fill would make
// onnxruntime's kernel write zeros for such a row).
TEST(Attention, AMaskThatCanHoldMinusInfinityIsNotFusedAndAFiniteOneIsFloored) {
  const Shape ms{1, 1, 3, 3};
  const Graph input_mask = masked_chain([&](GraphBuilder& b) { return b.input("mask", {DType::kFloat32, ms}); });
  CompositeStats a;
  recognise_composites(input_mask, &a);
  EXPECT_EQ(a.count("attention"), 0);
  ASSERT_FALSE(a.rejections.empty());
  EXPECT_NE(a.rejections.back().why.find("may hold -inf"), std::string::npos) << a.rejections.back().why;

  // A float mask scaled from a float input still can: (1 - m) * finfo.min is -inf for m < 0.
  const Graph scaled_input = masked_chain([&](GraphBuilder& b) {
    auto m = b.input("mask", {DType::kFloat32, ms});
    auto one = b.weight("one", Tensor::from_doubles(DType::kFloat32, {}, {1.0}));
    auto fill = b.weight("fill", Tensor::from_doubles(DType::kFloat32, {}, {-3.4028234663852886e38}));
    return b.op(OpKind::kMul, {b.op(OpKind::kSub, {one, m}), fill});
  });
  CompositeStats si;
  recognise_composites(scaled_input, &si);
  EXPECT_EQ(si.count("attention"), 0);

  // From a bool input, as torch writes a padding mask: finite, fused, floored.
  const Graph from_bool = masked_chain([&](GraphBuilder& b) {
    auto m = b.input("keep", {DType::kBool, ms});
    auto one = b.weight("one", Tensor::from_doubles(DType::kFloat32, {}, {1.0}));
    auto fill = b.weight("fill", Tensor::from_doubles(DType::kFloat32, {}, {-3.4028234663852886e38}));
    auto mf = b.op(OpKind::kCast, {m}, CastParams{DType::kFloat32});
    return b.op(OpKind::kMul, {b.op(OpKind::kSub, {one, mf}), fill});
  });
  CompositeStats s;
  const Graph fused = recognise_composites(from_bool, &s);
  EXPECT_EQ(s.count("attention"), 1);
  int floors = 0;
  for (const auto& n : fused.nodes())
    if (n.kind == OpKind::kOpaque && std::get<OpaqueParams>(n.params).op_type == "Max") ++floors;
  EXPECT_EQ(floors, 1) << "the float mask is floored at -1e30 before Attention";
  rlflow::testing::expect_same_numbers(from_bool, fused, 1e-6, 1e-5);

  const Graph infinite_constant = masked_chain([&](GraphBuilder& b) {
    std::vector<double> m(9, 0.0);
    m[1] = -std::numeric_limits<double>::infinity();
    return b.weight("mask", Tensor::from_doubles(DType::kFloat32, ms, m));
  });
  CompositeStats c;
  recognise_composites(infinite_constant, &c);
  EXPECT_EQ(c.count("attention"), 0);
}
