// Finding and loading the RL module (include/rlflow/pipeline/rl_module.h), and the `rl` strategy's
// entry in search's registry.
#include "rlflow/pipeline/rl_module.h"

#include <dlfcn.h>

#include <any>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <optional>

#include "rlflow/rl/agent.h"
#include "rlflow/util/file_io.h"

namespace rlflow::rl {

// Here, in the core: the `rl` entry names the file it reads before any module is loaded.
std::string default_agent_path() { return find_shipped("configs/agents/zoo-h100.pt", "RLFLOW_AGENT"); }

}  // namespace rlflow::rl

namespace rlflow::pipeline {

namespace {

constexpr const char* kModuleFile = "librlflow_rl.so";
constexpr const char* kEntry = "rlflow_rl_module";

std::mutex g_mutex;
const RlModule* g_module = nullptr;
std::optional<Error> g_failed;  // a load tried and failed: not retried

std::string module_path() {
  if (const char* env = std::getenv("RLFLOW_RL_MODULE"); env && *env) return env;
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ((ec ? std::filesystem::path(".") : exe.parent_path()) / kModuleFile).string();
}

Expected<const RlModule*> load(const std::string& path) {
  const std::string build = " (scripts/setup/build builds it; the main job does not need it)";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return Error::unsupported("rlflow's RL module (" + path + ") is not built" + build);
  // RTLD_NOW: a module that does not match this binary fails here, whole, not at some later call.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) return Error::unsupported("rlflow's RL module (" + path + ") could not be loaded: " + dlerror() + build);
  using Entry = const RlModule* (*)();
  auto entry = reinterpret_cast<Entry>(dlsym(handle, kEntry));
  if (!entry) return Error::unsupported(path + " is not rlflow's RL module (no " + kEntry + ")" + build);
  const RlModule* m = entry();
  if (!m || m->abi != kRlModuleAbi || !m->make_search_strategy || !m->train_agent || !m->train_world_model)
    return Error::unsupported(path + " was built from other rlflow sources than this binary" + build);
  return m;  // never unloaded: its code is in use until the process ends
}

rl::RlSearchOptions settings_of(const std::any& settings) {
  rl::RlSearchOptions o;
  if (const auto* given = std::any_cast<rl::RlSearchOptions>(&settings)) o = *given;
  if (o.agent_path.empty()) o.agent_path = rl::default_agent_path();
  return o;
}

}  // namespace

Expected<const RlModule*> rl_module(const std::string& needed_for) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_module && !g_failed) {
    auto m = load(module_path());
    if (m) g_module = *m;
    else g_failed = m.error();
  }
  if (g_module) return g_module;
  return g_failed->with_context(needed_for);
}

void use_rl_module(const RlModule* module) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_module = module;
  g_failed.reset();
}

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
