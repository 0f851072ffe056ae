// The target registry (see target.h).
#include "rlflow/pipeline/target.h"

#include <charconv>

#include "rlflow/cost/cudnn_backend.h"
#include "rlflow/cost/device.h"
#include "rlflow/ir/composites.h"
#include "rlflow/ir/graph.h"
#include "rlflow/onnx/model_io.h"

namespace rlflow::pipeline {

namespace {

// The fused ops recognise_composites writes, with the opset each needs (ir/composites.h).
std::vector<std::pair<std::string, int64_t>> every_fused_op() {
  std::vector<std::pair<std::string, int64_t>> out;
  for (const auto& f : ir::fusions()) out.emplace_back(f.onnx_op, f.since_opset);
  return out;
}

// rlflow's GPU runner (bench --target gpu) executes every op its reference executor runs, through
// cuDNN and cuBLAS where they have a kernel; the recorded cost prices the same graph.
constexpr const char* kRunnerOpsets =
    "rlflow's runner executes every op of the linked onnx (1.19.1) that its reference executor runs, the fused ops of "
    "opset 23 included; opset 23 is the newest the recorded H100 timings price";

// What the runner fuses by itself when it loads a file (cost::cudnn_runner_graph), as onnxruntime's
// CUDA provider, TensorRT and cuDNN's runtime fusion engine all do.
constexpr const char* kRunnerFusion =
    "Conv + bias + Relu, the Relu the Conv's only reader (cudnnConvolutionBiasActivationForward)";

}  // namespace

const std::vector<TargetRecord>& targets() {
  static const std::vector<TargetRecord> all = {
      {"ort", "onnxruntime 1.32 (CPU execution provider, ORT_ENABLE_ALL)", "this machine's CPU", "ort", "ort", 23,
       "onnxruntime >= 1.24.1 runs opset 23 with RMSNormalization, RotaryEmbedding and Attention (1.22 refuses IR 11, "
       "1.23.0 computes GQA Attention wrongly); measured with 1.32.0 (docs/measured.md, scripts/bench/measure_fused_ops)",
       every_fused_op(),
       {"Conv + BatchNormalization, + per-channel Add/Mul, + Relu/Clip/Sigmoid/Tanh/HardSigmoid (Conv and Gemm)",
        "bias Add + Gelu (BiasGelu)", "residual Add + LayerNorm (SkipLayerNormalization)",
        "scalar Mul/Div into MatMul (FusedMatMul)", "the RMSNorm chain (SimplifiedLayerNormalization)",
        "Casts to the type their input has (CastElimination)"},
       // The CPU Attention kernel measured slower than the eager chain at small head sizes (8 and 16:
       // HF gpt2/bert/llama small, 0.88-0.95x whole-model), while the RMSNorm and rotary fusions pay.
       {"attention"}},
      {"h100", "rlflow's cuDNN/cuBLAS graph runner (bench --target gpu: one captured CUDA graph)", "NVIDIA H100 80GB (sm90)",
       "recorded", "cudnn", 23, kRunnerOpsets, every_fused_op(), {kRunnerFusion}},
      {"gpu", "rlflow's cuDNN/cuBLAS graph runner (bench --target gpu: one captured CUDA graph)",
       "this machine's GPU (kernels timed on it)", "cudnn", "cudnn", 23, kRunnerOpsets, every_fused_op(), {kRunnerFusion}},
  };
  return all;
}

std::vector<std::string> target_names() {
  std::vector<std::string> out;
  for (const auto& t : targets()) out.push_back(t.name);
  return out;
}

Expected<const TargetRecord*> find_target(const std::string& name) {
  for (const auto& t : targets())
    if (t.name == name) return &t;
  std::string names;
  for (const auto& t : targets()) names += (names.empty() ? "" : ", ") + t.name;
  return Error{ErrorCode::kUsage, "unknown target '" + name + "' (expected one of " + names + "; `rlflow targets` lists them)"};
}

Measurability measurability(const TargetRecord& t) {
  if (t.bench == "ort") return {true, ""};  // onnxruntime's own start decides, when it runs
  if (!cost::cudnn_backend_compiled()) return {false, cost::cudnn_backend_absent()};
  const bool gpu = cost::probe_devices().device_count > 0;
  if (t.name == "h100") {
    bool h100 = false;
    if (gpu)
      for (const auto& n : cost::probe_devices().names) h100 = h100 || n.find("H100") != std::string::npos;
    return {h100, h100 ? "" : "no H100 in this machine"};
  }
  return {gpu, gpu ? "" : "no usable GPU in this machine"};
}

Expected<int64_t> parse_opset(const std::string& text) {
  if (text == "auto") return kOpsetAuto;
  if (text == "keep") return kOpsetKeep;
  int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || v <= 0)
    return Error{ErrorCode::kUsage, "must be auto, keep or a positive opset number, not '" + text + "'"};
  return v;
}

Expected<OpsetChoice> choose_output_opset(const ir::Graph& g, const TargetRecord& t, int64_t requested,
                                          const std::set<std::string>* fusions) {
  const int64_t input = g.meta().opset("");
  const std::string runtime = t.runtime.substr(0, t.runtime.find(" ("));
  if (requested == kOpsetKeep) return OpsetChoice{input, "the input's (--opset keep)"};
  if (requested > 0) return OpsetChoice{requested, "--opset " + std::to_string(requested)};
  if (input >= t.max_opset)
    return OpsetChoice{input, "the input's, at least the newest " + runtime + " runs (" + std::to_string(t.max_opset) + ")"};
  // The newest opset the runtime runs that carries every op kept verbatim: counting down.
  std::string blocked;
  for (int64_t v = t.max_opset; v > input; --v) {
    auto st = onnxio::check_output_opset(g, v);
    if (st.ok()) {
      if (fusions) {
        // Only a fused op needs the newer opset: without one the file would change its version alone.
        ir::CompositeStats there, here;
        ir::recognise_composites(g, &there, v, *fusions);
        ir::recognise_composites(g, &here, input, *fusions);
        if (there.total() - there.count("noop_cast") <= here.total() - here.count("noop_cast"))
          return OpsetChoice{input, "the input's: no chain fuses at a newer opset than the input's (--opset auto; up to " +
                                        std::to_string(v) + " would change the version alone)"};
      }
      std::string why = "the newest " + runtime + " runs (--opset auto)";
      if (!blocked.empty()) why = "the newest that carries every op kept verbatim (" + blocked + ")";
      return OpsetChoice{v, why};
    }
    if (blocked.empty()) blocked = st.error().message;
  }
  return OpsetChoice{input, "the input's: no newer opset carries every op kept verbatim (" + blocked + ")"};
}

}  // namespace rlflow::pipeline
