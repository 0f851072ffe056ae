#pragma once
// Internal to search: graph cost with an in-memory memo per op signature, so a search pays for
// each distinct op once whatever backend sits underneath.
#include <unordered_map>

#include "rlflow/cost/cost_model.h"

namespace rlflow::search::detail {

class Coster {
 public:
  explicit Coster(cost::CostModel& m) : model_(m) {}
  Expected<double> cost(const ir::Graph& g);
  size_t memo_size() const { return memo_.size(); }

 private:
  cost::CostModel& model_;
  std::unordered_map<uint64_t, double> memo_;
};

// Rough bytes a graph occupies beyond its shared weights (for the memory cap).
int64_t approx_graph_bytes(const ir::Graph& g);

}  // namespace rlflow::search::detail
