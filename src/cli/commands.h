#pragma once
// Internal to the CLI: one function per subcommand, each returning an exit code.
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rlflow/ir/graph.h"
#include "rlflow/util/expected.h"

namespace rlflow::cli {

struct GlobalOptions {
  bool json = false;
};

struct InfoOptions {
  std::string model;
  std::vector<std::string> input_shapes;
};

struct OptimiseOptions {
  std::string model, output;
  std::string search = "none";
  std::vector<std::string> input_shapes;
  bool verify = true;
  uint64_t seed = 0;
  double atol = 1e-4, rtol = 1e-3;
};

struct RunOptions {
  std::string model, data_dir;
  double atol = 1e-5, rtol = 1e-3;
};

struct RulesOptions {
  std::string file;  // empty: the shipped library
  bool summary = false;
  std::vector<std::string> only;  // rule names
  bool write = false;             // verify: record statuses in the file
  std::vector<std::string> models;  // bench
  int applications = 1000;          // bench: random-chain applications per model
  int repeats = 5;                  // bench: timing repetitions
  int chain = 50;                   // bench: applications per chain before its result is run
  uint64_t seed = 0;
};

int cmd_info(const GlobalOptions& g, const InfoOptions& o);
int cmd_rules_list(const GlobalOptions& g, const RulesOptions& o);
int cmd_rules_verify(const GlobalOptions& g, const RulesOptions& o);
int cmd_rules_bench(const GlobalOptions& g, const RulesOptions& o);
int cmd_optimise(const GlobalOptions& g, const OptimiseOptions& o);
int cmd_run(const GlobalOptions& g, const RunOptions& o);
std::string version_string();

// "name:1,3,224,224" -> {name, shape}; several allowed.
Expected<std::map<std::string, ir::Shape>> parse_input_shapes(const std::vector<std::string>& specs);

// Turns an error into its exit code, one stderr line, and (with --json) a JSON document.
int report_error(const GlobalOptions& g, const Error& e);
int exit_code_for(ErrorCode c);

}  // namespace rlflow::cli
