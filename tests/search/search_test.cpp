// Search strategies on small graphs whose optimum is known by construction (common.h).
#include <gtest/gtest.h>

#include <algorithm>

#include "common.h"
#include "rlflow/search/registry.h"

using namespace rlflow;
using namespace rlflow::ir;
using namespace rlflow::search_test;

namespace {

search::Result run(const std::string& strategy, const std::vector<const rules::Rule*>& rules, cost::CostModel& m,
                   double alpha = 1.05, int64_t budget = 1000) {
  search::SearchOptions so;
  so.alpha = alpha;
  auto opt = search::make_optimizer(strategy, rules, m, so);
  if (!opt) throw std::runtime_error(opt.error().message);
  search::Limits lim;
  lim.budget = budget;
  auto r = (*opt)->run(two_sigmoids(), lim);
  if (!r) throw std::runtime_error(r.error().message);
  return std::move(*r);
}

}  // namespace

// Sigmoid 2, Relu 0.5, Erf 1.5: greedy takes ss2e (4 -> 1.5, the biggest single gain) and is
// stuck; the optimum, two s2r steps (4 -> 2.5 -> 1.0), starts with a smaller gain.
TEST(Search, GreedyTakesTheLargestImmediateGain) {
  auto lib = abstract_rules();
  TableCost m({{OpKind::kSigmoid, 2.0}, {OpKind::kRelu, 0.5}, {OpKind::kErf, 1.5}});
  auto r = run("greedy", pick(lib, {"s2r", "ss2e"}), m);
  EXPECT_DOUBLE_EQ(r.initial_cost, 4.0);
  EXPECT_DOUBLE_EQ(r.best_cost, 1.5);
  ASSERT_EQ(r.steps.size(), 1u);
  EXPECT_EQ(r.steps[0].rule, "ss2e");
  EXPECT_EQ(r.stop, search::StopReason::kConverged);
}

TEST(Search, ExhaustiveAndTasoFindTheOptimumGreedyMisses) {
  auto lib = abstract_rules();
  TableCost m({{OpKind::kSigmoid, 2.0}, {OpKind::kRelu, 0.5}, {OpKind::kErf, 1.5}});
  auto ex = run("exhaustive", pick(lib, {"s2r", "ss2e"}), m);
  EXPECT_DOUBLE_EQ(ex.best_cost, 1.0);
  EXPECT_EQ(ex.stop, search::StopReason::kExhausted);
  EXPECT_EQ(ex.report.unique_graphs, 5);  // SS, RS, SR, RR, E
  auto taso = run("taso", pick(lib, {"s2r", "ss2e"}), m);
  EXPECT_DOUBLE_EQ(taso.best_cost, 1.0);
  EXPECT_EQ(taso.steps.size(), 2u);
}

// Sigmoid 2, Tanh 3, Relu 1: the only improvement (4 -> 1) needs two cost-increasing steps
// (4 -> 5 -> 6) first. Greedy cannot move; taso finds it only when alpha admits cost 6 against
// the best 4 (alpha > 1.5); exhaustive always does.
TEST(Search, CostIncreasingStepsFirst) {
  auto lib = abstract_rules();
  TableCost m({{OpKind::kSigmoid, 2.0}, {OpKind::kTanh, 3.0}, {OpKind::kRelu, 1.0}});
  auto rules = pick(lib, {"s2t", "tt2r"});
  auto g = run("greedy", rules, m);
  EXPECT_DOUBLE_EQ(g.best_cost, 4.0);
  EXPECT_TRUE(g.steps.empty());
  auto tight = run("taso", rules, m, 1.05);
  EXPECT_DOUBLE_EQ(tight.best_cost, 4.0);
  EXPECT_EQ(tight.stop, search::StopReason::kConverged);
  auto loose = run("taso", rules, m, 1.6);
  EXPECT_DOUBLE_EQ(loose.best_cost, 1.0);
  ASSERT_EQ(loose.steps.size(), 3u);
  EXPECT_EQ(loose.steps[2].rule, "tt2r");
  auto ex = run("exhaustive", rules, m);
  EXPECT_DOUBLE_EQ(ex.best_cost, 1.0);
}

TEST(Search, StepsReplayToTheBestGraph) {
  auto lib = abstract_rules();
  TableCost m({{OpKind::kSigmoid, 2.0}, {OpKind::kTanh, 3.0}, {OpKind::kRelu, 1.0}});
  auto rules = pick(lib, {"s2t", "tt2r"});
  auto r = run("taso", rules, m, 1.6);
  auto again = search::replay(two_sigmoids(), rules, r.steps);
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_TRUE(structurally_equal(*again, r.best));
}

TEST(Search, BudgetAndReportsAreHonoured) {
  auto lib = abstract_rules();
  TableCost m({{OpKind::kSigmoid, 2.0}, {OpKind::kTanh, 3.0}, {OpKind::kRelu, 1.0}});
  auto r = run("exhaustive", pick(lib, {"s2t", "tt2r"}), m, 1.05, 2);
  EXPECT_EQ(r.stop, search::StopReason::kBudget);
  EXPECT_EQ(r.report.expanded, 2);
  EXPECT_EQ(r.report.budget_used, 2);
  EXPECT_EQ(r.report.agent_actions, 0);
  EXPECT_TRUE(r.report.phases.empty());
  EXPECT_GT(r.report.generated, 0);
  // Each distinct op signature is costed once per search (the memo), however often it recurs.
  EXPECT_LE(m.calls, 3);
}

// Held graphs are released under the memory limit and rebuilt by replay when needed again: whatever
// the limit, the result is a consistent graph (its steps replay to it) or a memory-limit stop.
TEST(Search, MemoryLimitReleasesStatesAndRebuildsThem) {
  auto lib = abstract_rules();
  auto rules = pick(lib, {"s2r", "ss2e", "s2t", "tt2r"});
  double unlimited_cost = 0;
  {
    TableCost m({{OpKind::kSigmoid, 2.0}, {OpKind::kTanh, 3.0}, {OpKind::kRelu, 0.5}, {OpKind::kErf, 1.5}});
    unlimited_cost = run("taso", rules, m, 1.6).best_cost;
  }
  bool some_released_and_finished = false;
  for (int64_t bytes : {int64_t{1}, int64_t{1} << 9, int64_t{1} << 10, int64_t{1} << 11, int64_t{1} << 12}) {
    TableCost m({{OpKind::kSigmoid, 2.0}, {OpKind::kTanh, 3.0}, {OpKind::kRelu, 0.5}, {OpKind::kErf, 1.5}});
    search::SearchOptions so;
    so.alpha = 1.6;
    auto opt = search::make_optimizer("taso", rules, m, so);
    ASSERT_TRUE(opt.ok());
    search::Limits lim;
    lim.memory_bytes = bytes;
    auto r = (*opt)->run(two_sigmoids(), lim);
    ASSERT_TRUE(r.ok()) << r.error().message;
    auto again = search::replay(two_sigmoids(), rules, r->steps);
    ASSERT_TRUE(again.ok()) << again.error().message;
    EXPECT_TRUE(structurally_equal(*again, r->best)) << "memory limit " << bytes;
    EXPECT_LE(r->best_cost, r->initial_cost);
    if (r->stop != search::StopReason::kMemoryLimit) {
      EXPECT_DOUBLE_EQ(r->best_cost, unlimited_cost) << "memory limit " << bytes;
      some_released_and_finished = some_released_and_finished || r->report.peak_state_bytes > bytes;
    }
  }
  EXPECT_TRUE(some_released_and_finished) << "no limit both released states and let the search finish";
}

TEST(Search, TimeLimitStopsWithAConsistentResult) {
  auto lib = abstract_rules();
  auto rules = pick(lib, {"s2r", "ss2e", "s2t", "tt2r"});
  TableCost m({{OpKind::kSigmoid, 2.0}, {OpKind::kTanh, 3.0}, {OpKind::kRelu, 0.5}, {OpKind::kErf, 1.5}});
  for (const char* strategy : {"greedy", "taso", "exhaustive"}) {
    auto opt = search::make_optimizer(strategy, rules, m, {});
    ASSERT_TRUE(opt.ok());
    search::Limits lim;
    lim.time_limit_s = 1e-9;
    auto r = (*opt)->run(two_sigmoids(), lim);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->stop, search::StopReason::kTimeLimit) << strategy;
    EXPECT_LE(r->report.expanded, 1) << strategy;
    auto again = search::replay(two_sigmoids(), rules, r->steps);
    ASSERT_TRUE(again.ok());
    EXPECT_TRUE(structurally_equal(*again, r->best)) << strategy;
  }
}

TEST(Search, RefusedMatchesAreCountedByReason) {
  // x -> Sigmoid -> Sigmoid -> y, and the inner Sigmoid is also an output: ss2e would hide it.
  GraphBuilder b;
  auto x = b.input("x", {DType::kFloat32, {8}});
  auto inner = b.op(OpKind::kSigmoid, {x});
  b.output(b.op(OpKind::kSigmoid, {inner}), "y");
  b.output(inner, "z");
  auto lib = abstract_rules();
  TableCost m({{OpKind::kSigmoid, 2.0}, {OpKind::kErf, 1.5}});
  const auto rules = pick(lib, {"ss2e"});  // the optimizer keeps a reference to the rule list
  auto opt = search::make_optimizer("greedy", rules, m, {});
  ASSERT_TRUE(opt.ok());
  auto r = (*opt)->run(b.build(), {});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->steps.empty());
  EXPECT_EQ(r->report.rejections[static_cast<size_t>(rules::Rejection::kEscapingValue)], 1);
}

TEST(Search, UnknownStrategyAndBadAlphaAreUsageErrors) {
  auto lib = abstract_rules();
  TableCost m({});
  auto rules = pick(lib, {"s2r"});
  auto bad = search::make_optimizer("simulated-annealing", rules, m);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::kUsage);
  search::SearchOptions so;
  so.alpha = 0.5;
  EXPECT_FALSE(search::make_optimizer("taso", rules, m, so).ok());
}

// The registry: the built-in strategies by name, an unknown name's error lists every strategy (the
// registered ones too), and a strategy registered from above search is made by name like the others.
TEST(Search, StrategiesComeFromOneRegistry) {
  const auto names = search::strategy_names();
  ASSERT_GE(names.size(), 3u);
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + 3), (std::vector<std::string>{"greedy", "taso", "exhaustive"}));
  EXPECT_NE(search::strategy_help().find("taso (TASO's cost-based backtracking"), std::string::npos) << search::strategy_help();

  search::Strategy mine;
  mine.name = "test-greedy-twice";
  mine.help = "greedy, registered under another name";
  mine.make = [](const search::StrategyInputs& in) -> Expected<search::BuiltStrategy> {
    auto g = search::make_optimizer("greedy", in.rules, *in.model, in.options);
    if (!g) return g.error();
    return search::BuiltStrategy{std::move(*g), in.rules.size(), "made by the test"};
  };
  ASSERT_TRUE(search::register_strategy(mine).ok());
  EXPECT_TRUE(search::register_strategy(mine).ok());  // again: replaced, not listed twice
  const auto after = search::strategy_names();
  EXPECT_EQ(std::count(after.begin(), after.end(), "test-greedy-twice"), 1);
  EXPECT_NE(search::strategy_help().find("test-greedy-twice (greedy, registered"), std::string::npos);
  search::Strategy builtin = mine;
  builtin.name = "taso";
  EXPECT_FALSE(search::register_strategy(builtin).ok());

  auto lib = abstract_rules();
  TableCost m({{OpKind::kSigmoid, 2.0}, {OpKind::kRelu, 0.5}, {OpKind::kErf, 1.5}});
  auto rules = pick(lib, {"s2r", "ss2e"});
  auto mine_run = run("test-greedy-twice", rules, m);
  auto greedy_run = run("greedy", rules, m);
  EXPECT_DOUBLE_EQ(mine_run.best_cost, greedy_run.best_cost);
  search::StrategyInputs in;
  in.rules = rules;
  in.model = &m;
  auto built = search::make_strategy("test-greedy-twice", in);
  ASSERT_TRUE(built.ok());
  EXPECT_EQ(built->warning, "made by the test");
  EXPECT_EQ(built->rules, 2u);

  auto bad = search::make_strategy("simulated-annealing", in);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::kUsage);
  for (const auto& n : search::strategy_names()) EXPECT_NE(bad.error().message.find(n), std::string::npos) << bad.error().message;
}

TEST(Search, DuplicatesAreDroppedByStructure) {
  // s2r at either of two locations of a symmetric graph leads to distinct graphs, but
  // applying them in both orders reaches one graph: exhaustive must count it once.
  auto lib = abstract_rules();
  TableCost m({{OpKind::kSigmoid, 2.0}, {OpKind::kRelu, 0.5}});
  auto r = run("exhaustive", pick(lib, {"s2r"}), m);
  EXPECT_EQ(r.report.unique_graphs, 4);  // SS, RS, SR, RR
  EXPECT_GE(r.report.pruned, 1);
  EXPECT_DOUBLE_EQ(r.best_cost, 1.0);
}
