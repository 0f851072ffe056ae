#pragma once
#include <map>
#include <string>
#include <vector>

#include "rlflow/ir/graph.h"

namespace rlflow::ir {

// Multiply-accumulates count as two FLOPs; elementwise ops one per output element. Reads only
// the op's kind, parameters and types, so cost models use it on op signatures too; a malformed
// op (missing inputs) counts no FLOPs rather than failing.
double op_flops(OpKind kind, const OpParams& params, const std::vector<TensorType>& inputs,
                const std::vector<TensorType>& outputs);
double node_flops(const Graph& g, NodeId id);

struct GraphSummary {
  std::map<std::string, int64_t> op_counts;  // ONNX op types as exported (a fused activation counts as its own op)
  int64_t num_ops = 0;
  int64_t num_parameters = 0;
  double flops = 0;
  std::vector<std::string> opaque_ops;  // distinct ONNX op types kept opaque
};

GraphSummary summarize(const Graph& g);

// What one run of the graph holds in memory at its peak, with each value freed after its last use
// (as exec::Executor does): the weights, the inputs, and the activations alive at once. Computed
// from the types alone, in doubles, so a declared [4000000, 3, 224, 224] input is estimated, not
// allocated (and cannot overflow).
struct MemoryEstimate {
  double peak_bytes = 0;
  double weight_bytes = 0;
  std::string largest;         // the largest tensor's name ("input 'x'", "output of Conv 'c1' (#3)")
  double largest_bytes = 0;
};
MemoryEstimate estimate_run_memory(const Graph& g);
std::string op_display_name(const Node& n);

}  // namespace rlflow::ir
