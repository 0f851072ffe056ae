// The rule tools module's table, and the one symbol librlflow_rules_tools.so exports for the core
// to find it (include/rlflow/rules/tools_module.h).
#include "rlflow/rules/tools_module.h"

namespace rlflow::rules {

namespace {

std::optional<gen::World> world_named(const std::string& name) {
  if (name == "conv") return gen::conv_world();
  if (name == "matmul") return gen::matmul_world();
  return std::nullopt;
}

}  // namespace

const ToolsModule& tools_table() {
  static const ToolsModule table{
      ToolsModule::kAbi,
      [](const Rule& r) { return verify_numerically(r); },
      [](const Rule& r, const ProofOptions& opts) { return prove_rule_isolated(r, opts); },
      &world_named,
      &gen::generate,
      &gen::mark_default_set,
      &gen::merge_generated};
  return table;
}

}  // namespace rlflow::rules

extern "C" __attribute__((visibility("default"))) const rlflow::rules::ToolsModule* rlflow_rules_tools_module() {
  return &rlflow::rules::tools_table();
}
