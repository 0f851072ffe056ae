#pragma once
#include <string>
#include <vector>

#include "rlflow/rules/match.h"

namespace rlflow::rules {

// Builds the concrete source graph of a rule for one instance (random weights from `seed`).
Expected<ir::Graph> instantiate_source(const Rule& r, const Instance& inst, uint64_t seed);

struct InstanceResult {
  bool ok = false;
  double max_abs_diff = 0;
  std::string message;
};

struct RuleCheck {
  std::string rule;
  bool ok = false;
  std::vector<InstanceResult> instances;
  std::string message;
};

// Numeric verification: for every instance, build the source graph, find the rule's match with
// the real matcher, apply it, and compare both graphs with the reference executor in float64 on
// `trials` random inputs. Tolerance is relative to the output's magnitude: 1e-6, because the
// constants a rewrite folds (a BatchNorm into a kernel, say) are float32, rounded at 6e-8 relative
// per operation; a wrong rule differs at order 1 (an epsilon misplaced: about 1e-5).
RuleCheck verify_numerically(const Rule& r, int trials = 2, double rtol = 1e-6);

}  // namespace rlflow::rules
