#include "rlflow/cost/device.h"

namespace rlflow::cost {

DeviceInfo probe_devices() {
  DeviceInfo d;
  d.note = "built without CUDA";
  return d;
}

}  // namespace rlflow::cost
