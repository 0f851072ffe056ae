#pragma once
// What the RL module gives the core (include/rlflow/pipeline/rl_module.h): librlflow_rl.so exports
// it as rlflow_rl_module(); a program that links rlflow_rl passes module() to
// pipeline::use_rl_module.
#include "rlflow/pipeline/rl_module.h"

namespace rlflow::rl {

const pipeline::RlModule& module();

// The table's entries.
// search's `rl`: the agent of RlSearchOptions::agent_path, with its own rules (rl_search.cpp).
Expected<search::BuiltStrategy> make_search_strategy(const search::StrategyInputs& in);
// The trainers, once pipeline::train_agent / train_world_model checked their options (train_commands.cpp).
Expected<pipeline::TrainAgentReport> run_train_agent(const pipeline::TrainAgentOptions& o, const pipeline::TrainAgentHooks& hooks);
Expected<pipeline::TrainWorldModelReport> run_train_world_model(const pipeline::TrainWorldModelOptions& o,
                                                                const pipeline::TrainWorldModelHooks& hooks);

}  // namespace rlflow::rl
