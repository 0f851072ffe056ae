// Opening one of rlflow's loadable modules (include/rlflow/util/module.h).
#include "rlflow/util/module.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>

namespace rlflow {

std::string module_path(const char* file, const char* env_var) {
  if (const char* env = std::getenv(env_var); env && *env) return env;
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ((ec ? std::filesystem::path(".") : exe.parent_path()) / file).string();
}

bool module_file_exists(const char* file, const char* env_var) {
  std::error_code ec;
  return std::filesystem::exists(module_path(file, env_var), ec);
}

namespace {
constexpr const char* kBuild = " (scripts/setup/build builds it; the main job does not need it)";
}

std::string module_not_built(const char* file, const char* env_var, const std::string& what) {
  return what + " (" + module_path(file, env_var) + ") is not built" + kBuild;
}

Expected<const void*> open_module(const char* file, const char* env_var, const char* entry, const std::string& what) {
  const std::string path = module_path(file, env_var);
  const std::string build = kBuild;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return Error::unsupported(module_not_built(file, env_var, what));
  // RTLD_NOW: a module that does not match this binary fails here, whole, not at some later call.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) return Error::unsupported(what + " (" + path + ") could not be loaded: " + dlerror() + build);
  using Entry = const void* (*)();
  auto fn = reinterpret_cast<Entry>(dlsym(handle, entry));
  const void* table = fn ? fn() : nullptr;
  if (!table) return Error::unsupported(path + " is not " + what + " (no " + entry + ")" + build);
  return table;  // never unloaded: its code is in use until the process ends
}

}  // namespace rlflow
