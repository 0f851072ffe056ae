// Then and Portfolio on the exact landscapes of common.h: what each part returns is known, so the
// combination's result, steps, limits and phases can be checked exactly.
#include <gtest/gtest.h>

#include "common.h"
#include "rlflow/search/combinators.h"
#include "rlflow/search/report.h"

using namespace rlflow;
using namespace rlflow::ir;
using namespace rlflow::search_test;

namespace {

std::unique_ptr<search::Optimizer> make(const std::string& strategy, const std::vector<const rules::Rule*>& rules, cost::CostModel& m) {
  auto opt = search::make_optimizer(strategy, rules, m);
  if (!opt) throw std::runtime_error(opt.error().message);
  return std::move(*opt);
}

std::unique_ptr<search::Optimizer> then(std::unique_ptr<search::Optimizer> a, std::unique_ptr<search::Optimizer> b) {
  return std::make_unique<search::Then>(std::move(a), std::move(b));
}

std::unique_ptr<search::Optimizer> portfolio(std::unique_ptr<search::Optimizer> a, std::unique_ptr<search::Optimizer> b) {
  std::vector<std::unique_ptr<search::Optimizer>> members;
  members.push_back(std::move(a));
  members.push_back(std::move(b));
  return std::make_unique<search::Portfolio>(std::move(members));
}

search::Result run(search::Optimizer& opt, const search::Limits& lim = {}) {
  auto r = opt.run(two_sigmoids(), lim);
  if (!r) throw std::runtime_error(r.error().message);
  return std::move(*r);
}

// Sigmoid 2, Tanh 1.5, Relu 0.5: greedy with s2t alone goes SS (4) -> TS (3.5) -> TT (3) in three
// expansions; greedy with tt2r alone takes TT to R (0.5) in one and stops after a second.
TableCost downhill() { return TableCost({{OpKind::kSigmoid, 2.0}, {OpKind::kTanh, 1.5}, {OpKind::kRelu, 0.5}}); }

}  // namespace

TEST(Combinators, ThenContinuesFromTheFirstBestAndItsStepsReplay) {
  auto lib = abstract_rules();
  auto m = downhill();
  const auto tanh = pick(lib, {"s2t"}), fuse = pick(lib, {"tt2r"}), all = pick(lib, {"s2t", "tt2r"});
  auto opt = then(make("greedy", tanh, m), make("greedy", fuse, m));
  EXPECT_EQ(opt->name(), "then(greedy, greedy)");
  auto r = run(*opt);
  EXPECT_DOUBLE_EQ(r.initial_cost, 4.0);
  EXPECT_DOUBLE_EQ(r.best_cost, 0.5);
  ASSERT_EQ(r.steps.size(), 3u);  // two s2t, then tt2r
  EXPECT_EQ(r.steps[2].rule, "tt2r");
  auto again = search::replay(two_sigmoids(), all, r.steps);
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_TRUE(structurally_equal(*again, r.best));
  EXPECT_EQ(r.stop, search::StopReason::kConverged);

  ASSERT_EQ(r.report.phases.size(), 2u);
  const auto& a = r.report.phases[0];
  const auto& b = r.report.phases[1];
  EXPECT_EQ(a.from, -1);
  EXPECT_TRUE(a.ran);
  EXPECT_FALSE(a.returned);
  EXPECT_DOUBLE_EQ(a.initial_cost, 4.0);
  EXPECT_DOUBLE_EQ(a.best_cost, 3.0);
  EXPECT_EQ(a.steps, 2);
  EXPECT_EQ(b.from, 0);
  EXPECT_TRUE(b.ran);
  EXPECT_TRUE(b.returned);
  EXPECT_DOUBLE_EQ(b.initial_cost, 3.0);  // first's best graph
  EXPECT_DOUBLE_EQ(b.best_cost, 0.5);
  EXPECT_EQ(b.steps, 1);
  EXPECT_LE(r.best_cost, a.best_cost);
  // Counters add up over the parts: 3 expansions, then 2.
  EXPECT_EQ(r.report.expanded, 5);
  EXPECT_EQ(r.report.budget_used, 5);
}

// The second part gets what the first left of the budget: 4 - 3 = 1 expansion, enough for its
// one step, after which it stops at the budget, and so does the whole.
TEST(Combinators, ThenHandsTheSecondWhatIsLeftOfTheBudget) {
  auto lib = abstract_rules();
  auto m = downhill();
  const auto tanh = pick(lib, {"s2t"}), fuse = pick(lib, {"tt2r"});
  auto opt = then(make("greedy", tanh, m), make("greedy", fuse, m));
  search::Limits lim;
  lim.budget = 4;
  auto r = run(*opt, lim);
  EXPECT_DOUBLE_EQ(r.best_cost, 0.5);
  EXPECT_EQ(r.stop, search::StopReason::kBudget);
  EXPECT_EQ(r.report.budget_used, 4);
  ASSERT_EQ(r.report.phases.size(), 2u);
  EXPECT_EQ(r.report.phases[0].stop, search::StopReason::kConverged);
  EXPECT_EQ(r.report.phases[1].stop, search::StopReason::kBudget);
}

TEST(Combinators, APhaseWithNoBudgetLeftDoesNotRun) {
  auto lib = abstract_rules();
  auto m = downhill();
  const auto tanh = pick(lib, {"s2t"}), fuse = pick(lib, {"tt2r"});
  auto opt = then(make("greedy", tanh, m), make("greedy", fuse, m));
  search::Limits lim;
  lim.budget = 3;  // the first part's three expansions
  auto r = run(*opt, lim);
  EXPECT_DOUBLE_EQ(r.best_cost, 3.0);
  EXPECT_EQ(r.steps.size(), 2u);
  EXPECT_EQ(r.stop, search::StopReason::kBudget);
  ASSERT_EQ(r.report.phases.size(), 2u);
  EXPECT_TRUE(r.report.phases[0].returned);
  EXPECT_FALSE(r.report.phases[1].ran);
  EXPECT_FALSE(r.report.phases[1].returned);
  EXPECT_EQ(r.report.phases[1].stop, search::StopReason::kBudget);
  EXPECT_EQ(r.report.phases[1].steps, 0);
}

TEST(Combinators, APhaseWithNoTimeLeftDoesNotRun) {
  auto lib = abstract_rules();
  auto m = downhill();
  const auto all = pick(lib, {"s2t", "tt2r"});
  search::Limits lim;
  lim.time_limit_s = 1e-9;  // spent before the first part's first expansion
  for (bool as_portfolio : {false, true}) {
    auto opt = as_portfolio ? portfolio(make("greedy", all, m), make("exhaustive", all, m))
                            : then(make("greedy", all, m), make("exhaustive", all, m));
    auto r = run(*opt, lim);
    EXPECT_EQ(r.stop, search::StopReason::kTimeLimit) << opt->name();
    EXPECT_TRUE(r.steps.empty()) << opt->name();
    ASSERT_EQ(r.report.phases.size(), 2u) << opt->name();
    EXPECT_TRUE(r.report.phases[0].ran);
    EXPECT_TRUE(r.report.phases[0].returned);
    EXPECT_FALSE(r.report.phases[1].ran) << opt->name();
    EXPECT_EQ(r.report.phases[1].name, "exhaustive");
    EXPECT_EQ(r.report.phases[1].stop, search::StopReason::kTimeLimit);
  }
}

// Sigmoid 2, Relu 0.5, Erf 1.5: greedy stops at Erf (1.5), exhaustive finds two Relus (1.0).
TEST(Combinators, PortfolioReturnsTheCheapestAndSaysWhich) {
  auto lib = abstract_rules();
  TableCost m({{OpKind::kSigmoid, 2.0}, {OpKind::kRelu, 0.5}, {OpKind::kErf, 1.5}});
  const auto rules = pick(lib, {"s2r", "ss2e"});
  auto opt = portfolio(make("greedy", rules, m), make("exhaustive", rules, m));
  EXPECT_EQ(opt->name(), "portfolio(greedy, exhaustive)");
  auto r = run(*opt);
  EXPECT_DOUBLE_EQ(r.initial_cost, 4.0);
  EXPECT_DOUBLE_EQ(r.best_cost, 1.0);
  auto again = search::replay(two_sigmoids(), rules, r.steps);
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_TRUE(structurally_equal(*again, r.best));
  // The first member's reason stands: the second ended on its own (exhausted), at no limit.
  EXPECT_EQ(r.stop, search::StopReason::kConverged);
  ASSERT_EQ(r.report.phases.size(), 2u);
  EXPECT_FALSE(r.report.phases[0].returned);
  EXPECT_DOUBLE_EQ(r.report.phases[0].best_cost, 1.5);
  EXPECT_TRUE(r.report.phases[1].returned);
  EXPECT_EQ(r.report.phases[1].from, -1);  // from the input, as every member
  EXPECT_DOUBLE_EQ(r.report.phases[1].initial_cost, 4.0);

  // The other way round the cheaper member is the first, and it stays returned.
  auto reversed = portfolio(make("exhaustive", rules, m), make("greedy", rules, m));
  auto rr = run(*reversed);
  EXPECT_DOUBLE_EQ(rr.best_cost, 1.0);
  EXPECT_TRUE(rr.report.phases[0].returned);
  EXPECT_FALSE(rr.report.phases[1].returned);
  EXPECT_TRUE(rr.report.phases[1].ran);
}

TEST(Combinators, PortfolioTiesGoToTheEarlierMember) {
  auto lib = abstract_rules();
  TableCost m({{OpKind::kSigmoid, 2.0}, {OpKind::kRelu, 0.5}, {OpKind::kErf, 1.5}});
  const auto rules = pick(lib, {"s2r", "ss2e"});
  search::SearchOptions loose;
  loose.alpha = 2;
  auto taso = search::make_optimizer("taso", rules, m, loose);
  ASSERT_TRUE(taso.ok());
  auto opt = portfolio(std::move(*taso), make("exhaustive", rules, m));
  auto r = run(*opt);
  ASSERT_EQ(r.report.phases.size(), 2u);
  EXPECT_DOUBLE_EQ(r.report.phases[0].best_cost, 1.0);
  EXPECT_DOUBLE_EQ(r.report.phases[1].best_cost, 1.0);
  EXPECT_TRUE(r.report.phases[0].returned);
  EXPECT_FALSE(r.report.phases[1].returned);
}

// Nested: a portfolio of (greedy then exhaustive) and greedy. Phases are flattened and renumbered;
// the inner second part starts from phase 0, the outer greedy from the input.
TEST(Combinators, NestedPhasesAreFlattenedWithTheirStarts) {
  auto lib = abstract_rules();
  auto m = downhill();
  const auto tanh = pick(lib, {"s2t"}), fuse = pick(lib, {"tt2r"}), all = pick(lib, {"s2t", "tt2r"});
  auto opt = portfolio(then(make("greedy", tanh, m), make("greedy", fuse, m)), make("greedy", tanh, m));
  auto r = run(*opt);
  EXPECT_DOUBLE_EQ(r.best_cost, 0.5);
  auto again = search::replay(two_sigmoids(), all, r.steps);
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_TRUE(structurally_equal(*again, r.best));
  ASSERT_EQ(r.report.phases.size(), 3u);
  EXPECT_EQ(r.report.phases[0].from, -1);
  EXPECT_EQ(r.report.phases[1].from, 0);
  EXPECT_EQ(r.report.phases[2].from, -1);
  EXPECT_FALSE(r.report.phases[0].returned);
  EXPECT_TRUE(r.report.phases[1].returned);
  EXPECT_FALSE(r.report.phases[2].returned);
  EXPECT_DOUBLE_EQ(r.report.phases[2].best_cost, 3.0);
  EXPECT_EQ(r.report.expanded, 3 + 2 + 3);
}

TEST(Combinators, ReportJsonListsThePhases) {
  auto lib = abstract_rules();
  auto m = downhill();
  const auto tanh = pick(lib, {"s2t"}), fuse = pick(lib, {"tt2r"});
  auto opt = then(make("greedy", tanh, m), make("greedy", fuse, m));
  search::Limits lim;
  lim.budget = 3;
  auto j = search::report_json(run(*opt, lim));
  EXPECT_FALSE(j.contains("polish"));
  EXPECT_FALSE(j.contains("fallback"));
  EXPECT_EQ(j["budget_used"], 3);
  ASSERT_EQ(j["phases"].size(), 2u);
  EXPECT_EQ(j["phases"][0]["from"], "input");
  EXPECT_EQ(j["phases"][0]["returned"], true);
  EXPECT_DOUBLE_EQ(j["phases"][0]["best_ms"].get<double>(), 3.0);
  EXPECT_EQ(j["phases"][1]["from"], 0);
  EXPECT_EQ(j["phases"][1]["ran"], false);
  EXPECT_TRUE(j["phases"][1]["best_ms"].is_null());
  EXPECT_EQ(j["phases"][1]["stop_reason"], "budget reached");
  // A single strategy has no phases.
  auto single = make("greedy", tanh, m);
  EXPECT_TRUE(search::report_json(run(*single))["phases"].empty());
}

TEST(Combinators, AnEmptyPortfolioIsAnError) {
  search::Portfolio none({});
  EXPECT_FALSE(none.run(two_sigmoids(), {}).ok());
}
