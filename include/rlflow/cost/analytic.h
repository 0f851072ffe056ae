#pragma once
// The analytic backend: a roofline per op, max(FLOPs / compute rate, bytes / bandwidth) plus a
// per-kernel overhead, with the rates taken from a device profile (configs/devices/*.yaml).
// It is deterministic and costs microseconds, so tests, CI and `--deterministic` use it.
#include <cstdint>
#include <string>
#include <vector>

#include "rlflow/cost/cost_model.h"

namespace rlflow::cost {

// Which compute rate bounds an op. Convolutions and matrix products (GEMM libraries, tensor
// cores) run at very different rates from vector code; transcendental functions (erf, tanh,
// sigmoid, pow) cost many instructions per element; sliding-window pooling runs its own kernels.
//   kConv: Conv with a spatial window or stride; kMatMul: MatMul, Gemm and pointwise (1x1,
//   stride 1) Conv, which is a GEMM and runs as one; kSpecial: Erf Tanh Sigmoid Pow;
//   kPool: MaxPool AveragePool; kVector: everything else.
enum class ComputeClass : uint8_t { kConv, kMatMul, kVector, kSpecial, kPool };
// Which bandwidth bounds it: streaming ops read and write contiguously; layout ops (transpose,
// concat, slice, pad, gather, cast) move data with strided or indexed access.
enum class MemoryClass : uint8_t { kStream, kLayout };

// The roofline inputs of one op.
struct OpWork {
  double flops = 0;  // ir::node_flops semantics: a multiply-accumulate is 2, elementwise 1 per output
  double bytes = 0;  // bytes read and written by one kernel; a fused activation adds none
  ComputeClass compute = ComputeClass::kVector;
  MemoryClass memory = MemoryClass::kStream;
  bool view = false;  // Reshape/Flatten/Squeeze/Unsqueeze: metadata only, no kernel runs
  bool half = false;  // computes in float16/bfloat16 (its output is half-typed): the profile's half rates apply
};

// Below this head size an onnxruntime profile prices Attention above the eager chain it replaces
// (measured slower there in whole models; AnalyticCostModel::op_cost).
inline constexpr int64_t kOrtAttentionMinHead = 64;

// ir::node_flops computed from a signature instead of a graph node.
double signature_flops(const OpSignature& s);
OpWork op_work(const OpSignature& s);

// A rate as the profile states it: the datasheet peak and the fraction of it that real kernels
// reach. Calibration keeps the peak and fits the efficiency.
struct Throughput {
  double peak = 0;        // GFLOP/s or GB/s
  double efficiency = 1;  // (0, 1] for datasheet peaks; may exceed 1 when the "peak" is a guess
  double effective() const { return peak * efficiency; }
  bool operator==(const Throughput&) const = default;
};

struct DeviceProfile {
  std::string name;         // e.g. "h100"
  std::string device = "cpu";  // "cpu" or "gpu": the kind of machine it models
  std::string description;  // the hardware, precision and threads it assumes
  std::string source;       // where the numbers come from (datasheet, calibration run)
  Throughput conv, matmul, vector, special, pool;  // GFLOP/s
  Throughput stream, layout;        // GB/s
  // Compute rates for float16/bfloat16 ops (half_compute_gflops; optional, all five or none).
  // A zero peak means the profile has none: half ops then run at the float32 rates, as on CPU
  // runtimes, which compute half graphs in float32. Memory rates are shared: half ops move half
  // the bytes through the same bandwidth.
  Throughput half_conv, half_matmul, half_vector, half_special, half_pool;
  std::string half_source;  // where the half rates come from (datasheet or calibration)
  bool has_half_rates() const { return half_conv.peak > 0; }
  double kernel_overhead_us = 0;    // fixed cost of every kernel (launch, dispatch)
  double view_overhead_us = 0;      // cost of a view op (no kernel)
  std::string calibration;          // fit summary, when the profile was written by calibrate
  // The runtime that executes the graph, when it rewrites graphs itself: "onnxruntime" fuses
  // activations and BatchNormalization into convolutions, so those nodes cost nothing under this
  // profile (see runtime_fused_nodes). Empty: every node runs as its own kernel.
  std::string runtime;

  const Throughput& rate(ComputeClass c, bool half = false) const;
  const Throughput& rate(MemoryClass m) const;
  uint64_t hash() const;  // over every number: part of the analytic device fingerprint
  Status validate() const;
  bool operator==(const DeviceProfile&) const = default;
};

// Where device profiles live: $RLFLOW_DEVICES, then ../configs/devices and ../share/rlflow/devices
// next to the binary, then ./configs/devices.
std::string devices_dir();
// A profile by name ("h100" -> <devices_dir>/h100.yaml) or by path (anything with '/' or ".yaml").
Expected<DeviceProfile> load_profile(const std::string& name_or_path);
Expected<DeviceProfile> parse_profile(const std::string& yaml_text, const std::string& label);
// YAML with a comment on every constant; parse_profile reads it back to an equal profile.
std::string profile_yaml(const DeviceProfile& p);
Status write_profile(const DeviceProfile& p, const std::string& path);  // atomic (temp + rename)

class AnalyticCostModel : public CostModel {
 public:
  explicit AnalyticCostModel(DeviceProfile profile);
  Expected<double> op_cost(const OpSignature& sig) override;
  std::string device_fingerprint() const override;
  std::string name() const override { return "analytic"; }

  std::vector<bool> runtime_fused(const ir::Graph& g, const std::vector<bool>& constant) const override;
  // onnxruntime's ConvActivationFusion takes every activation the IR fuses into a Conv.
  bool fuses_conv_activation(ir::Activation) const override { return profile_.runtime == "onnxruntime"; }
  std::string known_error() const override {
    return profile_.calibration.empty() ? "profile '" + profile_.name + "' is not calibrated: " + profile_.source : profile_.calibration;
  }

  double cost_ms(const OpWork& w) const;
  const DeviceProfile& profile() const { return profile_; }

 private:
  DeviceProfile profile_;
};

}  // namespace rlflow::cost
