#pragma once
// Fits an analytic device profile to measured op timings: `rlflow cost calibrate`.
#include <string>
#include <vector>

#include "rlflow/cost/analytic.h"
#include "rlflow/cost/cost_model.h"

namespace rlflow::cost {

struct CalibrationSample {
  std::string label;  // e.g. "Conv 3x3 64->64 56x56"
  OpSignature sig;
  OpWork work;
  double measured_ms = 0;
  double fitted_ms = 0;  // the fitted profile's estimate
  double base_ms = 0;    // the starting profile's estimate
};

struct CalibrationResult {
  DeviceProfile profile;  // the base profile with fitted efficiencies and overheads
  std::vector<CalibrationSample> samples;
  double median_rel_error = 0, max_rel_error = 0;            // |fitted - measured| / measured
  double base_median_rel_error = 0, base_max_rel_error = 0;  // the same for the starting profile
  int iterations = 0;
};

// Representative ops of the model zoo (CNN convolutions, transformer GEMMs, elementwise, norms,
// pooling, layout ops); `batch` scales the CNN ops (1 for a CPU, 8 for a GPU).
Expected<std::vector<std::pair<std::string, OpSignature>>> calibration_ops(int batch);

// Least squares on the roofline terms: each sample is assigned to its bound (compute or memory)
// under the current constants, the constants are re-fitted to minimise the squared relative
// error given that assignment, and the two steps repeat until the assignment is stable.
// Peaks stay as in `base`; efficiencies and overheads are fitted.
CalibrationResult fit_profile(const DeviceProfile& base, std::vector<CalibrationSample> samples);

// Times calibration_ops(batch) with `model` and fits `base` to the result.
Expected<CalibrationResult> calibrate(CostModel& model, const DeviceProfile& base, int batch, const CostProgress& progress = {});

}  // namespace rlflow::cost
