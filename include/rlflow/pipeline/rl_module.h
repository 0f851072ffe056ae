#pragma once
// The RL module: the agent (GNN + PPO), its trainers and the world model, which only `--search rl`,
// `train-agent` and `train-world-model` use. It is libtorch's nn, most of the build's compile time,
// so the `rlflow` binary does not link it: it loads librlflow_rl.so from beside itself the first time
// one of those asks (dlopen), and the main job builds and runs without it. Programs that link
// rlflow_rl instead (the Python module, the tests) hand its table over with use_rl_module.
//
// What stays here, in the core: the `rl` entry in search's registry (its name, its help, the file it
// reads), the trainers' option checks and reports (pipeline/train.h). The module gives the rest.
#include <string>

#include "rlflow/pipeline/train.h"
#include "rlflow/search/registry.h"
#include "rlflow/util/expected.h"

namespace rlflow::pipeline {

struct RlModule {
  // Bumped whenever this table or a type it passes changes: a module built from other sources is refused.
  static constexpr int kAbi = 1;
  int abi = kAbi;
  // search's `rl` strategy: settings hold an rl::RlSearchOptions.
  Expected<search::BuiltStrategy> (*make_search_strategy)(const search::StrategyInputs&) = nullptr;
  // The trainers, after train_agent / train_world_model checked the options and paths.
  Expected<TrainAgentReport> (*train_agent)(const TrainAgentOptions&, const TrainAgentHooks&) = nullptr;
  Expected<TrainWorldModelReport> (*train_world_model)(const TrainWorldModelOptions&, const TrainWorldModelHooks&) = nullptr;
};

// The module, loaded once (util/module.h): the table given to use_rl_module, else $RLFLOW_RL_MODULE,
// else librlflow_rl.so beside the running binary. Its error (ErrorCode::kUnsupported) says what asked
// for it, where it looked and how to build it.
Expected<const RlModule*> rl_module(const std::string& needed_for);
// For programs that link rlflow_rl: rl_module then never loads a file.
void use_rl_module(const RlModule* module);

// Registers `rl` in search's registry (once; later calls do nothing): the name, help and reads are
// here, and making it loads the module.
void register_rl_strategy();

}  // namespace rlflow::pipeline
