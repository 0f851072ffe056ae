// The commands' shared first step: models, rules, cost (include/rlflow/pipeline/setup.h).
#include "rlflow/pipeline/setup.h"

#include "rlflow/exec/executor.h"
#include "rlflow/ir/composites.h"
#include "rlflow/onnx/model_io.h"
#include "rlflow/pipeline/load.h"
#include "rlflow/pipeline/target.h"
#include "rlflow/rules/library_io.h"

namespace rlflow::pipeline {

Expected<Setup> setup(const SetupOptions& o) {
  Setup out;
  const TargetRecord* target = nullptr;
  if (!o.target.empty()) {
    auto t = find_target(o.target);
    if (!t) return t.error();
    target = *t;
  }
  if (o.search_opset && !target) return Error::internal("setup: search_opset needs a target");

  if (!o.models.empty()) {
    exec::Executor ex;  // folds constants while importing
    for (const auto& path : o.models) {
      auto graph = load_model(path, o.input_shapes, ex);
      if (!graph) return graph.error();
      if (o.search_opset) {
        // The graphs `optimise` searches: at the same --opset, with the composite chains that opset
        // fuses already fused. Under auto, as in optimise, the target's newer opset only where a
        // fusion fires there and not at the model's own; a model with nothing to fuse keeps its own.
        static const ir::FusionSet kEveryFusion;  // none disabled
        auto opset = choose_output_opset(*graph, *target, *o.search_opset, &kEveryFusion);
        if (!opset) return opset.error();
        RLFLOW_TRY_STATUS(onnxio::set_output_opset(&*graph, opset->opset));
        out.models.push_back({path, ir::recognise_composites(*graph)});
      } else {
        out.models.push_back({path, std::move(*graph)});
      }
    }
  }

  if (o.load_rules) {
    out.rules_path = o.rules_file.empty() ? rules::default_library_path() : o.rules_file;
    auto lib = rules::load_library(out.rules_path);
    if (!lib) return lib.error();
    out.library = std::move(*lib);
    out.rules = select_rules(out.library, o.all_rules);
    if (out.rules.empty() && !o.rules_needed_for.empty())
      return Error::bad_input(out.rules_path + ": no verified rules to " + o.rules_needed_for);
  }

  if (o.build_cost) {
    // One meaning of --deterministic everywhere (cost::resolve_kind): a measuring backend gives way
    // to the analytic model; recorded and ort are deterministic already and stay.
    cost::CostOptions co = o.cost;
    if (co.kind == "auto" && target) co.kind = target->cost_model;  // the cost optimise --target uses
    auto kind = cost::resolve_kind(co);
    if (!kind) return kind.error();
    out.cost_kind = *kind;
    auto model = cost::make_cost_model(co);
    if (!model) return model.error();
    out.cost = std::move(*model);
  }
  return out;
}

}  // namespace rlflow::pipeline
