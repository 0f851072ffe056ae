#pragma once
#include <string>
#include <vector>

#include "rlflow/cli/run.h"
#include "rlflow/pipeline/optimise.h"
#include "rlflow/util/expected.h"

namespace rlflow::cli {

// One command run in this process as `rlflow ARGS --json` runs it (for the Python package): its exit
// code and the JSON document it printed; `usage` holds the message when the arguments did not parse.
struct JsonRun {
  int exit_code = kOk;
  std::string json;
  std::string usage;
};
JsonRun run_json(const std::vector<std::string>& args);

// `optimise`'s arguments (the model, -o and the flags, without the word optimise) parsed into the
// pipeline's options exactly as the command line parses them, defaults and checks included. -q and
// -v set the log level.
Expected<pipeline::OptimiseOptions> parse_optimise_args(const std::vector<std::string>& args);

}  // namespace rlflow::cli
