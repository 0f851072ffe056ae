#pragma once
#include <string>
#include <vector>

namespace rlflow::cost {

// What the program can use at run time. The binary never requires a GPU: without one (or
// without a CUDA build) the answer is simply "no devices".
struct DeviceInfo {
  bool cuda_compiled = false;
  int device_count = 0;
  std::vector<std::string> names;
  std::string note;  // why no device is usable, when none is
};

DeviceInfo probe_devices();

}  // namespace rlflow::cost
