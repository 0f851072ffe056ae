// `rlflow bench` as a library call (pipeline/bench.h): the runs, the hooks' order, the report's JSON
// and text, and errors with their class. The runner is rlflow's reference executor (target cpu), so
// nothing outside the process is needed.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "printed.h"
#include "rlflow/pipeline/bench.h"

namespace {

namespace fs = std::filesystem;
using namespace rlflow;

const fs::path kData = RLFLOW_TEST_DATA;

pipeline::BenchFilesOptions two_files() {
  pipeline::BenchFilesOptions o;
  o.files = {(kData / "tiny_cnn.onnx").string(), (kData / "tiny_cnn.onnx").string()};
  o.target = "cpu";
  o.bench.rounds = 4;
  o.bench.warmup = 1;
  return o;
}

TEST(BenchFiles, MeasuresEveryFileAtEveryThreadCountAndReportsAsItGoes) {
  auto o = two_files();
  o.threads = "1,2";
  std::vector<std::string> stages;
  int last_round = 0, measured = 0;
  pipeline::BenchFilesHooks hooks;
  hooks.stage = [&](const pipeline::BenchStage& st) { stages.push_back(st.threads + ":" + std::to_string(st.kind)); };
  hooks.round = [&](int done, int planned) {
    EXPECT_EQ(done, last_round + 1);
    EXPECT_EQ(planned, 4);
    last_round = done == planned ? 0 : done;
  };
  hooks.measured = [&](const pipeline::BenchFilesReport& so_far, const pipeline::BenchRun& run) {
    ++measured;
    EXPECT_EQ(so_far.runs.size(), static_cast<size_t>(measured));
    EXPECT_EQ(&so_far.runs.back(), &run);
  };
  auto r = pipeline::bench_files(o, hooks);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(measured, 2);
  EXPECT_EQ(stages, (std::vector<std::string>{"1:0", "1:1", "1:2", "2:0", "2:1", "2:2"}));
  ASSERT_EQ(r->runs.size(), 2u);
  EXPECT_EQ(r->runs[0].threads, 1);
  EXPECT_EQ(r->runs[1].threads, 2);
  for (const auto& run : r->runs) {
    ASSERT_EQ(run.result.files.size(), 2u);
    EXPECT_EQ(run.result.rounds, 4);
    for (const auto& f : run.result.files) {
      EXPECT_GT(f.median_ms, 0);
      EXPECT_EQ(f.ms.size(), 4u);
    }
    EXPECT_DOUBLE_EQ(run.result.files[0].speedup.estimate, 1.0);  // the baseline against itself
  }
  const auto j = r->to_json();
  EXPECT_EQ(j["target"], "cpu");
  ASSERT_EQ(j["runs"].size(), 2u);
  EXPECT_EQ(j["runs"][1]["threads"], 2);
  EXPECT_EQ(j["runs"][0]["files"][1]["file"], o.files[1]);

  const std::string text = printed(*r);
  EXPECT_NE(text.find("tiny_cnn.onnx (baseline)"), std::string::npos) << text;
  EXPECT_NE(text.find("4 rounds in random order after 1 warm-up runs each"), std::string::npos) << text;
}

TEST(BenchFiles, ErrorsKeepTheirClass) {
  auto o = two_files();
  o.threads = "0";
  auto r = pipeline::bench_files(o);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kUsage);
  o.threads = "1,x";
  r = pipeline::bench_files(o);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kUsage);
  EXPECT_EQ(pipeline::parse_thread_list("1,all").value(), (std::vector<int>{1, 0}));
  o = two_files();
  o.files.push_back((kData / "no_such_model.onnx").string());
  r = pipeline::bench_files(o);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kBadInput);
}

}  // namespace
