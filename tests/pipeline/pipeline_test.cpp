// optimise as a library: the typed report describes the file written, each candidate has a verdict,
// and a refusal leaves no file.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <set>
#include <string>

#include "rlflow/cost/factory.h"
#include "rlflow/cost/memo.h"
#include "rlflow/exec/executor.h"
#include "rlflow/onnx/model_io.h"
#include "rlflow/pipeline/load.h"
#include "rlflow/pipeline/optimise.h"
#include "rlflow/rules/library_io.h"
#include "rlflow/search/optimizer.h"

namespace {

namespace fs = std::filesystem;
using namespace rlflow;

const fs::path kData = RLFLOW_TEST_DATA;

class PipelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "rlflow_pipeline_test_XXXXXX").string();
    dir_ = mkdtemp(tmpl.data());
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  // Deterministic: the recorded H100 cost (replayed timings), no time limit, nothing measured.
  pipeline::OptimiseOptions options(const std::string& model) const {
    pipeline::OptimiseOptions o;
    o.target = "h100";
    o.model = (kData / model).string();
    o.output = (dir_ / "out.onnx").string();
    o.cost.deterministic = true;
    o.measure = "off";
    return o;
  }
  fs::path dir_;
};

double cost_of_file(const std::string& path, const std::string& kind) {
  exec::Executor ex;
  auto g = pipeline::load_model(path, {}, ex);
  EXPECT_TRUE(g) << g.error().message;
  cost::CostOptions co;
  co.kind = kind;
  auto m = cost::make_cost_model(co);
  EXPECT_TRUE(m) << m.error().message;
  cost::MemoCost memo(**m);
  auto c = memo.cost(*g);
  EXPECT_TRUE(c);
  return *c;
}

TEST_F(PipelineTest, TheReportDescribesTheFileWrittenAndGivesEachCandidateAVerdict) {
  auto o = options("tiny_cnn.onnx");
  auto r = pipeline::optimise(o);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_TRUE(fs::exists(o.output));
  ASSERT_TRUE(r->cost.has_value());
  EXPECT_EQ(r->cost->model, "recorded");
  // The claim is the written file's cost, re-imported.
  EXPECT_NEAR(r->cost->after_ms, cost_of_file(o.output, "recorded"), 1e-9 * r->cost->before_ms);
  EXPECT_NEAR(r->cost->before_ms, cost_of_file(o.model, "recorded"), 1e-9 * r->cost->before_ms);
  ASSERT_TRUE(r->chosen.has_value()) << r->kept_input;
  ASSERT_LT(*r->chosen, r->candidates.size());
  EXPECT_EQ(r->candidates[*r->chosen].verdict, pipeline::Verdict::kWritten);
  EXPECT_EQ(*r->chosen, r->candidates.size() - 1) << "candidates after the written one are never tried";
  EXPECT_LT(r->cost->after_ms, r->cost->before_ms);
  EXPECT_EQ(r->steps.size(), r->candidates[*r->chosen].steps);
  EXPECT_GT(r->steps.size(), 0u);
  EXPECT_TRUE(r->kept_input.empty());
  for (const auto& c : r->candidates) {
    if (c.verdict != pipeline::Verdict::kWritten) EXPECT_FALSE(c.why.empty()) << c.label;
    ASSERT_TRUE(c.written_ms.has_value()) << "every verified candidate is priced as written: " << c.label;
  }
  EXPECT_EQ(r->verification.method, "reference executor");
  EXPECT_TRUE(r->verification.ok);
  EXPECT_FALSE(r->measured);
  EXPECT_FALSE(r->not_measured.empty());

  const auto j = r->to_json();
  EXPECT_EQ(j["cost"]["after_ms"].get<double>(), r->cost->after_ms);
  EXPECT_EQ(j["cost"]["describes"], "the file written, re-imported");
  EXPECT_EQ(j["search_report"]["strategy"], "taso");
  EXPECT_EQ(j["steps"].size(), r->steps.size());
  EXPECT_EQ(j["verification"]["ok"], true);
  EXPECT_EQ(j.contains("predicted"), r->rewritten);
}

// tiny_residual's Conv+Relu pairs: the search credits their fusion, but ONNX writes them as two
// ops, so the file as written prices no faster than the input and is not kept.
TEST_F(PipelineTest, ACandidateWhoseFileIsNoFasterAsWrittenIsNotKept) {
  auto o = options("tiny_residual.onnx");
  auto r = pipeline::optimise(o);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_TRUE(r->rewritten) << "the search proposes a rewrite";
  EXPECT_FALSE(r->chosen.has_value());
  ASSERT_FALSE(r->candidates.empty());
  for (const auto& c : r->candidates) {
    EXPECT_EQ(c.verdict, pipeline::Verdict::kNoWrittenGain) << c.label << ": " << c.why;
    ASSERT_TRUE(c.written_ms.has_value());
    EXPECT_GE(*c.written_ms, r->cost->before_ms);
    EXPECT_LT(c.predicted_ms, r->cost->before_ms) << "only graphs the search predicts faster are candidates";
  }
  EXPECT_EQ(r->kept_input, r->candidates.back().why);
  EXPECT_EQ(r->before.op_counts, r->after.op_counts);
  EXPECT_NEAR(r->cost->after_ms, r->cost->before_ms, 1e-9 * r->cost->before_ms);
  EXPECT_TRUE(r->to_json()["kept_input"].is_string());
}

TEST_F(PipelineTest, TheWrittenStepsReplayOnTheInputToTheWrittenGraph) {
  auto o = options("tiny_cnn.onnx");
  o.composites = false;  // the steps then start from the graph as imported
  auto r = pipeline::optimise(o);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_TRUE(r->chosen.has_value()) << r->kept_input;
  ASSERT_FALSE(r->steps.empty());
  exec::Executor ex;
  auto input = pipeline::load_model(o.model, {}, ex);
  ASSERT_TRUE(input);
  auto lib = rules::load_library(rules::default_library_path());
  ASSERT_TRUE(lib);
  auto replayed = search::replay(*input, pipeline::select_rules(*lib, true), r->steps);
  ASSERT_TRUE(replayed) << replayed.error().message;
  auto folded = ir::fold_constants(*replayed, ex);
  ASSERT_TRUE(folded);
  EXPECT_EQ(ir::summarize(*folded).op_counts, r->after.op_counts);
}

TEST_F(PipelineTest, SearchNoneWritesTheInputWithNoCostClaim) {
  auto o = options("tiny_cnn.onnx");
  o.search = "none";
  auto r = pipeline::optimise(o);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(fs::exists(o.output));
  EXPECT_FALSE(r->cost.has_value());
  EXPECT_FALSE(r->search_result.has_value());
  EXPECT_TRUE(r->candidates.empty());
  EXPECT_FALSE(r->chosen.has_value());
  EXPECT_FALSE(r->rewritten);
  EXPECT_EQ(r->before.op_counts, r->after.op_counts);
  const auto j = r->to_json();
  EXPECT_TRUE(j["cost"].is_null());
  EXPECT_FALSE(j.contains("predicted"));
  EXPECT_FALSE(j.contains("measured"));
}

TEST_F(PipelineTest, AnUnknownTargetIsAUsageErrorAndWritesNothing) {
  auto o = options("tiny_cnn.onnx");
  o.target = "tpu";
  auto r = pipeline::optimise(o);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kUsage);
  EXPECT_FALSE(fs::exists(o.output));
}

TEST_F(PipelineTest, AnOutputThatIsTheInputIsRefusedBeforeAnyWork) {
  auto o = options("tiny_cnn.onnx");
  const auto copy = dir_ / "model.onnx";
  fs::copy_file(o.model, copy);
  const auto before = fs::last_write_time(copy);
  o.model = o.output = copy.string();
  auto r = pipeline::optimise(o);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kUsage);
  EXPECT_EQ(fs::last_write_time(copy), before);
}

TEST(PipelineVerdict, EveryVerdictHasItsOwnName) {
  using pipeline::Verdict;
  std::set<std::string_view> names;
  for (auto v : {Verdict::kWritten, Verdict::kVerificationFailed, Verdict::kUnverifiable, Verdict::kSizeSpecific, Verdict::kNoWrittenGain,
                 Verdict::kMeasuredSlower})
    names.insert(pipeline::verdict_name(v));
  EXPECT_EQ(names.size(), 6u);
  EXPECT_EQ(names.count("?"), 0u);
}

}  // namespace
