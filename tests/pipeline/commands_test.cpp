// cost, calibrate and the trainers as library calls (pipeline/cost.h, pipeline/train.h), the setup
// they share with optimise (pipeline/setup.h), and --search's values from the strategy registry.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "printed.h"
#include "rlflow/pipeline/cost.h"
#include "rlflow/pipeline/optimise.h"
#include "rlflow/pipeline/setup.h"
#include "rlflow/pipeline/train.h"
#include "rlflow/search/registry.h"

namespace {

namespace fs = std::filesystem;
using namespace rlflow;

const fs::path kData = RLFLOW_TEST_DATA;

// The table's rows sum to its total, by op type too; the JSON and the text say the same.
TEST(ModelCost, TheTableSumsToItsTotalInItsJsonAndText) {
  pipeline::ModelCostOptions o;
  o.model = (kData / "tiny_cnn.onnx").string();
  o.cost.deterministic = true;
  auto r = pipeline::model_cost(o);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->cost_model, "analytic");
  EXPECT_EQ(r->rows.size(), r->nodes);
  double sum = 0, by_op = 0;
  for (const auto& row : r->rows) sum += row.ms;
  for (const auto& [op, t] : r->by_op) by_op += t.ms;
  EXPECT_GT(r->total_ms, 0);
  EXPECT_NEAR(sum, r->total_ms, 1e-12);
  EXPECT_NEAR(by_op, r->total_ms, 1e-12);
  EXPECT_FALSE(r->cache.has_value());  // analytic is never cached
  const auto j = r->to_json();
  EXPECT_EQ(j["total_ms"].get<double>(), r->total_ms);
  EXPECT_EQ(j["cost_model"]["kind"], "analytic");
  EXPECT_TRUE(j["cache"].is_null());
  EXPECT_FALSE(j.contains("measure"));

  const std::string text = printed(*r);
  EXPECT_NE(text.find("cost model: analytic"), std::string::npos) << text;
  EXPECT_NE(text.find("  by op: Conv x3"), std::string::npos) << text;
}

TEST(ModelCost, ErrorsKeepTheirClass) {
  pipeline::ModelCostOptions o;
  o.model = (kData / "no-such-model.onnx").string();
  o.cost.deterministic = true;
  auto missing = pipeline::model_cost(o);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kBadInput);
  o.model = (kData / "tiny_cnn.onnx").string();
  o.cost.kind = "abacus";
  auto kind = pipeline::model_cost(o);
  ASSERT_FALSE(kind);
  EXPECT_EQ(kind.error().code, ErrorCode::kUsage);
}

// calibrate times ops: a kind that times nothing is a usage error naming the ones that do.
TEST(Calibrate, RefusesAKindThatDoesNotMeasure) {
  pipeline::CalibrateOptions o;
  o.cost.kind = "recorded";
  auto r = pipeline::calibrate_profile(o);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kUsage);
  EXPECT_NE(r.error().message.find("calibrate needs a measuring backend"), std::string::npos) << r.error().message;
}

// The trainers' models are the graphs optimise searches: at the target's opset, composites fused.
TEST(Setup, SearchOpsetFusesTheCompositesTheTargetsOpsetHas) {
  pipeline::SetupOptions o;
  o.models = {(kData / "tiny_rmsnorm.onnx").string()};
  auto plain = pipeline::setup(o);
  ASSERT_TRUE(plain) << plain.error().message;
  o.target = "ort";
  o.search_opset = pipeline::kOpsetAuto;
  o.load_rules = true;
  o.rules_needed_for = "train with";
  o.build_cost = true;
  auto fused = pipeline::setup(o);
  ASSERT_TRUE(fused) << fused.error().message;
  EXPECT_LT(fused->models.front().graph.num_ops(), plain->models.front().graph.num_ops());
  EXPECT_FALSE(fused->rules.empty());
  EXPECT_EQ(fused->cost_kind, "ort");  // auto: the target's cost
  ASSERT_NE(fused->cost, nullptr);
  // Under auto, a model with nothing to fuse keeps its own opset, as optimise --opset auto keeps it.
  pipeline::SetupOptions cnn = o;
  cnn.models = {(kData / "tiny_cnn.onnx").string()};
  cnn.load_rules = cnn.build_cost = false;
  cnn.search_opset.reset();
  auto as_imported = pipeline::setup(cnn);
  ASSERT_TRUE(as_imported) << as_imported.error().message;
  cnn.search_opset = pipeline::kOpsetAuto;
  auto searched = pipeline::setup(cnn);
  ASSERT_TRUE(searched) << searched.error().message;
  EXPECT_EQ(searched->models.front().graph.meta().opset(""), as_imported->models.front().graph.meta().opset(""));
  EXPECT_LT(as_imported->models.front().graph.meta().opset(""), 23);  // so the check could fail
  o.target = "tpu";
  auto bad = pipeline::setup(o);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kUsage);
}

// Numbers and paths are refused before anything is loaded or written.
TEST(TrainAgent, RefusesBadOptionsBeforeAnyWork) {
  pipeline::TrainAgentOptions o;
  o.common.models = {(kData / "tiny_cnn.onnx").string()};
  o.common.out = (fs::temp_directory_path() / "rlflow_commands_test_never.pt").string();
  o.temperature = 0;
  auto t = pipeline::train_agent(o);
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error().code, ErrorCode::kUsage);
  EXPECT_NE(t.error().message.find("--temperature"), std::string::npos);
  o.temperature = 1;
  o.common.out = o.common.models.front();
  auto clash = pipeline::train_agent(o);
  ASSERT_FALSE(clash);
  EXPECT_NE(clash.error().message.find("it would be overwritten"), std::string::npos) << clash.error().message;
  EXPECT_FALSE(fs::exists(fs::temp_directory_path() / "rlflow_commands_test_never.pt"));
}

// --search takes every registered strategy (the agent, registered from rl, included) and none; an
// unknown one named to the library is a usage error that lists them all.
TEST(SearchNames, ComeFromTheRegistryWithRlAndNone) {
  const auto names = pipeline::search_names();
  for (const char* n : {"greedy", "taso", "exhaustive", "rl", "none"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  EXPECT_NE(pipeline::search_help().find("rl (a trained agent"), std::string::npos) << pipeline::search_help();
  const auto* rl = search::find_strategy("rl");
  ASSERT_NE(rl, nullptr);
  EXPECT_FALSE(rl->needs_rules);
  EXPECT_TRUE(rl->budget_counts_actions);

  char tmpl[] = "/tmp/rlflow_commands_test_XXXXXX";
  const fs::path dir = mkdtemp(tmpl);
  pipeline::OptimiseOptions o;
  o.model = (kData / "tiny_cnn.onnx").string();
  o.output = (dir / "o.onnx").string();
  o.search = "magic";
  o.cost.deterministic = true;
  auto r = pipeline::optimise(o);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kUsage);
  EXPECT_NE(r.error().message.find("rl"), std::string::npos) << r.error().message;
  EXPECT_FALSE(fs::exists(o.output));
  fs::remove_all(dir);
}

}  // namespace
