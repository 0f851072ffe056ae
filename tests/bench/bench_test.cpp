// Statistics of the end-to-end benchmark on synthetic timings, the interleaving of runs, the
// never-slower verdict, (when the project venv has onnxruntime) the onnxruntime runner, where its
// helper is found, and the ort-measured cost backend built through the cost factory.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <random>

#include "rlflow/bench/bench.h"
#include "rlflow/bench/ort_cost.h"
#include "rlflow/cost/factory.h"
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

// A long `bench --max-seconds` run collects hundreds of thousands of rounds: the interval is the normal
// approximation's there, n/2 -+ 1.96 sqrt(n)/2 order statistics, with coverage about 95%. (The CDF is
// accumulated in one pass; summed afresh for each candidate order statistic it took minutes.)
TEST(BenchStats, MedianCiOfAMillionRounds) {
  const size_t n = 1000000;
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<double>((i * 7919) % n);  // a permutation of 0..n-1
  auto ci = median_ci(v, 0.95);
  const double half = 1.959964 * std::sqrt(static_cast<double>(n)) / 2;
  EXPECT_NEAR(ci.lo, n / 2.0 - half, 3);
  EXPECT_NEAR(ci.hi, n / 2.0 + half, 3);
  EXPECT_NEAR(ci.coverage, 0.95, 0.001);
  EXPECT_GE(ci.coverage, 0.95);
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

// A runner whose every run is scaled by seeded log-normal noise (a busy machine).
class NoisyRunner : public Runner {
 public:
  NoisyRunner(std::vector<double> ms, double sigma, uint64_t seed) : ms_(std::move(ms)), noise_(0, sigma), rng_(seed) {}
  Expected<size_t> load(const BenchModel&) override { return loaded_++; }
  Expected<double> run(size_t i) override {
    ++runs;
    return ms_.at(i) * std::exp(noise_(rng_));
  }
  std::string description() const override { return "noisy"; }
  int runs = 0;

 private:
  std::vector<double> ms_;
  std::normal_distribution<double> noise_;
  std::mt19937_64 rng_;
  size_t loaded_ = 0;
};

TEST(NeverSlower, TheSequentialTestRunsMoreRoundsUntilTheIntervalDecides) {
  BenchOptions fixed;
  fixed.warmup = 0;
  fixed.rounds = 20;
  BenchOptions seq = fixed;
  seq.max_rounds = 400;
  seq.step = 10;
  // A real 3% gain under 8% noise per run: 20 rounds' interval straddles 0.99 for most seeds; the
  // sequential test keeps going until the lower bound clears it.
  int fixed_accepted = 0, seq_accepted = 0, extended = 0;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    NoisyRunner a({10, 10 / 1.03}, 0.08, seed), b({10, 10 / 1.03}, 0.08, seed);
    auto vf = judge(a, 0, 1, fixed);
    auto vs = judge(b, 0, 1, seq);
    ASSERT_TRUE(vf && vs);
    EXPECT_EQ(vf->rounds, 20);
    fixed_accepted += vf->accepted;
    seq_accepted += vs->accepted;
    extended += vs->rounds > 20;
    EXPECT_LE(vs->rounds, 400);
    EXPECT_EQ(vs->rounds % 10, 0);
    if (vs->rounds < 400) EXPECT_TRUE(vs->decided) << "seed " << seed;
    EXPECT_EQ(b.runs, 2 * vs->rounds);
  }
  EXPECT_GT(extended, 0);
  EXPECT_GT(seq_accepted, fixed_accepted);
  EXPECT_GE(seq_accepted, 9);
  // A real 4% loss: the sequential test refuses it, decided.
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    NoisyRunner r({10, 10.4}, 0.08, seed);
    auto v = judge(r, 0, 1, seq);
    ASSERT_TRUE(v);
    EXPECT_FALSE(v->accepted) << "seed " << seed;
    EXPECT_TRUE(v->decided) << "seed " << seed;
  }
  // An interval that cannot decide in time: the candidate is refused, undecided.
  NoisyRunner r({10, 10 / 0.99}, 0.3, 7);
  BenchOptions few = seq;
  few.max_rounds = 30;
  auto v = judge(r, 0, 1, few);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->rounds, 30);
  EXPECT_FALSE(v->decided);
  EXPECT_FALSE(v->accepted);
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

namespace fs = std::filesystem;

// Runs a test body in a fresh empty folder outside the source tree, then returns to where it was.
class ElsewhereTest : public ::testing::Test {
 protected:
  void SetUp() override {
    old_ = fs::current_path();
    std::string tmpl = (fs::temp_directory_path() / "rlflow_bench_cwd_XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    fs::current_path(dir_);
    if (const char* e = std::getenv("RLFLOW_ORT_RUNNER")) saved_env_ = e;
    unsetenv("RLFLOW_ORT_RUNNER");
  }
  void TearDown() override {
    fs::current_path(old_);
    std::error_code ec;
    fs::remove_all(dir_, ec);
    if (!saved_env_.empty()) setenv("RLFLOW_ORT_RUNNER", saved_env_.c_str(), 1);
  }
  fs::path old_, dir_;
  std::string saved_env_;
};

// The helper is shipped data: found next to the binary or in the source tree, never by the
// working directory, and it lives with the other shipped files in configs/.
TEST_F(ElsewhereTest, OrtHelperIsFoundFromAWorkingDirectoryOutsideTheTree) {
  const fs::path script = ort_helper_script();
  EXPECT_TRUE(script.is_absolute()) << script;
  EXPECT_TRUE(fs::is_regular_file(script)) << script;
  EXPECT_EQ(script.filename(), "ort_runner.py");
  EXPECT_EQ(script.parent_path().filename(), "runtime") << script;
  EXPECT_EQ(script.parent_path().parent_path().filename(), "configs") << script;
  // An empty folder holds no copy that could have been picked up instead.
  EXPECT_FALSE(fs::exists(dir_ / "configs"));

  RunnerOptions ro;
  ro.target = "ort";
  auto runner = make_runner(ro);
  if (!runner) GTEST_SKIP() << runner.error().message;  // no onnxruntime in the venv
  EXPECT_NE((*runner)->description().find("onnxruntime"), std::string::npos);
}

TEST(OrtMeasured, TheCostFactoryBuildsItOnceRegistered) {
  cost::CostOptions o;
  o.kind = kOrtMeasuredKind;
  o.warmup = 0;
  o.repeats = 1;
  if (!cost::find_backend(kOrtMeasuredKind)) {
    // cost cannot reach bench by itself: before registration the name is unknown.
    auto before = cost::make_cost_model(o);
    ASSERT_FALSE(before);
    EXPECT_EQ(before.error().code, ErrorCode::kUsage);
  }
  register_cost_backends();
  register_cost_backends();  // a second call changes nothing
  const auto kinds = cost::cost_model_kinds();
  EXPECT_EQ(std::count(kinds.begin(), kinds.end(), std::string(kOrtMeasuredKind)), 1);
  EXPECT_EQ(std::count(kinds.begin(), kinds.end(), std::string("ort")), 1);  // the analytic profile keeps its name
  EXPECT_NE(cost::cost_model_help().find(kOrtMeasuredKind), std::string::npos);

  // Unknown names are refused with the list of the known ones, registered ones included.
  cost::CostOptions bad;
  bad.kind = "ort-measurd";
  auto unknown = cost::make_cost_model(bad);
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code, ErrorCode::kUsage);
  for (const auto& k : kinds) EXPECT_NE(unknown.error().message.find(k), std::string::npos) << k << ": " << unknown.error().message;

  // It measures, so --deterministic gives way to the analytic model, as for cpu and cudnn.
  cost::CostOptions det = o;
  det.deterministic = true;
  auto kind = cost::resolve_kind(det);
  ASSERT_TRUE(kind);
  EXPECT_EQ(*kind, "analytic");
  // `ort` stays the analytic onnxruntime profile.
  cost::CostOptions ort;
  ort.kind = "ort";
  auto analytic = cost::make_cost_model(ort);
  ASSERT_TRUE(analytic) << analytic.error().message;
  EXPECT_EQ((*analytic)->name(), "analytic");

  auto m = cost::make_cost_model(o);
  if (!m && m.error().code == ErrorCode::kUnsupported) GTEST_SKIP() << m.error().message;  // no onnxruntime
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ((*m)->name(), kOrtMeasuredKind);
  EXPECT_EQ((*m)->device_fingerprint().rfind("ort/onnxruntime", 0), 0u) << (*m)->device_fingerprint();
  cost::OpSignature relu;
  relu.kind = ir::OpKind::kRelu;
  relu.inputs = relu.outputs = {{ir::DType::kFloat32, {1, 64, 56, 56}}};
  relu.input_is_constant = {false};
  auto ms = (*m)->op_cost(relu);
  ASSERT_TRUE(ms) << ms.error().message;
  EXPECT_GE(*ms, 0);
}

// ort-measured times an op as a one-node model: a fused op must be written as that one node, at the
// first opset that has it, not as the chain an older opset spells it with (which would price the
// chain, not the op).
TEST(OrtMeasured, AOneNodeModelHoldsTheFusedOpItself) {
  const ir::TensorType x{ir::DType::kFloat32, {1, 4, 16, 8}};
  cost::OpSignature rms;
  rms.kind = ir::OpKind::kRMSNorm;
  rms.params = ir::NormParams{3, 1e-5};
  rms.inputs = {x, {ir::DType::kFloat32, {8}}};
  rms.input_is_constant = {false, true};
  rms.outputs = {x};
  cost::OpSignature rope;
  rope.kind = ir::OpKind::kRotaryEmbedding;
  rope.params = ir::RotaryParams{};
  rope.inputs = {x, {ir::DType::kFloat32, {1, 16, 4}}, {ir::DType::kFloat32, {1, 16, 4}}};
  rope.input_is_constant = {false, true, true};
  rope.outputs = {x};
  const ir::TensorType q{ir::DType::kFloat32, {1, 4, 16, 8}}, kv{ir::DType::kFloat32, {1, 2, 16, 8}};
  cost::OpSignature att;
  att.kind = ir::OpKind::kAttention;
  att.params = ir::AttentionParams{true, 0.0, 0, 0};
  att.inputs = {q, kv, kv};
  att.input_is_constant = {false, false, false};
  att.outputs = {q};
  const fs::path dir = fs::temp_directory_path() / ("rlflow-one-node-" + std::to_string(getpid()));
  fs::create_directories(dir);
  for (const auto* sig : {&rms, &rope, &att}) {
    auto g = single_op_graph(*sig);
    ASSERT_TRUE(g) << g.error().message;
    EXPECT_EQ(g->meta().opset(""), 23) << sig->str();
    const std::string path = (dir / "op.onnx").string();
    onnxio::ExportOptions eo;
    ASSERT_TRUE(onnxio::write_model_file(*g, path, eo).ok());
    auto back = onnxio::import_model_file(path, {});
    ASSERT_TRUE(back) << back.error().message;
    int ops = 0, fused = 0;
    for (ir::NodeId id = 0; id < static_cast<ir::NodeId>(back->size()); ++id) {
      const auto k = back->node(id).kind;
      if (k == ir::OpKind::kInput || k == ir::OpKind::kWeight || k == ir::OpKind::kConstant) continue;
      ++ops;
      fused += k == sig->kind;
    }
    EXPECT_EQ(ops, 1) << sig->str();
    EXPECT_EQ(fused, 1) << sig->str();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace rlflow::bench
