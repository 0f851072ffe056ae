#pragma once
// Internal to search: the drivers make_optimizer (search.cpp) builds, one per file.
#include <memory>

#include "rlflow/search/optimizer.h"

namespace rlflow::search::detail {

// greedy.cpp
std::unique_ptr<Optimizer> make_greedy(const std::vector<const rules::Rule*>& rules, cost::CostModel& model);
// taso.cpp: TASO's cost-based backtracking with `alpha`, or, breadth first, the exhaustive search.
std::unique_ptr<Optimizer> make_taso(const std::vector<const rules::Rule*>& rules, cost::CostModel& model, double alpha,
                                     bool breadth_first);

}  // namespace rlflow::search::detail
