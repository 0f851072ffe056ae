// Loading the rule tools module (include/rlflow/rules/tools_module.h).
#include "rlflow/rules/tools_module.h"

#include "rlflow/util/module.h"

namespace rlflow::rules {

namespace {

ModuleSlot<ToolsModule>& slot() {
  static ModuleSlot<ToolsModule> s("librlflow_rules_tools.so", "RLFLOW_RULES_TOOLS_MODULE", "rlflow_rules_tools_module",
                                   "rlflow's rule tools module");
  return s;
}

}  // namespace

Expected<const ToolsModule*> tools_module(const std::string& needed_for) { return slot().get(needed_for); }

void use_tools_module(const ToolsModule* module) { slot().use(module); }

}  // namespace rlflow::rules
