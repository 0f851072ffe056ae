#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "rlflow/exec/executor.h"

namespace rlflow::exec {

// Seeded inputs for every graph input: floats ~ N(0, 1); integer inputs uniform in [0, 2).
std::vector<ir::TensorPtr> random_inputs(const ir::Graph& g, uint64_t seed);

struct CompareOptions {
  uint64_t seed = 0;
  int trials = 1;  // independent input draws
  double atol = 1e-4;
  double rtol = 1e-3;
  ir::DType compute = ir::DType::kFloat32;
  // Outputs stored in a half type are compared at their own precision: atol and rtol widen to
  // half_ulps machine epsilons of that type (float16 2^-10, bfloat16 2^-7), atol relative to the
  // largest reference magnitude of the output. Two half computations that round at different
  // points (a folded BatchNorm, a fused bias) differ by a few ulps per layer.
  double half_ulps = 16;
};

// Machine epsilon of a float dtype (the gap between 1 and the next value); 0 for other dtypes.
double dtype_epsilon(ir::DType t);

struct OutputDiff {
  std::string name;
  double max_abs_diff = 0;
  double max_ref_abs = 0;
  bool ok = true;
  double atol = 0, rtol = 0;  // the tolerance this output was compared with
};

struct Comparison {
  bool ok = true;
  double max_abs_diff = 0;
  std::vector<OutputDiff> outputs;
  std::string message;  // why it failed, naming the output
};

// The (atol, rtol) to compare against `ref` with: as given for float32 and wider types, widened
// to half_ulps epsilons of the dtype for float16/bfloat16 (see CompareOptions::half_ulps).
struct Tolerance {
  double atol, rtol;
};
Tolerance output_tolerance(const ir::Tensor& ref, double atol, double rtol, double half_ulps = 16);

// A tolerance must be finite and non-negative: with NaN, `diff > atol + rtol*|b|` is never true and
// every difference would pass. A usage error naming `what` (e.g. "--atol") otherwise.
Status check_tolerance(double value, const std::string& what);

// Element-wise |a - b| <= atol + rtol * |b|, for tensors of equal type. Invalid tolerances (see
// check_tolerance) fail every comparison.
OutputDiff diff_tensors(const ir::Tensor& a, const ir::Tensor& b, double atol, double rtol);

// Runs both graphs on the same seeded inputs and compares their outputs position by position.
// Invalid tolerances are an error, never a pass.
Expected<Comparison> compare_graphs(const ir::Graph& reference, const ir::Graph& candidate, const CompareOptions& opts);

}  // namespace rlflow::exec
