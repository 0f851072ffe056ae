// RotaryEmbedding (ONNX opset 23), end to end: the executor against a hand computation of the
// ONNX definition (4-D X with position_ids and a partial rotary_embedding_dim, interleaved, 3-D X
// with num_heads), the export at opset 23 (one node, passing onnx.checker, re-importing as the same
// graph) and below it (the rotate_half chain, computing the same through the executor).
#include <gtest/gtest.h>

#include "onnx/onnx_lib.h"
#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
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
namespace fs = std::filesystem;

using namespace rlflow_onnx_test;

namespace {

constexpr int64_t B = 2, H = 2, S = 3, D = 6, kMaxPos = 5;

// Caches of (kMaxPos, rot/2) read through position_ids, or (B, S, rot/2) without.
struct Case {
  int64_t rot = 4;  // of D
  bool positions = true;
  bool interleaved = false;
};

std::vector<float> iota_values(size_t n, float scale, float offset) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = offset + scale * static_cast<float>((i * 7) % 11);
  return v;
}

const std::vector<int64_t> kPositions = {4, 0, 2, 1, 1, 3};  // (B, S)

TensorPtr cache(const Case& c, uint64_t seed) {
  const int64_t half = c.rot / 2;
  const Shape s = c.positions ? Shape{kMaxPos, half} : Shape{B, S, half};
  int64_t n = 1;
  for (auto d : s) n *= d;
  return Tensor::from_vector<float>(DType::kFloat32, s, iota_values(static_cast<size_t>(n), 0.17f, -0.8f + 0.1f * static_cast<float>(seed)));
}

// X (B, H, S, D) -> RotaryEmbedding with the case's caches as weights, in a model of `opset`.
Graph rope_graph(int64_t opset, const Case& c) {
  ModelMeta meta;
  meta.opsets = {{"", opset}};
  meta.ir_version = opset >= 23 ? 11 : 8;
  GraphBuilder b(meta);
  auto x = b.input("x", {DType::kFloat32, {B, H, S, D}});
  std::vector<ValueRef> ins{x, b.weight("cos_cache", cache(c, 1)), b.weight("sin_cache", cache(c, 2))};
  if (c.positions) ins.push_back(b.weight("position_ids", Tensor::from_vector<int64_t>(DType::kInt64, {B, S}, kPositions)));
  auto y = b.op(OpKind::kRotaryEmbedding, ins, RotaryParams{c.interleaved, 0, c.rot == D ? 0 : c.rot});
  b.output(y, "y");
  return std::move(b).build();
}

// The ONNX definition, element by element, on X in (B, H, S, D).
std::vector<double> hand_rope(const std::vector<float>& x, const Case& c) {
  const auto cv = cache(c, 1)->as_double(), sv = cache(c, 2)->as_double();
  const int64_t half = c.rot / 2;
  std::vector<double> y(x.begin(), x.end());
  auto at = [&](int64_t b, int64_t h, int64_t s, int64_t d) { return static_cast<size_t>(((b * H + h) * S + s) * D + d); };
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t s = 0; s < S; ++s) {
        const int64_t row = c.positions ? kPositions[static_cast<size_t>(b * S + s)] : b * S + s;
        for (int64_t i = 0; i < half; ++i) {
          const double co = cv[static_cast<size_t>(row * half + i)], si = sv[static_cast<size_t>(row * half + i)];
          const int64_t i1 = c.interleaved ? 2 * i : i, i2 = c.interleaved ? 2 * i + 1 : i + half;
          const double x1 = x[at(b, h, s, i1)], x2 = x[at(b, h, s, i2)];
          y[at(b, h, s, i1)] = co * x1 - si * x2;
          y[at(b, h, s, i2)] = si * x1 + co * x2;
        }
      }
  return y;
}

void expect_matches_hand(const Case& c) {
  const Graph g = rope_graph(23, c);
  const auto xv = iota_values(static_cast<size_t>(B * H * S * D), 0.3f, -1.4f);
  auto out = executor().run(g, {Tensor::from_vector<float>(DType::kFloat32, {B, H, S, D}, xv)});
  ASSERT_TRUE(out.ok()) << out.error().message;
  const auto got = (*out)[0]->as_double();
  const auto want = hand_rope(xv, c);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
}

}  // namespace

TEST(RotaryEmbedding, OpTableRow) {
  const auto& info = op_info(OpKind::kRotaryEmbedding);
  EXPECT_EQ(info.name, "RotaryEmbedding");
  EXPECT_EQ(info.onnx_type, "RotaryEmbedding");
  EXPECT_EQ(info.cost, CostClass::kVector);
  EXPECT_EQ(op_from_name("RotaryEmbedding"), OpKind::kRotaryEmbedding);
}

TEST(RotaryEmbedding, ExecutorMatchesAHandComputation) {
  {
    SCOPED_TRACE("4-D, position_ids, rotary_embedding_dim 4 of 6");
    expect_matches_hand(Case{4, true, false});
  }
  {
    SCOPED_TRACE("4-D, caches (B, S, D/2), whole head");
    expect_matches_hand(Case{D, false, false});
  }
  {
    SCOPED_TRACE("interleaved, position_ids, rotary_embedding_dim 4 of 6");
    expect_matches_hand(Case{4, true, true});
  }
}

// The 3-D form (B, S, H*D) with num_heads is the 4-D one on X transposed to (B, S, H, D).
TEST(RotaryEmbedding, ThreeDimensionalInputIsTheFourDimensionalOneTransposed) {
  const Case c{4, true, false};
  ModelMeta meta;
  meta.opsets = {{"", 23}};
  GraphBuilder b(meta);
  auto x = b.input("x", {DType::kFloat32, {B, S, H * D}});
  auto y = b.op(OpKind::kRotaryEmbedding,
                {x, b.weight("cos", cache(c, 1)), b.weight("sin", cache(c, 2)),
                 b.weight("pos", Tensor::from_vector<int64_t>(DType::kInt64, {B, S}, kPositions))},
                RotaryParams{false, H, 4});
  b.output(y, "y");
  const Graph g = std::move(b).build();
  const auto x4 = iota_values(static_cast<size_t>(B * H * S * D), 0.3f, -1.4f);
  std::vector<float> x3(x4.size());
  for (int64_t bb = 0; bb < B; ++bb)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t s = 0; s < S; ++s)
        for (int64_t d = 0; d < D; ++d)
          x3[static_cast<size_t>(((bb * S + s) * H + h) * D + d)] = x4[static_cast<size_t>(((bb * H + h) * S + s) * D + d)];
  auto out = executor().run(g, {Tensor::from_vector<float>(DType::kFloat32, {B, S, H * D}, x3)});
  ASSERT_TRUE(out.ok()) << out.error().message;
  const auto got = (*out)[0]->as_double();
  const auto want = hand_rope(x4, c);
  for (int64_t bb = 0; bb < B; ++bb)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t s = 0; s < S; ++s)
        for (int64_t d = 0; d < D; ++d)
          EXPECT_NEAR(got[static_cast<size_t>(((bb * S + s) * H + h) * D + d)], want[static_cast<size_t>(((bb * H + h) * S + s) * D + d)], 1e-5);
}

TEST(RotaryEmbedding, ShapeInferenceChecksTheCaches) {
  const TensorType x{DType::kFloat32, {B, H, S, D}}, pos{DType::kInt64, {B, S}};
  const RotaryParams p{false, 0, 4};
  auto ok = infer_types(OpKind::kRotaryEmbedding, p, {x, {DType::kFloat32, {kMaxPos, 2}}, {DType::kFloat32, {kMaxPos, 2}}, pos});
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ((*ok)[0], x);
  // A cache of the whole head's half while only 4 of 6 features rotate.
  EXPECT_FALSE(infer_types(OpKind::kRotaryEmbedding, p, {x, {DType::kFloat32, {kMaxPos, 3}}, {DType::kFloat32, {kMaxPos, 3}}, pos}).ok());
  // Without position_ids the caches are (B, S, rot/2).
  EXPECT_FALSE(infer_types(OpKind::kRotaryEmbedding, p, {x, {DType::kFloat32, {kMaxPos, 2}}, {DType::kFloat32, {kMaxPos, 2}}}).ok());
  EXPECT_TRUE(infer_types(OpKind::kRotaryEmbedding, p, {x, {DType::kFloat32, {B, S, 2}}, {DType::kFloat32, {B, S, 2}}}).ok());
  // An odd rotary_embedding_dim, and a 3-D X without num_heads.
  EXPECT_FALSE(infer_types(OpKind::kRotaryEmbedding, RotaryParams{false, 0, 3}, {x, {DType::kFloat32, {B, S, 1}}, {DType::kFloat32, {B, S, 1}}}).ok());
  EXPECT_FALSE(infer_types(OpKind::kRotaryEmbedding, RotaryParams{false, 0, 0},
                           {{DType::kFloat32, {B, S, H * D}}, {DType::kFloat32, {B, S, 3}}, {DType::kFloat32, {B, S, 3}}})
                   .ok());
}

// At opset 23 the op is one RotaryEmbedding node that passes the checker and re-imports as the same
// graph; at 17 and 11 (Unsqueeze's axes an input, then an attribute) it is the rotate_half chain,
// which computes the same.
TEST(RotaryEmbedding, ExportIsOneNodeAtOpset23AndTheChainBelow) {
  for (const Case& c : {Case{4, true, false}, Case{D, false, false}, Case{D, true, false}}) {
    SCOPED_TRACE("rot " + std::to_string(c.rot) + (c.positions ? " with position_ids" : " without position_ids"));
    const Graph r23 = expect_one_node_at_23(rope_graph(23, c), "RotaryEmbedding");
    for (int64_t opset : {17, 11}) {
      SCOPED_TRACE("opset " + std::to_string(opset));
      const auto [ops, r] = expect_chain_below_23(rope_graph(opset, c), r23);
      EXPECT_EQ(std::count(ops.begin(), ops.end(), "RotaryEmbedding"), 0);
      EXPECT_EQ(std::count(ops.begin(), ops.end(), "Gather"), c.positions ? 2 : 0);
      EXPECT_EQ(std::count(ops.begin(), ops.end(), "Slice"), c.rot < D ? 3 : 2);
      EXPECT_EQ(std::count(ops.begin(), ops.end(), "Mul"), 4);
      EXPECT_EQ(ops.back(), "Concat");
    }
  }
}

TEST(RotaryEmbedding, TheInterleavedFormIsNotWrittenBelowOpset23) {
  const Case c{4, true, true};
  auto m23 = export_checked(rope_graph(23, c));
  const auto p23 = parse(m23.model_bytes);
  ASSERT_EQ(p23.graph().node_size(), 1);
  bool interleaved = false;
  for (const auto& a : p23.graph().node(0).attribute()) interleaved = interleaved || (a.name() == "interleaved" && a.i() == 1);
  EXPECT_TRUE(interleaved);
  const Graph back = reimport(m23.model_bytes);
  ASSERT_EQ(back.num_ops(), rope_graph(23, c).num_ops());
  onnxio::ExportOptions o;
  o.evaluator = &executor();
  auto r = onnxio::export_model(rope_graph(17, c), o, "model.onnx");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUnsupported);
  EXPECT_NE(r.error().message.find("interleaved"), std::string::npos) << r.error().message;
}

// tiny_rope.onnx (opset 17) holds HF LLaMA's rotary embedding as PyTorch writes it, for q and k: cos
// and sin computed from the positions (an input), unsqueezed to (B, 1, S, D). At its own opset
// nothing fuses; at 23 each rotate_half chain is one RotaryEmbedding reading the caches' first half,
// one slice shared by q and k, and the graph computes the same and is written with the op.
TEST(RotaryEmbedding, TheLlamaChainFusesOnlyAtOpset23) {
  auto g = onnxio::import_model_file((fs::path(RLFLOW_TEST_DATA) / "tiny_rope.onnx").string(), import_options());
  ASSERT_TRUE(g.ok()) << g.error().message;
  ASSERT_EQ(g->meta().opset(""), 17);
  CompositeStats at17;
  const Graph same = recognise_composites(*g, &at17);
  EXPECT_EQ(at17.count("rotary_embedding"), 0);
  EXPECT_EQ(at17.total(), at17.count("noop_cast"));  // only the float32 -> float32 Casts go
  EXPECT_EQ(count_kind(same, OpKind::kRotaryEmbedding), 0u);
  EXPECT_EQ(same.num_ops(), g->num_ops() - static_cast<size_t>(at17.count("noop_cast")));

  Graph up = *g;
  ASSERT_TRUE(onnxio::set_output_opset(&up, 23).ok());
  CompositeStats st;
  const Graph fused = recognise_composites(up, &st);
  EXPECT_EQ(st.count("rotary_embedding"), 2);
  EXPECT_EQ(count_kind(fused, OpKind::kRotaryEmbedding), 2u);
  EXPECT_EQ(count_kind(fused, OpKind::kConcat), 1u);  // cat(freqs, freqs) stays: cos and sin read it
  EXPECT_EQ(count_kind(fused, OpKind::kSlice), 2u);   // each cache's first half, once for q and k
  EXPECT_TRUE(validate(fused).ok());
  rlflow::testing::expect_same_numbers(*g, fused, 1e-5, 1e-5);

  auto m = export_checked(fused);
  const auto p = parse(m.model_bytes);
  const auto ops = op_types(p);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "RotaryEmbedding"), 2);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "Neg"), 0);
  expect_checker_passes(p);
  rlflow::testing::expect_same_numbers(*g, reimport(m.model_bytes), 1e-5, 1e-5);
}

// With the positions an initializer the importer folds cos and sin into weights: their halves are
// checked by value, and the caches become weights of their first half.
TEST(RotaryEmbedding, FoldedCachesFuseByValueAndAChainWhoseHalvesDifferDoesNot) {
  auto load = [](bool distinct_halves) {
    onnx::ModelProto m;
    std::ifstream f(fs::path(RLFLOW_TEST_DATA) / "tiny_rope.onnx", std::ios::binary);
    EXPECT_TRUE(m.ParseFromString(std::string(std::istreambuf_iterator<char>(f), {})));
    auto* gp = m.mutable_graph();
    for (int i = 0; i < gp->input_size(); ++i)
      if (gp->input(i).name() == "pos") gp->mutable_input()->DeleteSubrange(i, 1);
    auto* pos = gp->add_initializer();
    pos->set_name("pos");
    pos->set_data_type(onnx::TensorProto::FLOAT);
    pos->add_dims(1);
    pos->add_dims(4);
    for (float v : {0.f, 1.f, 2.f, 3.f}) pos->add_float_data(v);
    if (distinct_halves) {  // cos scaled by a vector whose halves differ: no longer a cache written twice
      auto* t = gp->add_initializer();
      t->set_name("uneven_scale");
      t->set_data_type(onnx::TensorProto::FLOAT);
      t->add_dims(8);
      for (int k = 0; k < 8; ++k) t->add_float_data(1.f + 0.01f * static_cast<float>(k));
      for (auto& n : *gp->mutable_node())
        if (n.output(0) == "cos_scaled") *n.mutable_input(1) = "uneven_scale";
    }
    auto g = onnxio::import_model(m.SerializeAsString(), "folded", ".", import_options());
    EXPECT_TRUE(g.ok()) << g.error().message;
    Graph out = g.ok() ? std::move(*g) : Graph{};
    EXPECT_TRUE(onnxio::set_output_opset(&out, 23).ok());
    return out;
  };
  const Graph g = load(false);
  CompositeStats st;
  const Graph fused = recognise_composites(g, &st);
  EXPECT_EQ(st.count("rotary_embedding"), 2);
  EXPECT_EQ(count_kind(fused, OpKind::kSlice), 0u);
  for (const auto& n : fused.nodes())
    if (n.kind == OpKind::kRotaryEmbedding) {
      EXPECT_EQ(fused.node(n.inputs[1].node).kind, OpKind::kWeight);
      EXPECT_EQ(fused.type(n.inputs[1]).shape, (Shape{1, 4, 4}));
    }
  rlflow::testing::expect_same_numbers(g, fused, 1e-5, 1e-5);

  const Graph other = load(true);
  CompositeStats none;
  recognise_composites(other, &none);
  EXPECT_EQ(none.count("rotary_embedding"), 0);
}
