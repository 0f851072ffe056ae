#pragma once
// Targets: where a written model will run. One record per target, in one registry: the runtime
// that runs the file, the device, the cost model that prices it, the opsets and fused ops that
// runtime runs, the fusions it performs by itself, and how (or whether) rlflow can measure it
// here. The CLI's values and help, `rlflow targets`, the cost a command builds and the output
// opset all come from these records.
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "rlflow/util/expected.h"

namespace rlflow::ir {
class Graph;
}

namespace rlflow::pipeline {

struct TargetRecord {
  std::string name;         // the --target value
  std::string runtime;      // what runs the written file
  std::string device;       // what it runs on
  std::string cost_model;   // the cost kind that prices a graph for it (cost::CostOptions::kind)
  std::string bench;        // the `rlflow bench` runner that measures it here
  int64_t max_opset = 0;    // the newest default-domain opset the runtime runs
  std::string opset_source; // where that figure comes from
  // The fused ONNX ops rlflow writes that this runtime runs, each with the opset it needs.
  std::vector<std::pair<std::string, int64_t>> fused_ops;
  // Fusions the runtime performs by itself on the file it loads (priced by its cost model, so a
  // rewrite that does the same earns nothing there).
  std::vector<std::string> runtime_fusions;
  // Fusions (ir::fusion_names) whose op this runtime was measured running slower than the chain at
  // some sizes: where one fires, optimise also offers the file with every other fusion but that one
  // (priced, and measured first-come like every candidate where the target is measurable).
  std::vector<std::string> doubtful_fusions{};  // {}: aggregate initialisers may leave it out
};

// Every target, in the order `rlflow targets` lists them.
const std::vector<TargetRecord>& targets();
// The record named `name`; a usage error listing the names otherwise.
Expected<const TargetRecord*> find_target(const std::string& name);
// The names, for the CLI's validation and help.
std::vector<std::string> target_names();

// Whether the target's runner can measure here, and why not when it cannot.
struct Measurability {
  bool measurable = false;
  std::string why_not;
};
Measurability measurability(const TargetRecord& t);

// The output opset: --opset auto (kOpsetAuto) is the newest the target's runtime runs that is at
// least the input's and that can carry every op rlflow keeps verbatim (the newest such, counting
// down from the runtime's); --opset keep (kOpsetKeep) the input's; N is N. `why` says which and why.
constexpr int64_t kOpsetAuto = -1;
constexpr int64_t kOpsetKeep = 0;
struct OpsetChoice {
  int64_t opset = 0;
  std::string why;
};
// `fusions`, when given, are the fusions the run may make (the disabled ones left out): under auto a
// newer opset is chosen only when one of them fuses a chain there that it cannot fuse at the input's
// (a CNN with nothing to fuse keeps its opset); null: the newest, whatever fuses.
Expected<OpsetChoice> choose_output_opset(const ir::Graph& g, const TargetRecord& t, int64_t requested,
                                          const std::set<std::string>* fusions = nullptr);
// "auto", "keep" or a number, as --opset takes it.
Expected<int64_t> parse_opset(const std::string& text);

}  // namespace rlflow::pipeline
