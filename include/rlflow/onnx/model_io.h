#pragma once
// ONNX ModelProto <-> ir::Graph. This header is free of protobuf and ONNX headers.
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "rlflow/ir/evaluator.h"
#include "rlflow/ir/graph.h"

namespace rlflow::onnxio {

struct ImportOptions {
  // Overrides for graph input shapes (static-shape specialisation), by input name.
  std::map<std::string, ir::Shape> input_shapes;
  // Shapes by position among the (non-initializer) graph inputs, for inputs not named above.
  std::vector<ir::Shape> positional_input_shapes;
  // Values that replace graph inputs, by position (nullptr leaves that input an input). Binding
  // an input makes it a constant, so parameters fed through inputs (shapes, axes) can be read.
  std::vector<ir::TensorPtr> positional_constants;
  // Folds weight-only subgraphs into weights after conversion; nullptr keeps them.
  const ir::Evaluator* evaluator = nullptr;
  // Sizes for symbolic input dimensions, by dim_param name (or "input:axis" for an unnamed one).
  // A dimension not named here takes a representative size: 1 on axis 0 (the batch), else
  // kDefaultDynamicSize (a sequence length). The graph is specialised to these sizes; the symbolic
  // dims are kept in its meta for export, and nothing that depends on them is folded.
  std::map<std::string, int64_t> dim_values;
  // Symbols specialised for good (`--fix batch=1`): every input and output dim named so becomes
  // static at that size in the graph and in the written file; the other symbols stay symbolic.
  std::map<std::string, int64_t> fixed_dims;
  // Refuse input_shapes that change a static dim (optimise: the written file would declare the new
  // size); info, cost and bench may look at a static model at other sizes.
  bool keep_static_dims = false;
  // Weights equal (type and bytes) to a weight of this graph are shared with it rather than held
  // twice: re-importing a written model to verify it then costs one weight at a time, not a second
  // copy of every weight.
  const ir::Graph* share_weights_with = nullptr;
};

inline constexpr int64_t kDefaultDynamicSize = 128;

struct ImportStats {
  int onnx_nodes = 0;
  int folded_nodes = 0;   // ONNX nodes resolved to constants (shape chains, Constant)
  int removed_nodes = 0;  // Identity and inference-mode Dropout
  int opaque_nodes = 0;
  std::map<std::string, int64_t> dynamic_dims;  // each symbolic input dimension and the size it was given
  std::set<std::string> fixed_found;  // the names of ImportOptions::fixed_dims that some input dimension uses
  // Symbols the model needs longer than the default representative size (a conv or pool stack
  // over raw audio), each at the smallest size found to import: pipeline::load_model fills it.
  std::map<std::string, int64_t> min_dims;
  // A file of a newer IR version than the linked onnx library knows that uses nothing newer (onnx
  // 1.23's make_model writes IR 14 for any opset): its IR version, read as the newest known one.
  int64_t ir_version_read_as_known = 0;
};

// `label` names the source in error messages (normally the file path).
Expected<ir::Graph> import_model(const std::string& bytes, const std::string& label, const std::string& base_dir,
                                 const ImportOptions& opts, ImportStats* stats = nullptr);
Expected<ir::Graph> import_model_file(const std::string& path, const ImportOptions& opts, ImportStats* stats = nullptr);

struct ExportOptions {
  const ir::Evaluator* evaluator = nullptr;  // folds weight-only subgraphs; nullptr skips folding
  bool check = true;                         // run onnx::checker (full) on the result
  // Above this many bytes of initializers the weights go to "<file>.data" (protobuf's 2 GB limit).
  int64_t external_data_threshold = int64_t{1800} << 20;
  // A dynamic model: the same graph built at other bindings of its symbols (node for node, each
  // imported at those sizes and rewritten the same way). Shape operands are then written so that
  // they hold at every binding instead of at the representative sizes alone.
  std::vector<const ir::Graph*> bindings;
};

// Serialises the graph; `external` receives the external data file name ("" if none).
struct ExportedModel {
  std::string model_bytes;
  std::string external_data;  // bytes of the side file, empty if weights are inline
  std::string external_name;
};
Expected<ExportedModel> export_model(const ir::Graph& g, const ExportOptions& opts, const std::string& path_hint);

// The static check that no written constant depends on the sizes: `g` and `at_other` (the same
// graph built at another binding, node for node) are both written, each with the other among its
// `opts.bindings`, and every node whose attributes or constant inputs differ between the two is
// named ("Reshape 'r1' reads r1_shape"). Large float weights are compared by header only. An error
// says the two cannot be written node for node (the rewrites do not hold at both).
Expected<std::vector<std::string>> size_dependent_constants(const ir::Graph& g, const ir::Graph& at_other, const ExportOptions& opts);

// Writes atomically (temporary file + rename); refuses to overwrite `protect` (the input file).
// `check_written` runs on the complete temporary file (e.g. re-import and verify exactly the bytes
// that will land); if it fails, nothing is written.
Status write_model_file(const ir::Graph& g, const std::string& path, const ExportOptions& opts,
                        const std::string& protect = {},
                        const std::function<Status(const std::string& tmp_path)>& check_written = {});

// The files a model is made of: `path` itself and each external-data file its tensors name (as
// paths relative to the model's folder resolved against it), so an output can be checked against
// all of them before any work. A file that cannot be parsed yields just `path`.
std::vector<std::string> model_files(const std::string& path);

// Makes `g` write itself at default-domain opset `to` (at least its own, at most what the linked
// onnx knows). Ops rlflow models are written in `to`'s form by the exporter; an op kept verbatim
// (opaque) must have the same schema version at both opsets, or an unsupported error names it. The
// IR version rises to what `to` needs.
Status set_output_opset(ir::Graph* g, int64_t to);
// Whether set_output_opset(g, to) would succeed, without changing g.
Status check_output_opset(const ir::Graph& g, int64_t to);

// A serialized TensorProto file (the ONNX backend test data format).
Expected<ir::TensorPtr> read_tensor_file(const std::string& path);

}  // namespace rlflow::onnxio
