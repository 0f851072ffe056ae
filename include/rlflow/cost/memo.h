#pragma once
// Graph cost with an in-memory memo per op signature, so a search or an RL environment pays for
// each distinct op once whatever backend sits underneath. Not thread-safe: one per thread.
#include <unordered_map>

#include "rlflow/cost/cost_model.h"

namespace rlflow::cost {

class MemoCost {
 public:
  explicit MemoCost(CostModel& m) : model_(m) {}
  // cost::node_costs with a memo per signature: the same accounting and the same checks.
  Expected<double> cost(const ir::Graph& g);
  // Per-node costs in node order (0 for inputs, weights and folded nodes), and their sum.
  Expected<double> node_costs(const ir::Graph& g, std::vector<double>& per_node);
  size_t memo_size() const { return memo_.size(); }

 private:
  CostModel& model_;
  std::unordered_map<uint64_t, double> memo_;
};

}  // namespace rlflow::cost
