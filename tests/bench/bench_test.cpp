// Statistics of the end-to-end benchmark on synthetic timings, the interleaving of runs, the
// never-slower verdict, and (when the project venv has onnxruntime) the onnxruntime runner.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "rlflow/bench/bench.h"
#include "rlflow/exec/executor.h"
#include "rlflow/onnx/model_io.h"

namespace rlflow::bench {
namespace {

TEST(BenchStats, MedianOddEvenEmpty) {
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(median({}), 0);
}

TEST(BenchStats, MedianCiUsesBinomialOrderStatistics) {
  // n = 30 at 95%: the interval is [x_(10), x_(21)] (P(B <= 9) = 0.0214 <= 0.025 < P(B <= 10)),
  // with coverage 1 - 2 * 0.0214 = 0.957.
  std::vector<double> v;
  for (int i = 30; i >= 1; --i) v.push_back(i);  // order must not matter
  auto ci = median_ci(v, 0.95);
  EXPECT_DOUBLE_EQ(ci.lo, 10);
  EXPECT_DOUBLE_EQ(ci.hi, 21);
  EXPECT_NEAR(ci.coverage, 0.9572, 1e-3);
  // n = 10: [x_(2), x_(9)], coverage 1 - 2 * 11/1024.
  std::vector<double> w{1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  auto c10 = median_ci(w, 0.95);
  EXPECT_DOUBLE_EQ(c10.lo, 2);
  EXPECT_DOUBLE_EQ(c10.hi, 9);
  EXPECT_NEAR(c10.coverage, 1 - 2 * 11.0 / 1024, 1e-12);
}

TEST(BenchStats, TooFewSamplesGiveMinMaxWithTheirCoverage) {
  auto ci = median_ci({5, 1, 3, 2, 4}, 0.95);  // n = 5 cannot reach 95%
  EXPECT_DOUBLE_EQ(ci.lo, 1);
  EXPECT_DOUBLE_EQ(ci.hi, 5);
  EXPECT_NEAR(ci.coverage, 1 - 2.0 / 32, 1e-12);
}

TEST(BenchStats, PairedSpeedupCancelsDrift) {
  // The machine slows down tenfold over the run; the candidate is always 20% faster in its round.
  std::vector<double> base, other;
  for (int k = 0; k < 40; ++k) {
    const double drift = 1 + 0.25 * k;
    base.push_back(10 * drift);
    other.push_back(10 * drift / 1.25);
  }
  auto s = paired_speedup(base, other);
  EXPECT_NEAR(s.estimate, 1.25, 1e-12);
  EXPECT_NEAR(s.ci.lo, 1.25, 1e-12);
  EXPECT_NEAR(s.ci.hi, 1.25, 1e-12);
  // The unpaired medians' intervals overlap widely: pairing is what makes the comparison sharp.
  auto cb = median_ci(base), co = median_ci(other);
  EXPECT_LT(cb.lo, co.hi);
}

TEST(BenchStats, PairedSpeedupIntervalCoversTheTruth) {
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> noise(0, 0.05);
  std::vector<double> base, other;
  for (int k = 0; k < 200; ++k) {
    base.push_back(8 * noise(rng));
    other.push_back(8 / 1.1 * noise(rng));
  }
  auto s = paired_speedup(base, other);
  EXPECT_LT(s.ci.lo, 1.1);
  EXPECT_GT(s.ci.hi, 1.1);
  EXPECT_GT(s.ci.lo, 1.0);  // 200 rounds resolve a 10% gain under 5% noise
}

TEST(BenchStats, PairedSpeedupRejectsUnpairedSamples) {
  EXPECT_THROW(paired_speedup({1, 2}, {1}), std::invalid_argument);
}

// A runner with scripted latencies: model i takes ms[i] scaled by a per-call drift.
class FakeRunner : public Runner {
 public:
  explicit FakeRunner(std::vector<double> ms) : ms_(std::move(ms)) {}
  Expected<size_t> load(const BenchModel&) override { return loaded_++; }
  Expected<double> run(size_t i) override {
    calls.push_back(i);
    if (i >= ms_.size()) return Error::internal("no such model");
    return ms_[i] * (1 + 0.001 * static_cast<double>(calls.size()));
  }
  std::string description() const override { return "fake"; }
  std::vector<size_t> calls;

 private:
  std::vector<double> ms_;
  size_t loaded_ = 0;
};

TEST(Bench, EveryRoundRunsEveryModelOnceInChangingOrder) {
  FakeRunner r({10, 8, 12});
  BenchOptions o;
  o.warmup = 2;
  o.rounds = 20;
  o.seed = 3;
  auto res = run_bench(r, {0, 1, 2}, o);
  ASSERT_TRUE(res) << res.error().message;
  ASSERT_EQ(r.calls.size(), 3u * (2 + 20));
  std::map<std::vector<size_t>, int> orders;
  for (size_t k = 0; k < r.calls.size(); k += 3) {
    std::vector<size_t> round(r.calls.begin() + k, r.calls.begin() + k + 3);
    auto sorted = round;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, (std::vector<size_t>{0, 1, 2}));
    orders[round]++;
  }
  EXPECT_GT(orders.size(), 3u);  // not one fixed order
  ASSERT_EQ(res->files.size(), 3u);
  EXPECT_EQ(res->rounds, 20);
  EXPECT_EQ(res->files[1].ms.size(), 20u);
  EXPECT_NEAR(res->files[1].speedup.estimate, 1.25, 0.01);
  EXPECT_NEAR(res->files[2].speedup.estimate, 10.0 / 12, 0.01);
  EXPECT_DOUBLE_EQ(res->files[0].speedup.estimate, 1);
}

TEST(Bench, SameSeedSameOrder) {
  FakeRunner a({1, 2}), b({1, 2});
  BenchOptions o;
  o.rounds = 5;
  ASSERT_TRUE(run_bench(a, {0, 1}, o));
  ASSERT_TRUE(run_bench(b, {0, 1}, o));
  EXPECT_EQ(a.calls, b.calls);
}

TEST(Bench, RunnerErrorsPropagate) {
  FakeRunner r({1});
  auto res = run_bench(r, {0, 5}, BenchOptions{});
  ASSERT_FALSE(res);
  EXPECT_NE(res.error().message.find("no such model"), std::string::npos);
}

TEST(NeverSlower, AcceptsOnlyWhenTheLowerBoundClearsTheThreshold) {
  BenchOptions o;
  o.rounds = 30;
  {
    FakeRunner r({10, 9});  // 11% faster
    auto v = judge(r, 0, 1, o);
    ASSERT_TRUE(v);
    EXPECT_TRUE(v->accepted);
    EXPECT_NEAR(v->speedup.estimate, 10.0 / 9, 0.01);
  }
  {
    FakeRunner r({10, 10.5});  // 5% slower
    auto v = judge(r, 0, 1, o);
    ASSERT_TRUE(v);
    EXPECT_FALSE(v->accepted);
    EXPECT_LT(v->speedup.ci.lo, kMinSpeedupLowerBound);
  }
  {
    FakeRunner r({10, 10});  // equal: not measurably slower, so it may be written
    auto v = judge(r, 0, 1, o);
    ASSERT_TRUE(v);
    EXPECT_TRUE(v->accepted);
  }
}

// onnxruntime through the project's venv; skipped where the venv has not been set up.
TEST(OrtRunner, MeasuresTwoModelsEndToEnd) {
  RunnerOptions ro;
  ro.target = "ort";
  auto runner = make_runner(ro);
  if (!runner) GTEST_SKIP() << runner.error().message;
  exec::Executor ex;
  onnxio::ImportOptions io;
  io.evaluator = &ex;
  const std::string path = std::string(RLFLOW_TEST_DATA) + "/tiny_cnn.onnx";
  auto g = onnxio::import_model_file(path, io);
  ASSERT_TRUE(g) << g.error().message;
  auto a = (*runner)->load({path, *g});
  auto b = (*runner)->load({path, *g});
  ASSERT_TRUE(a && b);
  BenchOptions o;
  o.warmup = 1;
  o.rounds = 5;
  auto res = run_bench(**runner, {*a, *b}, o);
  ASSERT_TRUE(res) << res.error().message;
  EXPECT_GT(res->files[0].median_ms, 0);
  EXPECT_GT(res->files[1].median_ms, 0);
  EXPECT_NE(res->runner.find("onnxruntime"), std::string::npos);
  // A model that onnxruntime refuses is an error naming the file, not a crash.
  auto bad = (*runner)->load({std::string(RLFLOW_TEST_DATA) + "/no_such_file.onnx", *g});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("no_such_file"), std::string::npos);
}

}  // namespace
}  // namespace rlflow::bench
