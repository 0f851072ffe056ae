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

// True when this build has the CUDA backend: configured with CUDA and cuDNN, and its module
// (librlflow_cudnn.so beside the binary, or $RLFLOW_CUDNN_MODULE) built or handed over. The module is
// loaded only when a cost model or a runner is made.
bool cudnn_backend_compiled();
// Why it is not (empty when it is): a build without CUDA/cuDNN, or the module not built.
std::string cudnn_backend_absent();

namespace gpu {
struct CudnnModule;
}
// Programs that link the CUDA code (rlflow_cost_cuda) hand its table (gpu::cudnn_module_table()) over
// instead of loading the module.
void use_cudnn_module(const gpu::CudnnModule* module);

// Fails with a clear message when the backend was not compiled in or no GPU is usable.
Expected<std::unique_ptr<CostModel>> make_cudnn_cost_model(const GpuOptions& opts = {});

}  // namespace rlflow::cost
