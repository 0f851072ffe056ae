#pragma once
// Helpers shared by the exec test files.
#include <gtest/gtest.h>

#include "rlflow/exec/compare.h"

namespace rlflow::testing {

// Runs both graphs in the reference executor on the same seeded inputs (two draws) and expects
// every output to agree within the tolerances.
inline void expect_same_numbers(const ir::Graph& a, const ir::Graph& b, double atol, double rtol, uint64_t seed = 0) {
  exec::CompareOptions o;
  o.seed = seed;
  o.trials = 2;
  o.atol = atol;
  o.rtol = rtol;
  auto c = exec::compare_graphs(a, b, o);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_TRUE(c->ok) << c->message;
}

}  // namespace rlflow::testing
