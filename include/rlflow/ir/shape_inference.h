#pragma once
#include <vector>

#include "rlflow/ir/graph.h"

namespace rlflow::ir {

// Output types of an op from its parameters and input types. Opaque nodes cannot be inferred
// here (their types come from ONNX shape inference at import) and yield an error.
Expected<std::vector<TensorType>> infer_types(OpKind kind, const OpParams& params, const std::vector<TensorType>& inputs);

// Broadcast two shapes numpy-style.
Expected<Shape> broadcast_shapes(const Shape& a, const Shape& b);

// Normalises a possibly negative axis against a rank; error if out of range.
Expected<int64_t> normalize_axis(int64_t axis, int64_t rank);

// Number of outputs an op kind produces given its parameters.
int num_outputs(OpKind kind, const OpParams& params);

}  // namespace rlflow::ir
