#include "rlflow/bench/ort_cost.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "rlflow/bench/stats.h"
#include "rlflow/cost/factory.h"
#include "rlflow/ir/builder.h"
#include "rlflow/ir/composites.h"
#include "rlflow/onnx/model_io.h"
#include "rlflow/util/file_io.h"

namespace rlflow::bench {

namespace fs = std::filesystem;

namespace {

// The opset a one-node model is written at: 17 (LayerNormalization's), or the first opset that has
// the op as one node (Gelu 20; RMSNormalization, RotaryEmbedding, Attention 23), which onnxruntime >= 1.24.1 runs.
int64_t single_op_opset(ir::OpKind k) {
  switch (k) {
    case ir::OpKind::kGelu: return ir::kGeluOpset;
    case ir::OpKind::kRMSNorm: return ir::kRMSNormOpset;
    case ir::OpKind::kAttention: return ir::kAttentionOpset;
    default: return std::max<int64_t>(ir::kLayerNormOpset, ir::op_info(k).since);  // a plain op: from its row
  }
}

}  // namespace

Expected<ir::Graph> single_op_graph(const cost::OpSignature& sig) {
  ir::ModelMeta meta;
  meta.opsets = {{"", single_op_opset(sig.kind)}};
  ir::GraphBuilder b(meta);
  std::vector<ir::ValueRef> ins;
  for (size_t k = 0; k < sig.inputs.size(); ++k) {
    const auto& t = sig.inputs[k];
    const bool constant = k < sig.input_is_constant.size() && sig.input_is_constant[k];
    if (!constant) {
      ins.push_back(b.input("x" + std::to_string(k), t));
    } else if (ir::is_float(t.dtype)) {
      ins.push_back(b.weight("w" + std::to_string(k), ir::random_tensor(t.shape, k + 1, t.dtype)));
    } else {
      std::vector<std::byte> zeros(static_cast<size_t>(t.numel()) * ir::dtype_size(t.dtype));
      ins.push_back(b.weight("w" + std::to_string(k), std::make_shared<const ir::Tensor>(t, std::move(zeros))));
    }
  }
  auto outs = b.try_op(sig.kind, ins, sig.params);
  if (!outs) return outs.error();
  for (size_t k = 0; k < outs->size(); ++k) b.output((*outs)[k], "y" + std::to_string(k));
  return std::move(b).build();
}

namespace {

class OrtCostModel : public cost::CostModel {
 public:
  // `dir` (removed with the model, or by an interrupting signal) holds each op's model while
  // onnxruntime loads it.
  OrtCostModel(OrtCostOptions o, std::unique_ptr<Runner> r, std::unique_ptr<TempPath> dir)
      : opts_(o), runner_(std::move(r)), dir_(std::move(dir)) {}

  Expected<double> op_cost(const cost::OpSignature& sig) override {
    if (sig.kind == ir::OpKind::kOpaque) return cost::kOpaqueCostMs;
    // Each run pays the session call from Python once; inside a whole model it is paid once per
    // run, not per op, so it is measured on an almost empty model and taken off every op.
    if (call_overhead_ms_ < 0) {
      cost::OpSignature tiny;
      tiny.kind = ir::OpKind::kRelu;
      tiny.inputs = tiny.outputs = {{ir::DType::kFloat32, {1}}};
      tiny.input_is_constant = {false};
      call_overhead_ms_ = 0;
      auto t = time_op(tiny);
      if (!t) return t.error();
      call_overhead_ms_ = *t;
    }
    auto ms = time_op(sig);
    if (!ms) return ms.error();
    return std::max(0.0, *ms - call_overhead_ms_);
  }
  std::string device_fingerprint() const override { return "ort/" + runner_->description(); }
  std::string name() const override { return kOrtMeasuredKind; }
  // A Conv with an activation is timed as the two-node model onnxruntime fuses back into one.
  bool fuses_conv_activation(ir::Activation) const override { return true; }

 private:
  Expected<double> time_op(const cost::OpSignature& sig) {
    auto g = single_op_graph(sig);
    if (!g) return g.error().with_context(sig.str());
    const TempPath file((fs::path(dir_->path()) / ("op" + std::to_string(count_++) + ".onnx")).string());
    onnxio::ExportOptions eo;
    eo.check = false;
    if (auto st = onnxio::write_model_file(*g, file.path(), eo); !st.ok()) return st.error().with_context(sig.str());
    auto id = runner_->load({file.path(), *g});  // the session holds the model; the file goes here
    if (!id) return id.error().with_context(sig.str());
    std::vector<double> times;
    for (int i = 0; i < opts_.warmup + opts_.repeats; ++i) {
      auto ms = runner_->run(*id);
      if (!ms) return ms.error();
      if (i >= opts_.warmup) times.push_back(*ms);
    }
    return median(times);
  }

  OrtCostOptions opts_;
  double call_overhead_ms_ = -1;
  std::unique_ptr<Runner> runner_;
  std::unique_ptr<TempPath> dir_;
  int count_ = 0;
};

}  // namespace

Expected<std::unique_ptr<cost::CostModel>> make_ort_cost_model(const OrtCostOptions& o) {
  RunnerOptions ro;
  ro.target = "ort";
  ro.threads = o.threads;
  auto r = make_runner(ro);
  if (!r) return r.error();
  std::error_code ec;
  auto tmp = fs::temp_directory_path(ec);
  auto dir = make_temp_folder(((ec ? fs::path("/tmp") : tmp) / "rlflow-ort-ops-XXXXXX").string());
  if (!dir) return dir.error();
  return std::unique_ptr<cost::CostModel>(std::make_unique<OrtCostModel>(o, std::move(*r), std::move(*dir)));
}

void register_cost_backends() {
  cost::Backend b;
  b.name = kOrtMeasuredKind;
  b.description = "each op timed as a one-node model in onnxruntime on this CPU";
  b.measures = true;
  // Not behind the persistent cache: the fingerprint names onnxruntime, not the CPU under it, so a
  // cache shared between machines would replay another CPU's timings.
  b.make = [](const cost::CostOptions& c) {
    OrtCostOptions o;
    if (c.warmup >= 0) o.warmup = c.warmup;
    if (c.repeats > 0) o.repeats = c.repeats;
    return make_ort_cost_model(o);
  };
  // Only a built-in name or an empty maker is refused, and this is neither.
  (void)cost::register_backend(std::move(b));
}

}  // namespace rlflow::bench
