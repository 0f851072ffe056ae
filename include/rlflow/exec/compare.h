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
};

struct OutputDiff {
  std::string name;
  double max_abs_diff = 0;
  double max_ref_abs = 0;
  bool ok = true;
};

struct Comparison {
  bool ok = true;
  double max_abs_diff = 0;
  std::vector<OutputDiff> outputs;
  std::string message;  // why it failed, naming the output
};

// Element-wise |a - b| <= atol + rtol * |b|, for tensors of equal type.
OutputDiff diff_tensors(const ir::Tensor& a, const ir::Tensor& b, double atol, double rtol);

// Runs both graphs on the same seeded inputs and compares their outputs position by position.
Expected<Comparison> compare_graphs(const ir::Graph& reference, const ir::Graph& candidate, const CompareOptions& opts);

}  // namespace rlflow::exec
