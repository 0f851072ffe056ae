#pragma once
// Internal to search.
#include "rlflow/cost/memo.h"

namespace rlflow::search::detail {

using Coster = cost::MemoCost;

// Rough bytes a graph occupies beyond its shared weights (for the memory cap).
int64_t approx_graph_bytes(const ir::Graph& g);

}  // namespace rlflow::search::detail
