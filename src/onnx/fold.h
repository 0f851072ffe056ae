#pragma once
// Folding of ONNX nodes whose inputs are all known constants, at the ONNX level, before the
// graph is converted to the IR: this resolves shape chains (Shape -> Gather -> Concat -> Reshape)
// into the constant parameters the IR needs. Data movement is done on raw bytes, arithmetic in
// int64 or double, so no value is rounded through a wider or narrower type.
#include "onnx_lib.h"

#include <optional>
#include <vector>

#include "rlflow/ir/tensor.h"
#include "rlflow/util/expected.h"

namespace rlflow::onnxio {

// Largest tensor (elements) a fold may produce; larger results stay in the graph.
inline constexpr int64_t kMaxFoldElements = int64_t{1} << 24;

// Outputs of `node` computed from `inputs` (nullptr marks an absent optional input), or nullopt
// when the op is not one this folder handles. `input_types` gives the static type of every input,
// constant or not, so Shape can fold on a non-constant tensor.
Expected<std::optional<std::vector<ir::TensorPtr>>> fold_node(const onnx::NodeProto& node,
                                                             const std::vector<ir::TensorPtr>& inputs,
                                                             const std::vector<std::optional<ir::TensorType>>& input_types,
                                                             int64_t opset);

}  // namespace rlflow::onnxio
