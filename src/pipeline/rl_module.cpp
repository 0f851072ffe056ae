// Finding and loading the RL module (include/rlflow/pipeline/rl_module.h), and the `rl` strategy's
// entry in search's registry.
#include "rlflow/pipeline/rl_module.h"

#include <any>
#include <mutex>

#include "rlflow/rl/agent.h"
#include "rlflow/util/file_io.h"
#include "rlflow/util/module.h"

namespace rlflow::rl {

// Here, in the core: the `rl` entry names the file it reads before any module is loaded.
std::string default_agent_path() { return find_shipped("configs/agents/zoo-h100.pt", "RLFLOW_AGENT"); }

}  // namespace rlflow::rl

namespace rlflow::pipeline {

namespace {

ModuleSlot<RlModule>& slot() {
  static ModuleSlot<RlModule> s("librlflow_rl.so", "RLFLOW_RL_MODULE", "rlflow_rl_module", "rlflow's RL module");
  return s;
}

rl::RlSearchOptions settings_of(const std::any& settings) {
  rl::RlSearchOptions o;
  if (const auto* given = std::any_cast<rl::RlSearchOptions>(&settings)) o = *given;
  if (o.agent_path.empty()) o.agent_path = rl::default_agent_path();
  return o;
}

}  // namespace

Expected<const RlModule*> rl_module(const std::string& needed_for) { return slot().get(needed_for); }

void use_rl_module(const RlModule* module) { slot().use(module); }

void register_rl_strategy() {
  static std::once_flag once;
  std::call_once(once, [] {
    search::Strategy s;
    s.name = "rl";
    s.help = "a trained agent, --agent";
    s.needs_rules = false;  // the agent's checkpoint names its rules
    s.budget_counts_actions = true;
    s.reads = [](const std::any& settings) { return std::vector<std::string>{settings_of(settings).agent_path}; };
    s.make = [](const search::StrategyInputs& in) -> Expected<search::BuiltStrategy> {
      auto m = rl_module("--search rl");
      if (!m) return m.error();
      search::StrategyInputs resolved = in;
      resolved.settings = settings_of(in.settings);
      return (*m)->make_search_strategy(resolved);
    };
    // Only a built-in name or an empty maker is refused, and this is neither.
    (void)search::register_strategy(std::move(s));
  });
}

}  // namespace rlflow::pipeline
