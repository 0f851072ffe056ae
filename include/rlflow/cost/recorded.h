#pragma once
// The recorded backend: replays per-op timings measured on a device (a cost table in the cost
// cache's format, e.g. configs/devices/h100-cost-table.json, 685 H100 cuDNN/cuBLAS timings) and
// prices the ops the table lacks with an analytic profile calibrated on the same device. It is
// deterministic and needs no GPU, so a machine without one can optimise for an H100 on measured
// numbers (tests, CI, RL training).
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "rlflow/cost/analytic.h"
#include "rlflow/cost/cost_model.h"

namespace rlflow::cost {

// configs/devices/h100-cost-table.json (next to the device profiles).
std::string default_cost_table();

// One device's entries of a cost table file: signature hash -> (ms, signature text).
struct CostTable {
  std::string device;  // the fingerprint the timings were recorded under
  std::string known_error;  // the file's own "known_error" note: how its sums compared with whole-graph runs
  struct Entry {
    double ms;
    std::string sig;
  };
  std::unordered_map<uint64_t, Entry> entries;
};
// Reads the entries of `device` (empty: the device with the most entries) from a file in the
// cost cache's format. Malformed entries are skipped; an unreadable file is an error.
Expected<CostTable> read_cost_table(const std::string& path, const std::string& device = {});

struct RecordedStats {
  int64_t hits = 0;    // lookups answered by a recorded timing
  int64_t misses = 0;  // lookups priced by the fallback profile
  size_t entries = 0;
  std::string table, device, fallback;
};

class RecordedCostModel : public CostModel {
 public:
  RecordedCostModel(CostTable table, std::string table_path, DeviceProfile fallback);
  Expected<double> op_cost(const OpSignature& sig) override;
  std::string device_fingerprint() const override;
  std::string name() const override { return "recorded"; }
  std::string known_error() const override;
  // The timings are rlflow's cuDNN runner's, and that runner runs a Conv's only-reader Relu as the
  // Conv's epilogue (cudnn_runner_fused_nodes): priced so, whatever the fallback profile says.
  std::vector<bool> runtime_fused(const ir::Graph& g, const std::vector<bool>& constant) const override {
    return cudnn_runner_fused_nodes(g, constant);
  }
  bool fuses_conv_activation(ir::Activation a) const override { return a == ir::Activation::kRelu; }
  RecordedStats stats() const;
  const DeviceProfile& fallback() const { return fallback_.profile(); }

 private:
  CostTable table_;
  std::string path_;
  AnalyticCostModel fallback_;
  std::atomic<int64_t> hits_{0}, misses_{0};
};

// The recorded layer of a model built by make_cost_model, or nullptr.
RecordedCostModel* as_recorded(CostModel& model);

}  // namespace rlflow::cost
