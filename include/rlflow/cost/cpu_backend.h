#pragma once
// The cpu backend: each op runs alone through the reference executor's libtorch (ATen) kernels.
// With one thread (the default) it is timed by the thread's CPU time, so other processes sharing
// the machine do not inflate costs; with several, by wall time. This header does not include torch.
#include <cstdint>
#include <memory>
#include <string>

#include "rlflow/cost/cost_model.h"

namespace rlflow::cost {

struct CpuOptions {
  int threads = 1;   // torch intra-op threads while timing (one, like the rest of rlflow)
  // 3 untimed runs absorb first-touch page faults, allocator growth and oneDNN primitive
  // creation; 10 timed runs give a stable median for ops from microseconds to ~100 ms.
  int warmup = 3;
  int repeats = 10;
  // A slow op (a big convolution on one thread) stops after this many seconds of timed runs,
  // keeping at least 3 runs, so whole models stay measurable in minutes.
  double max_seconds_per_op = 1.0;
  uint64_t seed = 0;  // input data; timing does not depend on values (no NaNs are generated)
};

std::unique_ptr<CostModel> make_cpu_cost_model(const CpuOptions& opts = {});

// "model name" from /proc/cpuinfo and the number of online CPUs, e.g. "Intel(R) Xeon(R) x2".
std::string cpu_description();
// The BLAS libblas.so.3 resolves to (Debian alternatives): part of the cpu fingerprint.
std::string blas_library();

}  // namespace rlflow::cost
