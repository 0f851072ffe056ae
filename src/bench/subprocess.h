#pragma once
// Internal to bench: a child process spoken to in lines over its stdin/stdout (stderr is shared).
#include <sys/types.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "rlflow/util/expected.h"

namespace rlflow::bench {

class LineProcess {
 public:
  // Starts argv[0] (looked up in PATH) with the given arguments.
  static Expected<std::unique_ptr<LineProcess>> start(const std::vector<std::string>& argv);
  ~LineProcess();  // closes its stdin, waits briefly, then kills it
  LineProcess(const LineProcess&) = delete;
  LineProcess& operator=(const LineProcess&) = delete;

  // Sends one line (a newline is appended) and reads one line back.
  Expected<std::string> request(const std::string& line);

 private:
  LineProcess() = default;
  pid_t pid_ = -1;
  FILE* in_ = nullptr;   // the child's stdin
  FILE* out_ = nullptr;  // the child's stdout
  std::string name_;
};

}  // namespace rlflow::bench
