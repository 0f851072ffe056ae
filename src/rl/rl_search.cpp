// A trained agent as a search strategy: the greedy rollout, then sampled ones; the best graph
// met anywhere on them wins (an episode may pass through its best state and go on).
#include <chrono>
#include <mutex>
#include <unordered_set>

#include <spdlog/spdlog.h>

#include "checkpoint.h"
#include "rlflow/cost/memo.h"
#include "ppo.h"
#include "rollout_optimizer.h"
#include "rlflow/rl/agent.h"
#include "rlflow/rl/module.h"
#include "rlflow/search/combinators.h"
#include "rlflow/search/registry.h"
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
  // EnvConfig::max_steps steps). The budget counts the agent's actions. The environment holds two
  // graphs (current and best), so the memory limit, which bounds stored search states, has
  // nothing to bound here.
  for (int k = 0; k <= o_.rollouts; ++k) {
    if (k > 0 && limits.time_limit_s > 0 && elapsed() > limits.time_limit_s) {
      r.stop = search::StopReason::kTimeLimit;
      break;
    }
    if (k > 0 && r.report.agent_actions >= limits.budget) {
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
    r.report.budget_used = r.report.agent_actions;
    r.report.seconds_total = elapsed();
    if (progress_) progress_(r.report, r.best_cost);
  }
  if (r.stop == search::StopReason::kRolloutsDone)
    if (auto st = refine(env, g, limits, elapsed(), r); !st.ok()) return st.error();
  r.report.unique_graphs = env.distinct_graphs();
  r.report.budget_used = r.report.agent_actions;
  r.report.seconds_total = elapsed();
  return r;
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
        ++r.report.expanded;  // reset_to enumerated its rewrites
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
          if (r.report.agent_actions >= limits.budget) {
            r.stop = search::StopReason::kBudget;
            return {};
          }
          const auto& m = obs[b].locations[static_cast<size_t>(c.action.xfer)][static_cast<size_t>(c.action.location)];
          rules::Rejection why = rules::Rejection::kNone;
          auto child = rules::apply(index, *rules()[static_cast<size_t>(c.action.xfer)], m, &why);
          ++r.report.agent_actions;
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
    ++report.expanded;
    Observation cur = std::move(*obs);
    for (;;) {
      auto choice = ppo::act(net_, {&cur}, env.max_locations(), greedy, rng);
      auto st = env.step(choice[0].action);
      if (!st) return st.error();
      ++report.agent_actions;
      if (st->info.rejected) {
        ++report.rejected;
        ++report.rejections[static_cast<size_t>(st->info.rejection)];
      } else if (!st->info.rule.empty()) {
        ++report.generated;
        ++report.expanded;  // the environment enumerated the new graph's rewrites for its masks
      }
      if (st->done) return {};
      cur = std::move(st->observation);
    }
  }

 private:
  nets::PolicyNet net_;
};

}  // namespace

// src/rl/dream.cpp: agents trained in the world model's dream.
Expected<std::unique_ptr<RolloutOptimizer>> make_dream_optimizer(const RlSearchOptions& o, const rules::RuleLibrary& lib,
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

namespace {

// --polish and --never-below-greedy as search combinators around the agent. The greedy searches
// read the agent's rules, which the agent owns; the combination owns the agent, so they live as
// long as the searches that read them.
Expected<std::unique_ptr<search::Optimizer>> combine(std::unique_ptr<RolloutOptimizer> agent, const RlSearchOptions& o,
                                                     cost::CostModel& model) {
  const auto& rules = agent->rules();
  std::unique_ptr<search::Optimizer> out = std::move(agent);
  // Local-optimum polish: greedy descent from the agent's best graph, so that the result is a
  // local optimum under single rewrites, as greedy's own is. (Polishing the 4 or 8 cheapest
  // distinct graphs met instead of the best one was tried and gave the same results on
  // inception_v3, in more time.)
  if (o.polish) {
    auto greedy = search::make_optimizer("greedy", rules, model);
    if (!greedy) return greedy.error();
    out = std::make_unique<search::Then>(std::move(out), std::move(*greedy));
  }
  // The greedy fallback: `--search rl` never returns a graph that greedy search from the input
  // beats. Its graph is then not the agent's, and the phases say which one was returned.
  if (o.never_below_greedy) {
    auto greedy = search::make_optimizer("greedy", rules, model);
    if (!greedy) return greedy.error();
    std::vector<std::unique_ptr<search::Optimizer>> members;
    members.push_back(std::move(out));
    members.push_back(std::move(*greedy));
    out = std::make_unique<search::Portfolio>(std::move(members));
  }
  return out;
}

}  // namespace

Expected<std::unique_ptr<search::Optimizer>> make_rl_optimizer(const RlSearchOptions& given, const rules::RuleLibrary& lib,
                                                               cost::CostModel& model) {
  RlSearchOptions o = given;
  if (o.agent_path.empty()) o.agent_path = default_agent_path();
  if (o.rollouts < 0) return Error{ErrorCode::kUsage, "--rollouts must be >= 0"};
  if (o.beam < 0 || o.beam_branch < 1 || o.beam_patience < 1)
    return Error{ErrorCode::kUsage, "--beam must be >= 0 and --beam-branch >= 1"};
  auto info = read_agent_info(o.agent_path);
  if (!info) return info.error();
  if (info->kind == "dream-controller") {
    auto agent = make_dream_optimizer(o, lib, model);
    if (!agent) return agent.error();
    return combine(std::move(*agent), o, model);
  }
  if (info->kind != "policy") return Error::bad_input(o.agent_path + ": not an agent (a " + info->kind + "); train one with train-agent");
  auto rules = lookup_rules(lib, info->rules, o.agent_path);
  if (!rules) return rules.error();
  nets::PolicyNet net(static_cast<int>(rules->size()), info->config.hidden, info->config.gnn_rounds, info->op_vocab);
  if (auto st = checkpoint::load(o.agent_path, net, nullptr); !st.ok()) return st.error();
  return combine(std::make_unique<RlOptimizer>(info->config, std::move(*rules), model, std::move(net), o), o, model);
}

// The agent brings its own rules (named in its checkpoint) and says what it was trained under.
Expected<search::BuiltStrategy> make_search_strategy(const search::StrategyInputs& in) {
  if (!in.library) return Error::internal("search strategy 'rl': no rule library to look the agent's rules up in");
  // The registry's entry (pipeline/rl_module.cpp) resolved the settings: the agent's path is set.
  const auto* given = std::any_cast<RlSearchOptions>(&in.settings);
  if (!given || given->agent_path.empty()) return Error::internal("search strategy 'rl': its settings name no agent");
  const RlSearchOptions& o = *given;
  auto info = read_agent_info(o.agent_path);
  if (!info) return info.error();
  search::BuiltStrategy out;
  out.rules = info->rules.size();
  // An agent learnt which rewrites pay under one cost: used under another target it still runs, and
  // says so (issue 39: the shipped agent was trained under the H100 cost, the default target is ort).
  if (!o.target.empty()) {
    if (info->target.empty())
      out.warning = o.agent_path + " does not record the target it was trained under (trained before targets were recorded)";
    else if (info->target != o.target)
      out.warning = o.agent_path + " was trained under --target " + info->target + " (" + info->cost_model + " cost), not " + o.target;
  }
  // The same target priced by another table (a recorded table re-measured, a recalibrated profile,
  // another GPU): the rewards it learnt from are not the ones this search sees.
  if (out.warning.empty() && !info->cost_fingerprint.empty() && in.model &&
      info->cost_fingerprint != in.model->device_fingerprint())
    out.warning = o.agent_path + " was trained against the cost table '" + info->cost_fingerprint + "', not '" +
                  in.model->device_fingerprint() + "'";
  auto opt = make_rl_optimizer(o, *in.library, *in.model);
  if (!opt) return opt.error();
  out.optimizer = std::move(*opt);
  return out;
}

}  // namespace rlflow::rl
