// Stands in for src/cost/cuda/*.cu in builds without CUDA or cuDNN.
#include "cuda/gpu_api.h"

namespace rlflow::cost::gpu {

Expected<std::unique_ptr<Runtime>> create_runtime(const RuntimeOptions&) {
  return Error::unsupported("the cudnn cost backend is not compiled into this binary (built without CUDA/cuDNN)");
}

}  // namespace rlflow::cost::gpu
