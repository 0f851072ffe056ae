// A trained agent as a search strategy: the greedy rollout, then sampled ones; the best graph
// met anywhere on them wins (an episode may pass through its best state and go on).
#include <chrono>
#include <unordered_set>

#include <spdlog/spdlog.h>

#include "checkpoint.h"
#include "rlflow/cost/memo.h"
#include "ppo.h"
#include "rollout_optimizer.h"
#include "rlflow/rl/agent.h"
#include "rlflow/util/file_io.h"

namespace rlflow::rl {

Expected<search::Result> RolloutOptimizer::run(const ir::Graph& g, const search::Limits& limits) {
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  torch::set_num_threads(torch_threads_);
  EnvConfig ec = env_;
  ec.count_distinct_graphs = true;  // for report.unique_graphs
  ec.max_locations = std::min(ec.max_locations, limits.max_locations);
  GraphEnv env(g, rules_, model_, ec);
  std::mt19937_64 rng(o_.seed);
  search::Result r;
  r.best = g;
  r.stop = search::StopReason::kRolloutsDone;
  // Limits are checked before each rollout; one that has started runs to its end (at most
  // EnvConfig::max_steps steps). The environment holds two graphs (current and best), so the
  // memory limit, which bounds stored search states, has nothing to bound here.
  for (int k = 0; k <= o_.rollouts; ++k) {
    if (k > 0 && limits.time_limit_s > 0 && elapsed() > limits.time_limit_s) {
      r.stop = search::StopReason::kTimeLimit;
      break;
    }
    if (k > 0 && r.report.expanded >= limits.budget) {
      r.stop = search::StopReason::kBudget;
      break;
    }
    if (auto st = rollout(env, k == 0, rng, r.report); !st.ok()) return st.error();
    if (k == 0) r.initial_cost = r.best_cost = env.initial_cost();
    if (env.best_cost() < r.best_cost - 1e-12) {
      r.best_cost = env.best_cost();
      r.best = env.best_graph();
      r.steps = env.best_steps();
    }
    r.report.seconds_total = elapsed();
    if (progress_) progress_(r.report, r.best_cost);
  }
  if (r.stop == search::StopReason::kRolloutsDone)
    if (auto st = refine(env, g, limits, elapsed(), r); !st.ok()) return st.error();
  if (o_.polish && r.stop == search::StopReason::kRolloutsDone)
    if (auto st = polish(limits, elapsed(), r); !st.ok()) return st.error();
  if (o_.never_below_greedy && r.stop == search::StopReason::kRolloutsDone)
    if (auto st = fallback(g, limits, elapsed(), r); !st.ok()) return st.error();
  r.report.unique_graphs = env.distinct_graphs();
  r.report.seconds_total = elapsed();
  return r;
}

Expected<std::optional<search::Result>> RolloutOptimizer::descend(const ir::Graph& start, const search::Limits& limits,
                                                                   double elapsed_s, search::Result& r) {
  search::Limits left = limits;
  left.budget = limits.budget - r.report.expanded;
  if (limits.time_limit_s > 0) left.time_limit_s = limits.time_limit_s - elapsed_s;
  if (left.budget <= 0 || (limits.time_limit_s > 0 && left.time_limit_s <= 0)) {
    r.stop = left.budget <= 0 ? search::StopReason::kBudget : search::StopReason::kTimeLimit;
    return std::optional<search::Result>{};
  }
  auto greedy = search::make_optimizer("greedy", rules_, model_);
  if (!greedy) return greedy.error();
  auto p = (*greedy)->run(start, left);
  if (!p) return p.error();
  r.report.expanded += p->report.expanded;
  r.report.generated += p->report.generated;
  r.report.rejected += p->report.rejected;
  for (size_t i = 0; i < r.report.rejections.size(); ++i) r.report.rejections[i] += p->report.rejections[i];
  if (p->stop == search::StopReason::kTimeLimit || p->stop == search::StopReason::kBudget) r.stop = p->stop;
  return std::optional<search::Result>(std::move(*p));
}

// Local-optimum polish: greedy descent (every rule, every match, the cheapest child while it is
// cheaper) from the best graph the agent found, so that the result is a local optimum under single
// rewrites, as greedy's own is. What the polish adds is reported (Report::polish_steps, polish_gain).
// (Polishing the 4 or 8 cheapest distinct graphs met instead of the best one was tried and gave the
// same results on inception_v3, in more time.)
Status RolloutOptimizer::polish(const search::Limits& limits, double elapsed_s, search::Result& r) {
  auto p = descend(r.best, limits, elapsed_s, r);
  if (!p) return p.error();
  if (*p && (*p)->best_cost < r.best_cost - 1e-12) {
    r.report.polish_gain = r.best_cost - (*p)->best_cost;
    r.report.polish_steps = static_cast<int64_t>((*p)->steps.size());
    r.best_cost = (*p)->best_cost;
    r.best = std::move((*p)->best);
    r.steps.insert(r.steps.end(), (*p)->steps.begin(), (*p)->steps.end());
  }
  return {};
}

// The greedy fallback: a portfolio of the agent and greedy search, so that `--search rl` never
// returns a graph that greedy search beats. It is not the agent's result, and the report says which
// one was returned.
Status RolloutOptimizer::fallback(const ir::Graph& g, const search::Limits& limits, double elapsed_s, search::Result& r) {
  r.report.agent_cost = r.best_cost;
  auto p = descend(g, limits, elapsed_s, r);
  if (!p) return p.error();
  if (!*p) return {};
  r.report.fallback_ran = true;
  r.report.fallback_cost = (*p)->best_cost;
  if ((*p)->best_cost < r.best_cost - 1e-12) {
    r.report.fallback_won = true;
    r.best_cost = (*p)->best_cost;
    r.best = std::move((*p)->best);
    r.steps = std::move((*p)->steps);
  }
  return {};
}

namespace {

class RlOptimizer : public RolloutOptimizer {
 public:
  RlOptimizer(PpoConfig cfg, std::vector<const rules::Rule*> rules, cost::CostModel& model, nets::PolicyNet net, RlSearchOptions o)
      : RolloutOptimizer(std::move(rules), model, cfg.env, std::move(o), cfg.torch_threads), net_(std::move(net)) {
    net_->eval();
  }

 protected:
  // Policy-guided beam search: the policy proposes, the cost model disposes. Each depth expands
  // the options().beam_branch most likely rewrites of every beam state, costs each child by
  // stepping the environment, and keeps the options().beam cheapest distinct children.
  Status refine(GraphEnv& env, const ir::Graph& g, const search::Limits& limits, double elapsed0, search::Result& r) override {
    const auto& o = options();
    if (o.beam <= 0) return {};
    const auto t0 = std::chrono::steady_clock::now();
    auto elapsed = [&] { return elapsed0 + std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
    struct State {
      ir::Graph graph;
      double cost;
      std::vector<rules::Match> steps;
    };
    const double cost0 = r.initial_cost;
    std::vector<State> beam{{g, cost0, {}}};
    double beam_best = cost0;
    int stale = 0;
    cost::MemoCost coster(cost_model());
    for (int depth = 0; depth < env_config().max_steps && !beam.empty() && stale < o.beam_patience; ++depth) {
      std::vector<Observation> obs;
      for (const auto& s : beam) {
        auto ob = env.reset_to(s.graph, cost0, s.steps);
        if (!ob) return ob.error();
        obs.push_back(std::move(*ob));
      }
      std::vector<const Observation*> ptrs;
      for (const auto& ob : obs) ptrs.push_back(&ob);
      auto moves = ppo::top_actions(net_, ptrs, env.max_locations(), o.beam_branch);
      // Children are applied to the parent's index and costed, not observed: only the beam's
      // survivors need matches and features, and they get them from reset_to at the next depth.
      std::vector<State> children;
      std::unordered_set<uint64_t> seen;
      for (size_t b = 0; b < beam.size(); ++b) {
        const rules::GraphIndex index(beam[b].graph);
        for (const auto& c : moves[b]) {
          if (limits.time_limit_s > 0 && elapsed() > limits.time_limit_s) {
            r.stop = search::StopReason::kTimeLimit;
            return {};
          }
          if (r.report.expanded >= limits.budget) {
            r.stop = search::StopReason::kBudget;
            return {};
          }
          const auto& m = obs[b].locations[static_cast<size_t>(c.action.xfer)][static_cast<size_t>(c.action.location)];
          rules::Rejection why = rules::Rejection::kNone;
          auto child = rules::apply(index, *rules()[static_cast<size_t>(c.action.xfer)], m, &why);
          ++r.report.expanded;
          if (!child) {
            ++r.report.rejected;
            ++r.report.rejections[static_cast<size_t>(why)];
            continue;
          }
          ++r.report.generated;
          env.count_graph(*child);
          if (!seen.insert(child->hash()).second) continue;
          auto cost = coster.cost(*child);
          if (!cost) return cost.error();
          auto steps = beam[b].steps;
          steps.push_back(m);
          children.push_back({std::move(*child), *cost, std::move(steps)});
        }
      }
      std::stable_sort(children.begin(), children.end(), [](const State& a, const State& c) { return a.cost < c.cost; });
      spdlog::debug("beam depth {}: {} states, {} children, cheapest {:.4f} ms (best so far {:.4f})", depth, beam.size(),
                    children.size(), children.empty() ? 0.0 : children.front().cost, r.best_cost);
      if (children.size() > static_cast<size_t>(o.beam)) children.resize(static_cast<size_t>(o.beam));
      // Patience counts depths without progress of the beam itself (the rollouts may already hold
      // a better graph, which the beam must be allowed to pass).
      if (!children.empty() && children.front().cost < beam_best - 1e-12) {
        beam_best = children.front().cost;
        stale = 0;
      } else {
        ++stale;
      }
      if (!children.empty() && children.front().cost < r.best_cost - 1e-12) {
        r.best_cost = children.front().cost;
        r.best = children.front().graph;
        r.steps = children.front().steps;
      }
      beam = std::move(children);
      r.report.seconds_total = elapsed();
    }
    return {};
  }

  Status rollout(GraphEnv& env, bool greedy, std::mt19937_64& rng, search::Report& report) override {
    auto obs = env.reset();
    if (!obs) return obs.error();
    Observation cur = std::move(*obs);
    for (;;) {
      auto choice = ppo::act(net_, {&cur}, env.max_locations(), greedy, rng);
      auto st = env.step(choice[0].action);
      if (!st) return st.error();
      ++report.expanded;
      if (st->info.rejected) {
        ++report.rejected;
        ++report.rejections[static_cast<size_t>(st->info.rejection)];
      }
      else if (!st->info.rule.empty()) ++report.generated;
      if (st->done) return {};
      cur = std::move(st->observation);
    }
  }

 private:
  nets::PolicyNet net_;
};

}  // namespace

// src/rl/dream.cpp: agents trained in the world model's dream.
Expected<std::unique_ptr<search::Optimizer>> make_dream_optimizer(const RlSearchOptions& o, const rules::RuleLibrary& lib,
                                                                  cost::CostModel& model);

Expected<std::vector<const rules::Rule*>> lookup_rules(const rules::RuleLibrary& lib, const std::vector<std::string>& names,
                                                       const std::string& origin) {
  std::vector<const rules::Rule*> out;
  for (const auto& n : names) {
    const auto* r = lib.find(n);
    if (!r) return Error::bad_input(origin + ": uses rule '" + n + "', which the rule library lacks");
    if (r->status == rules::VerifyStatus::kRefuted) return Error::bad_input(origin + ": rule '" + n + "' is refuted in the library");
    out.push_back(r);
  }
  return out;
}

std::string default_agent_path() { return find_shipped("configs/agents/zoo-h100.pt", "RLFLOW_AGENT"); }

Expected<std::unique_ptr<search::Optimizer>> make_rl_optimizer(const RlSearchOptions& given, const rules::RuleLibrary& lib,
                                                               cost::CostModel& model) {
  RlSearchOptions o = given;
  if (o.agent_path.empty()) o.agent_path = default_agent_path();
  if (o.rollouts < 0) return Error{ErrorCode::kUsage, "--rollouts must be >= 0"};
  if (o.beam < 0 || o.beam_branch < 1 || o.beam_patience < 1)
    return Error{ErrorCode::kUsage, "--beam must be >= 0 and --beam-branch >= 1"};
  auto info = read_agent_info(o.agent_path);
  if (!info) return info.error();
  if (info->kind == "dream-controller") return make_dream_optimizer(o, lib, model);
  if (info->kind != "policy") return Error::bad_input(o.agent_path + ": not an agent (a " + info->kind + "); train one with train-agent");
  auto rules = lookup_rules(lib, info->rules, o.agent_path);
  if (!rules) return rules.error();
  nets::PolicyNet net(static_cast<int>(rules->size()), info->config.hidden, info->config.gnn_rounds);
  if (auto st = checkpoint::load(o.agent_path, net, nullptr); !st.ok()) return st.error();
  return std::unique_ptr<search::Optimizer>(std::make_unique<RlOptimizer>(info->config, std::move(*rules), model, std::move(net), o));
}

}  // namespace rlflow::rl
