#pragma once
// The cudnn backend: every op runs as a real GPU kernel (cuDNN, cuBLAS, or a small CUDA kernel)
// and is timed with CUDA events. The CUDA code lives in src/cost/cuda; this header and its
// callers do not know whether it was compiled in.
#include <cstddef>
#include <memory>

#include "rlflow/cost/cost_model.h"

namespace rlflow::cost {

struct GpuOptions {
  int device = 0;
  int warmup = 8;     // untimed runs first: lazy module loading, clocks ramping up, caches
  int repeats = 32;   // CUDA-event-timed runs; the median is the cost
  size_t workspace_bytes = size_t{256} << 20;  // the one workspace shared by every cuDNN call
  bool allow_tf32 = true;  // fp32 convolutions and GEMMs may use TF32 tensor cores (as frameworks do)
};

// True when this binary was built with the CUDA backend.
bool cudnn_backend_compiled();

// Fails with a clear message when the backend was not compiled in or no GPU is usable.
Expected<std::unique_ptr<CostModel>> make_cudnn_cost_model(const GpuOptions& opts = {});

}  // namespace rlflow::cost
