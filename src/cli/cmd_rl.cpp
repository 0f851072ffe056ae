// `rlflow train-agent`: trains the GNN + PPO agent on one or more models.
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "commands.h"
#include "rlflow/cli/app.h"
#include "rlflow/cost/factory.h"
#include "rlflow/rl/agent.h"
#include "rlflow/rules/library_io.h"

namespace rlflow::cli {

using json = nlohmann::json;

int cmd_train_agent(const GlobalOptions& g, const TrainAgentOptions& o) {
  if (o.models.empty()) return report_error(g, Error{ErrorCode::kUsage, "train-agent needs at least one --model"});
  if (o.episodes < 1) return report_error(g, Error{ErrorCode::kUsage, "--episodes must be >= 1"});
  rl::TrainOptions t;
  if (!o.config.empty()) {
    auto cfg = rl::load_ppo_config(o.config);
    if (!cfg) return report_error(g, cfg.error());
    t.config = *cfg;
  }
  exec::Executor ex;
  for (const auto& path : o.models) {
    auto graph = load_model(path, o.input_shapes, ex);
    if (!graph) return report_error(g, graph.error());
    t.models.push_back({path, std::move(*graph)});
  }
  const std::string rules_path = o.rules_file.empty() ? rules::default_library_path() : o.rules_file;
  auto lib = rules::load_library(rules_path);
  if (!lib) return report_error(g, lib.error());
  t.rules = select_rules(*lib, o.all_rules);
  if (t.rules.empty()) return report_error(g, Error::bad_input(rules_path + ": no verified rules to train with"));
  cost::CostOptions co;
  co.kind = o.deterministic ? "analytic" : o.cost_model;
  co.deterministic = o.deterministic;
  co.device_profile = o.device_profile;
  auto model = cost::make_cost_model(co);
  if (!model) return report_error(g, model.error());
  t.cost = model->get();
  t.episodes = o.episodes;
  t.seed = o.seed;
  t.out = o.out;
  t.resume = o.resume;
  t.log_path = o.log.empty() ? o.out + ".jsonl" : o.log;
  const bool tty = !g.json && isatty(STDERR_FILENO) && spdlog::get_level() < spdlog::level::err;
  rl::TrainProgress progress;
  if (tty)
    progress = [&](const rl::UpdateLog& u) {
      std::fprintf(stderr, "\r[train] episode %lld/%lld  mean return %.3f  best improvement %.2f%%  env steps/s %.1f  %.0fs   ",
                   static_cast<long long>(u.episodes), static_cast<long long>(o.episodes), u.mean_return, 100 * u.best_improvement,
                   u.env_steps_per_s, u.seconds);
    };
  spdlog::info("training on {} model(s), {} rules, cost model {}", t.models.size(), t.rules.size(), (*model)->name());
  auto sum = rl::train_agent(t, progress);
  if (tty) std::fprintf(stderr, "\r%100s\r", "");
  if (!sum) return report_error(g, sum.error());
  const double step_ms = sum->env_steps ? 1e3 * sum->env_seconds / static_cast<double>(sum->env_steps) : 0.0;
  if (g.json) {
    std::cout << json{{"ok", true},
                      {"agent", o.out},
                      {"log", t.log_path},
                      {"cost_model", (*model)->name()},
                      {"rules", t.rules.size()},
                      {"updates", sum->updates},
                      {"episodes", sum->episodes},
                      {"env_steps", sum->env_steps},
                      {"seconds", sum->seconds},
                      {"real_step_ms", step_ms},
                      {"best_improvement", sum->best_improvement},
                      {"episodes_to_best", sum->episodes_to_best},
                      {"env_steps_to_best", sum->env_steps_to_best}}
                     .dump(2)
              << std::endl;
    return kOk;
  }
  std::printf("rlflow train-agent -> %s  (%zu rules, cost model %s)\n", o.out.c_str(), t.rules.size(), (*model)->name().c_str());
  std::printf("%lld updates, %lld episodes, %lld env steps in %.1fs (real env step %.2f ms)\n", static_cast<long long>(sum->updates),
              static_cast<long long>(sum->episodes), static_cast<long long>(sum->env_steps), sum->seconds, step_ms);
  for (const auto& [name, best] : sum->best_improvement)
    std::printf("  %-40s best improvement %6.2f%% (first at episode %lld, env step %lld)\n", name.c_str(), 100 * best,
                static_cast<long long>(sum->episodes_to_best.at(name)), static_cast<long long>(sum->env_steps_to_best.at(name)));
  std::printf("log: %s\n", t.log_path.c_str());
  return kOk;
}

}  // namespace rlflow::cli
