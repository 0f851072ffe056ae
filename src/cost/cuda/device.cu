#include <cuda_runtime.h>

#include "rlflow/cost/device.h"

namespace rlflow::cost {

DeviceInfo probe_devices() {
  DeviceInfo d;
  d.cuda_compiled = true;
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    d.note = cudaGetErrorString(err);
    cudaGetLastError();  // clear the sticky error so later calls start clean
    return d;
  }
  d.device_count = count;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) == cudaSuccess) d.names.emplace_back(prop.name);
  }
  if (count == 0) d.note = "no CUDA device";
  return d;
}

}  // namespace rlflow::cost
