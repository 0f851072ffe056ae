// A trained agent as a search strategy: the greedy rollout, then sampled ones; the best graph
// met anywhere on them wins (an episode may pass through its best state and go on).
#include <chrono>

#include "checkpoint.h"
#include "ppo.h"
#include "rlflow/rl/agent.h"

namespace rlflow::rl {

namespace {

class RlOptimizer : public search::Optimizer {
 public:
  RlOptimizer(PpoConfig cfg, std::vector<const rules::Rule*> rules, cost::CostModel& model, nets::PolicyNet net, RlSearchOptions o)
      : cfg_(std::move(cfg)), rules_(std::move(rules)), model_(model), net_(std::move(net)), o_(std::move(o)) {}

  std::string name() const override { return "rl"; }

  Expected<search::Result> run(const ir::Graph& g, const search::Limits& limits) override {
    const auto t0 = std::chrono::steady_clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
    torch::set_num_threads(cfg_.torch_threads);
    net_->eval();
    EnvConfig ec = cfg_.env;
    ec.max_locations = std::min(ec.max_locations, limits.max_locations);
    GraphEnv env(g, rules_, model_, ec);
    std::mt19937_64 rng(o_.seed);
    search::Result r;
    r.best = g;
    r.stop = search::StopReason::kConverged;
    for (int k = 0; k <= o_.rollouts; ++k) {
      if (limits.time_limit_s > 0 && elapsed() > limits.time_limit_s) {
        r.stop = search::StopReason::kTimeLimit;
        break;
      }
      auto obs = env.reset();
      if (!obs) return obs.error();
      if (k == 0) r.initial_cost = r.best_cost = env.initial_cost();
      Observation cur = std::move(*obs);
      for (;;) {
        auto choice = ppo::act(net_, {&cur}, ec.max_locations, k == 0, rng);
        auto st = env.step(choice[0].action);
        if (!st) return st.error();
        ++r.report.expanded;
        if (st->info.rejected) ++r.report.rejected;
        else if (!st->info.rule.empty()) ++r.report.generated;
        if (st->done) break;
        cur = std::move(st->observation);
      }
      if (env.best_cost() < r.best_cost - 1e-12) {
        r.best_cost = env.best_cost();
        r.best = env.best_graph();
        r.steps = env.best_steps();
      }
      r.report.seconds_total = elapsed();
      if (progress_) progress_(r.report, r.best_cost);
    }
    r.report.unique_graphs = r.report.generated + 1;
    r.report.seconds_total = elapsed();
    return r;
  }

 private:
  PpoConfig cfg_;
  std::vector<const rules::Rule*> rules_;
  cost::CostModel& model_;
  nets::PolicyNet net_;
  RlSearchOptions o_;
};

}  // namespace

// src/rl/dream.cpp: agents trained in the world model's dream.
Expected<std::unique_ptr<search::Optimizer>> make_dream_optimizer(const RlSearchOptions& o, const rules::RuleLibrary& lib,
                                                                  cost::CostModel& model);

Expected<std::unique_ptr<search::Optimizer>> make_rl_optimizer(const RlSearchOptions& o, const rules::RuleLibrary& lib,
                                                               cost::CostModel& model) {
  if (o.agent_path.empty()) return Error{ErrorCode::kUsage, "--search rl needs --agent AGENT.pt"};
  if (o.rollouts < 0) return Error{ErrorCode::kUsage, "--rollouts must be >= 0"};
  auto info = read_agent_info(o.agent_path);
  if (!info) return info.error();
  if (info->kind == "dream-controller") return make_dream_optimizer(o, lib, model);
  if (info->kind != "policy") return Error::bad_input(o.agent_path + ": not an agent (a " + info->kind + "); train one with train-agent");
  std::vector<const rules::Rule*> rules;
  for (const auto& n : info->rules) {
    const auto* r = lib.find(n);
    if (!r) return Error::bad_input(o.agent_path + ": the agent uses rule '" + n + "', which the rule library lacks");
    if (r->status == rules::VerifyStatus::kRefuted) return Error::bad_input(o.agent_path + ": rule '" + n + "' is refuted in the library");
    rules.push_back(r);
  }
  nets::PolicyNet net(static_cast<int>(rules.size()), info->config.hidden, info->config.gnn_rounds);
  if (auto st = checkpoint::load(o.agent_path, net, nullptr); !st.ok()) return st.error();
  return std::unique_ptr<search::Optimizer>(std::make_unique<RlOptimizer>(info->config, std::move(rules), model, std::move(net), o));
}

}  // namespace rlflow::rl
