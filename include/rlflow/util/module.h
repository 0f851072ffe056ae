#pragma once
// rlflow's loadable modules: parts that the `rlflow` binary does not link because its main job never
// needs them (the RL agent and its trainers, the rule tools), loaded from beside the binary the first
// time a command asks for them (dlopen, RTLD_NOW, never unloaded). Each module exports one C function
// that returns its table of entry points, whose first field is its ABI number. What a module calls
// below it is the binary's: the binary exports rlflow's symbols (src/cli/exports.list). A program that
// links the module's library instead (the Python module, tests) hands the table over with use().
#include <mutex>
#include <optional>
#include <string>

#include "rlflow/util/expected.h"

namespace rlflow {

// Where a module is looked for: $env_var when set, else `file` beside the running binary.
std::string module_path(const char* file, const char* env_var);
// Whether that file exists (nothing is loaded).
bool module_file_exists(const char* file, const char* env_var);
// "<what> (<where>) is not built (how to build it)": the error when the file does not exist.
std::string module_not_built(const char* file, const char* env_var, const std::string& what);

// The table that `entry` in module_path(file, env_var) returns, or an ErrorCode::kUnsupported error
// that names `what`, where it looked and how to build it.
Expected<const void*> open_module(const char* file, const char* env_var, const char* entry, const std::string& what);

// One module, loaded once per process. Table has `static constexpr int kAbi` and `int abi` first.
template <class Table>
class ModuleSlot {
 public:
  ModuleSlot(const char* file, const char* env_var, const char* entry, const char* what)
      : file_(file), env_var_(env_var), entry_(entry), what_(what) {}

  // The table; an error prefixed with what needed it ("--search rl: ...").
  Expected<const Table*> get(const std::string& needed_for) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!table_ && !failed_) {
      auto t = open_module(file_, env_var_, entry_, what_);
      if (!t) failed_ = t.error();
      else if (static_cast<const Table*>(*t)->abi != Table::kAbi)
        failed_ = Error::unsupported(what_ + " (" + file_ + ") was built from other rlflow sources than this binary");
      else table_ = static_cast<const Table*>(*t);
    }
    if (table_) return table_;
    return failed_->with_context(needed_for);
  }
  // Whether get() can be tried: a table was handed over, or the module's file exists (nothing is
  // loaded; a file that exists may still fail to load, and get() says why).
  bool present() {
    std::lock_guard<std::mutex> lock(mutex_);
    return table_ || module_file_exists(file_, env_var_);
  }
  // Why get() would fail for want of the file (present() is false).
  std::string not_built() const { return module_not_built(file_, env_var_, what_); }
  void use(const Table* table) {
    std::lock_guard<std::mutex> lock(mutex_);
    table_ = table;
    failed_.reset();
  }

 private:
  const char* file_;
  const char* env_var_;
  const char* entry_;
  std::string what_;
  std::mutex mutex_;
  const Table* table_ = nullptr;
  std::optional<Error> failed_;  // a load was tried and failed: not retried
};

}  // namespace rlflow
