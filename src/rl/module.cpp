// The RL module's table, and the one symbol librlflow_rl.so exports for the core to find it.
#include "rlflow/rl/module.h"

namespace rlflow::rl {

const pipeline::RlModule& module() {
  static const pipeline::RlModule table{pipeline::RlModule::kAbi, &make_search_strategy, &run_train_agent, &run_train_world_model};
  return table;
}

}  // namespace rlflow::rl

extern "C" __attribute__((visibility("default"))) const rlflow::pipeline::RlModule* rlflow_rl_module() { return &rlflow::rl::module(); }
