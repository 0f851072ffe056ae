// The measuring backends (cpu; cudnn when a GPU is present), whole-graph measurement, the factory
// and calibration fitting.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "common.h"
#include "rlflow/cost/analytic.h"
#include "rlflow/cost/cache.h"
#include "rlflow/cost/calibrate.h"
#include "rlflow/cost/cpu_backend.h"
#include "rlflow/cost/cudnn_backend.h"
#include "rlflow/cost/device.h"
#include "rlflow/cost/factory.h"
#include "rlflow/cost/measure.h"
#include "rlflow/ir/builder.h"

using namespace rlflow;
using namespace rlflow::cost;
using namespace rlflow::cost::testing;
using ir::OpKind;

namespace {

// One small instance of every op kind the backends time.
std::vector<OpSignature> op_zoo() {
  ir::PoolParams pool;
  pool.kernel = {3, 3};
  pool.strides = {2, 2};
  pool.pads = {1, 1, 1, 1};
  ir::GemmParams gemm;
  gemm.trans_b = true;
  ir::ClipParams clip;
  clip.min = 0;
  clip.max = 6;
  return {
      sig(OpKind::kConv, conv2d(3), {{{1, 8, 16, 16}}, {{16, 8, 3, 3}, true}, {{16}, true}}),
      sig(OpKind::kConv, conv2d(3, 2, ir::Activation::kRelu), {{{1, 8, 16, 16}}, {{16, 8, 3, 3}, true}}),
      sig(OpKind::kMatMul, {}, {{{2, 16, 32}}, {{32, 24}, true}}),
      sig(OpKind::kMatMul, {}, {{{2, 4, 16, 8}}, {{2, 4, 8, 16}}}),
      sig(OpKind::kGemm, gemm, {{{4, 32}}, {{10, 32}, true}, {{10}, true}}),
      sig(OpKind::kAdd, {}, {{{1, 8, 16, 16}}, {{1, 8, 16, 16}}}),
      sig(OpKind::kMul, {}, {{{4, 16}}, {{16}, true}}),
      sig(OpKind::kDiv, {}, {{{4, 16}}, {{}, true}}),
      sig(OpKind::kPow, {}, {{{4, 16}}, {{}, true}}),
      sig(OpKind::kRelu, {}, {{{1, 8, 16, 16}}}),
      sig(OpKind::kSigmoid, {}, {{{64}}}),
      sig(OpKind::kTanh, {}, {{{64}}}),
      sig(OpKind::kErf, {}, {{{64}}}),
      sig(OpKind::kSqrt, {}, {{{64}}}),
      sig(OpKind::kClip, clip, {{{64}}}),
      sig(OpKind::kScalarMul, ir::ScalarParams{0.5}, {{{64}}}),
      sig(OpKind::kSoftmax, ir::AxisParams{2}, {{{2, 8, 16}}}),
      sig(OpKind::kLayerNorm, ir::NormParams{1, 1e-5}, {{{8, 32}}, {{32}, true}, {{32}, true}}),
      sig(OpKind::kBatchNorm, ir::NormParams{1, 1e-5}, {{{1, 8, 8, 8}}, {{8}, true}, {{8}, true}, {{8}, true}, {{8}, true}}),
      sig(OpKind::kMaxPool, pool, {{{1, 8, 16, 16}}}),
      sig(OpKind::kAveragePool, pool, {{{1, 8, 16, 16}}}),
      sig(OpKind::kGlobalAveragePool, {}, {{{1, 8, 16, 16}}}),
      sig(OpKind::kReduceMean, ir::AxesParams{{1}, true}, {{{4, 32}}}),
      sig(OpKind::kTranspose, ir::TransposeParams{{0, 2, 1}}, {{{2, 8, 16}}}),
      sig(OpKind::kConcat, ir::AxisParams{1}, {{{1, 4, 8, 8}}, {{1, 6, 8, 8}}}),
      sig(OpKind::kSplit, ir::SplitParams{1, {3, 5}}, {{{2, 8, 4}}}),
      sig(OpKind::kSlice, ir::SliceParams{{1}, {7}, {1}, {2}}, {{{2, 8, 4}}}),
      sig(OpKind::kPad, ir::PadParams{{0, 1, 0, 1}, ir::PadMode::kReflect, 0.0}, {{{4, 8}}}),
      sig(OpKind::kGather, ir::AxisParams{0}, {{{100, 16}, true}, {{2, 5}, false, ir::DType::kInt64}}),
      sig(OpKind::kCast, ir::CastParams{ir::DType::kInt64}, {{{4, 8}}}),
      sig(OpKind::kReshape, ir::ReshapeParams{{8, 4}}, {{{4, 8}}}),
      sig(OpKind::kUnsqueeze, ir::AxesParams{{0}, true}, {{{4, 8}}}),
  };
}

ir::Graph tiny_cnn() {
  ir::GraphBuilder b;
  auto x = b.input("x", {ir::DType::kFloat32, {1, 3, 16, 16}});
  auto w1 = b.weight("w1", ir::random_tensor({8, 3, 3, 3}, 1));
  auto w2 = b.weight("w2", ir::random_tensor({8, 8, 3, 3}, 2));
  auto y = b.relu(b.conv(x, w1, {1, 1}, {1, 1, 1, 1}));
  auto z = b.conv(y, w2, {1, 1}, {1, 1, 1, 1}, ir::Activation::kRelu);
  auto s = b.add(y, z);
  auto f = b.op(OpKind::kFlatten, {b.op(OpKind::kGlobalAveragePool, {s})}, ir::AxisParams{1});
  b.output(f, "y");
  return std::move(b).build();
}

CpuOptions fast_cpu() {
  CpuOptions o;
  o.warmup = 1;
  o.repeats = 3;
  return o;
}

// ---- cpu ----

TEST(CpuBackend, EveryOpHasAPositiveFiniteTime) {
  auto m = make_cpu_cost_model(fast_cpu());
  EXPECT_EQ(m->name(), "cpu");
  EXPECT_NE(m->device_fingerprint().find("threads1"), std::string::npos) << m->device_fingerprint();
  for (const auto& s : op_zoo()) {
    auto ms = m->op_cost(s);
    ASSERT_TRUE(ms.ok()) << s.str() << ": " << ms.error().message;
    EXPECT_TRUE(std::isfinite(*ms) && *ms > 0) << s.str() << " = " << *ms;
    EXPECT_LT(*ms, 1000.0) << s.str();
  }
}

TEST(CpuBackend, CachedSecondLookupMeasuresNothing) {
  TempDir dir;
  const auto path = dir.file("cache.json");
  const auto g = tiny_cnn();
  double first = 0;
  {
    CachedCostModel m(make_cpu_cost_model(fast_cpu()), path);
    auto c = graph_cost(g, m);
    ASSERT_TRUE(c.ok()) << c.error().message;
    first = *c;
    EXPECT_GT(first, 0);
    // The second Conv's fused Relu runs as a kernel of its own in the written file (the reference
    // executor fuses nothing), so it is one lookup more: the first Relu's signature, a hit.
    EXPECT_EQ(m.stats().hits, 1);
    EXPECT_EQ(m.stats().misses, static_cast<int64_t>(g.num_ops()));
  }
  CachedCostModel m(make_cpu_cost_model(fast_cpu()), path);
  auto c = graph_cost(g, m);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, first);  // exactly: every cost came from the file
  EXPECT_EQ(m.stats().misses, 0);
  EXPECT_EQ(m.stats().hits, static_cast<int64_t>(g.num_ops()) + 1);
}

TEST(CpuBackend, WholeGraphMeasurement) {
  MeasureOptions mo;
  mo.warmup = 1;
  mo.repeats = 3;
  auto m = measure_graph_cpu(tiny_cnn(), mo);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_GT(m->ms, 0);
  EXPECT_EQ(m->runs, 3);
  EXPECT_NE(m->method.find("reference executor"), std::string::npos);

  ir::GraphBuilder b;
  auto x = b.input("x", {ir::DType::kFloat32, {4}});
  b.output(b.op_with_types(OpKind::kOpaque, {x}, ir::OpaqueParams{"", "Foo", "", 1, {0}, {0}}, {b.type(x)})[0], "y");
  auto opaque = measure_graph_cpu(std::move(b).build(), mo);
  ASSERT_FALSE(opaque.ok());
  EXPECT_NE(opaque.error().message.find("opaque"), std::string::npos);
}

// ---- cudnn ----

TEST(CudnnBackend, FailsCleanlyWithoutAGpu) {
  if (probe_devices().device_count > 0) GTEST_SKIP() << "a GPU is present; covered by the tests below";
  auto m = make_cudnn_cost_model();
  ASSERT_FALSE(m.ok());
  EXPECT_FALSE(m.error().message.empty());
  if (cudnn_backend_compiled()) {
    // The cuDNN module was found and loaded ($RLFLOW_CUDNN_MODULE, set by ctest): the error is its
    // CUDA code's own (no device), not a missing or broken module.
    EXPECT_EQ(m.error().message.find("cuDNN module"), std::string::npos) << m.error().message;
    EXPECT_NE(m.error().message.find("cudnn backend"), std::string::npos) << m.error().message;
  }
  EXPECT_FALSE(measure_graph_gpu(tiny_cnn()).ok());
}

// Without the backend, the reason names what is missing: the module's file (where it was looked
// for) or CUDA in the build, never a vague "no CUDA backend".
TEST(CudnnBackend, SaysWhyItIsAbsent) {
  EXPECT_EQ(cudnn_backend_absent().empty(), cudnn_backend_compiled());
  const char* saved = std::getenv("RLFLOW_CUDNN_MODULE");
  const std::string keep = saved ? saved : "";
  setenv("RLFLOW_CUDNN_MODULE", "/nonexistent/librlflow_cudnn.so", 1);
  const bool compiled = cudnn_backend_compiled();
  const std::string why = cudnn_backend_absent();
  if (saved)
    setenv("RLFLOW_CUDNN_MODULE", keep.c_str(), 1);
  else
    unsetenv("RLFLOW_CUDNN_MODULE");
  if (compiled) GTEST_SKIP() << "the module was loaded earlier in this process";
  EXPECT_TRUE(why.find("/nonexistent/librlflow_cudnn.so) is not built") != std::string::npos ||
              why.find("built without CUDA") != std::string::npos)
      << why;
}

#define REQUIRE_GPU()                                                                                                      \
  do {                                                                                                                     \
    const auto dev = probe_devices();                                                                                      \
    if (!cudnn_backend_compiled() || dev.device_count == 0)                                                                \
      GTEST_SKIP() << "no usable GPU (" << (cudnn_backend_compiled() ? dev.note : "cudnn backend not compiled")            \
                   << "): the cudnn backend is only checked on a machine with a CUDA device";                              \
  } while (0)

TEST(CudnnBackend, EveryOpHasAPositiveFiniteTime) {
  REQUIRE_GPU();
  GpuOptions o;
  o.warmup = 2;
  o.repeats = 5;
  auto m = make_cudnn_cost_model(o);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ((*m)->name(), "cudnn");
  for (const auto& s : op_zoo()) {
    auto ms = (*m)->op_cost(s);
    ASSERT_TRUE(ms.ok()) << s.str() << ": " << ms.error().message;
    EXPECT_TRUE(std::isfinite(*ms) && *ms >= 0) << s.str();
    if (s.kind != OpKind::kReshape && s.kind != OpKind::kUnsqueeze) EXPECT_GT(*ms, 0) << s.str();
  }
}

TEST(CudnnBackend, RepeatedUseKeepsWorking) {
  REQUIRE_GPU();
  GpuOptions o;
  o.warmup = 1;
  o.repeats = 3;
  // Creating and destroying backends repeatedly must not exhaust device memory or handles.
  const auto conv = sig(OpKind::kConv, conv2d(3), {{{1, 64, 56, 56}}, {{64, 64, 3, 3}, true}});
  for (int i = 0; i < 20; ++i) {
    auto m = make_cudnn_cost_model(o);
    ASSERT_TRUE(m.ok()) << m.error().message;
    auto ms = (*m)->op_cost(conv);
    ASSERT_TRUE(ms.ok()) << ms.error().message;
  }
}

TEST(CudnnBackend, WholeGraphAndFusion) {
  REQUIRE_GPU();
  MeasureOptions mo;
  mo.warmup = 2;
  mo.repeats = 5;
  auto m = measure_graph_gpu(tiny_cnn(), mo);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_GT(m->ms, 0);
  GpuOptions o;
  o.repeats = 16;
  auto model = make_cudnn_cost_model(o);
  ASSERT_TRUE(model.ok());
  const auto conv = sig(OpKind::kConv, conv2d(3), {{{1, 64, 56, 56}}, {{64, 64, 3, 3}, true}, {{64}, true}});
  const auto fused = sig(OpKind::kConv, conv2d(3, 1, ir::Activation::kRelu), {{{1, 64, 56, 56}}, {{64, 64, 3, 3}, true}, {{64}, true}});
  const auto relu = sig(OpKind::kRelu, {}, {{{1, 64, 56, 56}}});
  auto c = (*model)->op_cost(conv), f = (*model)->op_cost(fused), r = (*model)->op_cost(relu);
  ASSERT_TRUE(c.ok() && f.ok() && r.ok());
  EXPECT_LT(*f, *c + *r);
}

// ---- factory ----

TEST(Factory, AutoIsCpuWithoutAGpuAndCached) {
  TempDir dir;
  CostOptions o;
  o.cache_path = dir.file("cache.json");
  o.cpu = fast_cpu();
  const bool gpu = cudnn_backend_compiled() && probe_devices().device_count > 0;
  auto kind = resolve_kind(o);
  ASSERT_TRUE(kind.ok());
  EXPECT_EQ(*kind, gpu ? "cudnn" : "cpu");
  auto m = make_cost_model(o);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ((*m)->name(), gpu ? "cudnn" : "cpu");
  auto* c = as_cached(**m);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->stats().path, o.cache_path);
  o.use_cache = false;
  auto plain = make_cost_model(o);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(as_cached(**plain), nullptr);
}

TEST(Factory, DeterministicForcesAnalytic) {
  for (const char* kind : {"auto", "cpu", "cudnn", "analytic"}) {
    CostOptions o;
    o.kind = kind;
    o.deterministic = true;
    auto m = make_cost_model(o);
    ASSERT_TRUE(m.ok()) << kind << ": " << m.error().message;
    EXPECT_EQ((*m)->name(), "analytic");
    EXPECT_EQ(as_cached(**m), nullptr);  // analytic is never cached
    auto* a = dynamic_cast<AnalyticCostModel*>(m->get());
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->profile().name, default_profile_name());
  }
  const bool gpu = cudnn_backend_compiled() && probe_devices().device_count > 0;
  EXPECT_EQ(default_profile_name(), gpu ? "h100" : "cpu-2core");
}

TEST(Factory, ProfilesAndErrors) {
  CostOptions o;
  o.kind = "analytic";
  o.device_profile = "h200";
  auto m = make_cost_model(o);
  ASSERT_TRUE(m.ok());
  EXPECT_NE((*m)->device_fingerprint().find("h200"), std::string::npos);
  o.device_profile = "no-such-device";
  EXPECT_FALSE(make_cost_model(o).ok());
  o.kind = "tpu";
  o.device_profile.clear();
  auto bad = make_cost_model(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::kUsage);
  if (!(cudnn_backend_compiled() && probe_devices().device_count > 0)) {
    o.kind = "cudnn";  // asked for explicitly: no silent fallback
    EXPECT_FALSE(make_cost_model(o).ok());
  }
}

// A backend defined outside cost, as bench's ort-measured is: it reaches the factory only by
// registering, and is then built, listed and resolved like a built-in kind.
class FixedCost : public CostModel {
 public:
  explicit FixedCost(double ms) : ms_(ms) {}
  Expected<double> op_cost(const OpSignature&) override { return ms_; }
  std::string device_fingerprint() const override { return "fixed"; }
  std::string name() const override { return "fixed-test"; }

 private:
  double ms_;
};

TEST(Factory, RegisteredBackendsAreBuiltByName) {
  CostOptions o;
  o.kind = "fixed-test";
  auto before = make_cost_model(o);
  ASSERT_FALSE(before.ok());
  EXPECT_EQ(before.error().code, ErrorCode::kUsage);
  const std::string known = before.error().message.substr(before.error().message.find("(expected"));
  EXPECT_EQ(known.find("fixed-test"), std::string::npos) << known;

  int made = 0;
  Backend b;
  b.name = "fixed-test";
  b.description = "a constant per op";
  b.make = [&made](const CostOptions& c) -> Expected<std::unique_ptr<CostModel>> {
    ++made;
    // The factory hands makers the common timing overrides.
    return std::unique_ptr<CostModel>(std::make_unique<FixedCost>(c.repeats));
  };
  ASSERT_TRUE(register_backend(b).ok());
  o.repeats = 7;
  auto m = make_cost_model(o);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(made, 1);
  EXPECT_EQ((*m)->name(), "fixed-test");
  EXPECT_DOUBLE_EQ(*(*m)->op_cost(sig(OpKind::kRelu, {}, {{{4}}})), 7.0);

  auto kinds = cost_model_kinds();
  EXPECT_EQ(kinds.back(), "fixed-test");
  EXPECT_EQ(std::count(kinds.begin(), kinds.end(), "fixed-test"), 1);
  EXPECT_NE(cost_model_help().find("fixed-test (a constant per op)"), std::string::npos) << cost_model_help();
  EXPECT_NE(cost_model_help("the target's").find("auto (the target's)"), std::string::npos);

  // A measuring backend gives way to the analytic model under --deterministic; one that is
  // deterministic itself stays.
  o.deterministic = true;
  EXPECT_EQ(*resolve_kind(o), "analytic");
  b.measures = false;
  ASSERT_TRUE(register_backend(b).ok());  // replaces, does not add
  EXPECT_EQ(cost_model_kinds().size(), kinds.size());
  EXPECT_EQ(*resolve_kind(o), "fixed-test");

  // An unknown name lists every known one, the registered one included.
  o.kind = "tpu";
  auto bad = make_cost_model(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::kUsage);
  for (const auto& k : kinds) EXPECT_NE(bad.error().message.find(k), std::string::npos) << k << ": " << bad.error().message;

  // Built-in names keep their meaning: `ort` cannot be taken over by a registered backend.
  b.name = "ort";
  EXPECT_FALSE(register_backend(b).ok());
  CostOptions ort;
  ort.kind = "ort";
  auto analytic = make_cost_model(ort);
  ASSERT_TRUE(analytic.ok());
  EXPECT_EQ((*analytic)->name(), "analytic");
}

// ---- calibration ----

TEST(Calibration, RecoversAKnownProfile) {
  auto truth = load_profile("cpu-2core");
  ASSERT_TRUE(truth.ok());
  truth->conv.efficiency = 0.37;
  truth->matmul.efficiency = 0.81;
  truth->vector.efficiency = 0.05;
  truth->stream.efficiency = 0.7;
  truth->layout.efficiency = 0.25;
  truth->kernel_overhead_us = 12;
  truth->view_overhead_us = 3;
  // "Measure" with the true profile, start from the shipped one.
  AnalyticCostModel measuring(*truth);
  auto base = load_profile("cpu-2core");
  ASSERT_TRUE(base.ok());
  auto r = calibrate(measuring, *base, 1);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_GT(r->samples.size(), 40u);
  EXPECT_LT(r->median_rel_error, 1e-6);
  EXPECT_LT(r->max_rel_error, 1e-6);
  EXPECT_NEAR(r->profile.kernel_overhead_us, 12, 1e-6);
  EXPECT_NEAR(r->profile.view_overhead_us, 3, 1e-9);
  EXPECT_NEAR(r->profile.conv.efficiency, 0.37, 1e-6);
  EXPECT_NEAR(r->profile.matmul.efficiency, 0.81, 1e-6);
  EXPECT_NEAR(r->profile.stream.efficiency, 0.7, 1e-6);
  EXPECT_NEAR(r->profile.layout.efficiency, 0.25, 1e-6);
  EXPECT_EQ(r->profile.conv.peak, base->conv.peak);  // peaks are kept
  EXPECT_FALSE(r->profile.calibration.empty());
  EXPECT_TRUE(r->profile.validate().ok());
}

TEST(Calibration, NoisyMeasurementsStillFitAndStayValid) {
  auto base = load_profile("h100");
  ASSERT_TRUE(base.ok());
  auto ops = calibration_ops(8);
  ASSERT_TRUE(ops.ok()) << ops.error().message;
  AnalyticCostModel truth(*base);
  std::vector<CalibrationSample> samples;
  int k = 0;
  for (const auto& [label, s] : *ops) {
    const double noise = 1.0 + 0.1 * ((k++ % 5) - 2) / 2.0;  // +-10%, deterministic
    samples.push_back({label, s, op_work(s), truth.cost_ms(op_work(s)) * noise});
  }
  auto r = fit_profile(*base, samples);
  EXPECT_LT(r.median_rel_error, 0.11);
  EXPECT_TRUE(r.profile.validate().ok());
}

}  // namespace
