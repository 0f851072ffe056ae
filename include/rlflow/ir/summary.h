#pragma once
#include <map>
#include <string>
#include <vector>

#include "rlflow/ir/graph.h"

namespace rlflow::ir {

// Multiply-accumulates count as two FLOPs; elementwise ops one per output element.
double node_flops(const Graph& g, NodeId id);

struct GraphSummary {
  std::map<std::string, int64_t> op_counts;  // by op name; opaque ops by their ONNX type
  int64_t num_ops = 0;
  int64_t num_parameters = 0;
  double flops = 0;
  std::vector<std::string> opaque_ops;  // distinct ONNX op types kept opaque
};

GraphSummary summarize(const Graph& g);
std::string op_display_name(const Node& n);

}  // namespace rlflow::ir
