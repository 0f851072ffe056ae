#pragma once
// One op timed alone through the reference executor's ATen kernels, on random operands: what the
// cpu cost backend measures. It calls the kernel itself (not Executor::run on a one-node graph),
// since run() would also copy the output back into an ir::Tensor, a memcpy the whole-graph executor
// never does for intermediate values. This header does not include torch.
#include <cstdint>
#include <vector>

#include "rlflow/ir/graph.h"

namespace rlflow::exec {

struct OpTimingOptions {
  // torch intra-op threads while timing. With one, each run is timed by the thread's CPU time, so
  // other processes sharing the cores do not inflate it; with several, by wall time.
  int threads = 1;
  int warmup = 3;    // untimed runs first
  int repeats = 10;  // timed runs; the result is their median
  // Timed runs stop after this many seconds, once at least 3 ran.
  double max_seconds = 1.0;
  uint64_t seed = 0;  // the operands' values (float: uniform in [0.5, 1.5); integer, bool: zeros)
};

// A clock in ms for timing a kernel: the calling thread's CPU time when `thread_cpu_time` (a kernel
// on one torch thread runs entirely on it, so other processes sharing the cores do not inflate it),
// wall time otherwise (several threads spread the work over a pool).
double clock_ms(bool thread_cpu_time);

// The median time in ms of `node` (its kind, params and output types; its inputs are not read) on
// operands of `inputs`' types. Half-typed operands are timed as float32, as CPU runtimes compute
// them. A kernel that fails or throws is an error whose message is the first line of its own.
Expected<double> median_op_time_ms(const ir::Node& node, const std::vector<ir::TensorType>& inputs, const OpTimingOptions& o);

}  // namespace rlflow::exec
