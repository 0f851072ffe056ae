// Long random chains of (rule, location) choices never change what a graph computes.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "rlflow/exec/compare.h"
#include "rlflow/exec/executor.h"
#include "rlflow/ir/builder.h"
#include "rlflow/onnx/model_io.h"
#include "rlflow/rules/library_io.h"
#include "rlflow/rules/match.h"

using namespace rlflow;
using namespace rlflow::ir;

namespace {

// A graph with many overlapping opportunities: parallel convs (same and different kernels),
// conv + batch norm + relu, parallel matmuls with bias adds, transposes and reshapes.
Graph opportunity_graph() {
  GraphBuilder b;
  auto x = b.input("x", {DType::kFloat32, {1, 4, 6, 6}});
  auto w = [&](Shape s, uint64_t seed) { return b.weight("w" + std::to_string(seed), random_tensor(std::move(s), seed)); };
  auto c1 = b.conv(x, w({4, 4, 3, 3}, 1), {1, 1}, {1, 1, 1, 1});
  auto c2 = b.conv(x, w({4, 4, 3, 3}, 2), {1, 1}, {1, 1, 1, 1});
  auto c3 = b.conv(x, w({2, 4, 1, 1}, 3), {1, 1}, {0, 0, 0, 0});
  std::vector<float> var = {0.5f, 1.5f, 1.0f, 2.0f};
  auto bn = b.op(OpKind::kBatchNorm, {c1, w({4}, 4), w({4}, 5), w({4}, 6), b.weight("var", Tensor::from_vector(DType::kFloat32, {4}, var))},
                 NormParams{1, 1e-5});
  auto r1 = b.relu(bn);
  auto r2 = b.relu(c2);
  auto cat = b.op(OpKind::kConcat, {r1, r2, c3}, AxisParams{1});
  auto flat = b.op(OpKind::kReshape, {cat}, ReshapeParams{{1, 10, 36}});
  auto tr = b.op(OpKind::kTranspose, {flat}, TransposeParams{{0, 2, 1}});
  auto tr2 = b.op(OpKind::kTranspose, {tr}, TransposeParams{{0, 2, 1}});
  auto back = b.op(OpKind::kTranspose, {tr2}, TransposeParams{{0, 2, 1}});
  auto q = b.add(b.matmul(back, w({10, 8}, 7)), w({8}, 8));
  auto k = b.add(w({8}, 9), b.matmul(back, w({10, 8}, 10)));
  auto v = b.matmul(back, w({10, 8}, 11));
  auto s = b.op(OpKind::kSoftmax, {b.matmul(q, b.op(OpKind::kTranspose, {k}, TransposeParams{{0, 2, 1}}))}, AxisParams{2});
  b.output(b.relu(b.relu(b.matmul(s, v))), "y");
  return b.build();
}

struct Outcome {
  int applications = 0;
  int failures = 0;
  std::string first_failure;
};

Outcome random_chains(const Graph& start, const rules::RuleLibrary& lib, int applications, uint64_t seed) {
  std::mt19937_64 rng(seed);
  exec::CompareOptions co;
  co.compute = DType::kFloat64;
  co.atol = 1e-9;
  co.rtol = 1e-7;
  Outcome out;
  Graph g = start;
  int steps_without_match = 0;
  while (out.applications < applications && steps_without_match < 3) {
    std::vector<std::pair<const rules::Rule*, rules::Match>> actions;
    for (const auto& r : lib.rules)
      for (auto& m : rules::find_matches(g, r)) actions.emplace_back(&r, std::move(m));
    if (actions.empty()) {  // a fixpoint: start a new chain
      ++steps_without_match;
      g = start;
      continue;
    }
    steps_without_match = 0;
    const auto& [r, m] = actions[rng() % actions.size()];
    auto next = rules::apply(g, *r, m);
    ++out.applications;
    if (!next) {  // a rejected match is not a wrong result, but find_matches should not offer it
      ++out.failures;
      if (out.first_failure.empty()) out.first_failure = "apply rejected an offered match: " + next.error().message;
      continue;
    }
    auto st = validate(*next);
    auto c = exec::compare_graphs(start, *next, co);
    if (!st.ok() || !c || !c->ok) {
      ++out.failures;
      if (out.first_failure.empty())
        out.first_failure = r->name + " at " + m.str() + ": " + (!st.ok() ? st.error().message : !c ? c.error().message : c->message);
      g = start;
      continue;
    }
    g = std::move(*next);
    if (rng() % 16 == 0) g = start;  // keep chains varied
  }
  return out;
}

// The default set: what search and RL use. The generated rules outside it are each verified on
// their own instances (rules_test), but offering all of them at every step would make these
// chains slow.
const rules::RuleLibrary& library() {
  static rules::RuleLibrary lib = [] {
    auto all = *rules::load_library(RLFLOW_SOURCE_DIR "/configs/rules/default.json");
    rules::RuleLibrary d;
    for (auto& r : all.rules)
      if (r.in_default_set) d.rules.push_back(std::move(r));
    d.reindex();
    return d;
  }();
  return lib;
}

}  // namespace

TEST(Property, RandomRewriteChainsPreserveSemanticsOnASyntheticGraph) {
  auto o = random_chains(opportunity_graph(), library(), 1000, 1);
  EXPECT_EQ(o.applications, 1000);
  EXPECT_EQ(o.failures, 0) << o.first_failure;
}

TEST(Property, RandomRewriteChainsPreserveSemanticsOnTheSmallModels) {
  exec::Executor ex;
  onnxio::ImportOptions io;
  io.evaluator = &ex;
  int models = 0;
  for (const auto& e : std::filesystem::directory_iterator(RLFLOW_TEST_DATA)) {
    if (e.path().extension() != ".onnx" || e.path().filename() == "opaque_op.onnx") continue;
    if (e.path().filename() == "dynamic_batch.onnx") io.input_shapes = {{"x", {2, 16}}};
    else io.input_shapes.clear();
    auto g = onnxio::import_model_file(e.path().string(), io);
    ASSERT_TRUE(g.ok()) << g.error().message;
    auto o = random_chains(*g, library(), 1000, 2);
    EXPECT_EQ(o.failures, 0) << e.path() << ": " << o.first_failure;
    ++models;
  }
  EXPECT_GE(models, 5);
}
