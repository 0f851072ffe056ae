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

// One axis of an ONNX Slice, resolved against the axis' extent `dim` the way onnxruntime resolves it:
// negative starts/ends count from the end; a start is clamped to [0, dim] ([0, dim-1] for a negative
// step); an end of INT32_MAX or INT64_MAX means "to the end" in either direction (-1, before element
// 0, for a negative step), any other end is clamped to [0, dim] ([-1, dim] for a negative step); a
// zero-size axis gives nothing. `len` is the number of elements taken; step must not be 0.
struct SliceBounds {
  int64_t start = 0, end = 0, len = 0;
};
SliceBounds onnx_slice_bounds(int64_t start, int64_t end, int64_t step, int64_t dim);

// Number of outputs an op kind produces given its parameters.
int num_outputs(OpKind kind, const OpParams& params);

}  // namespace rlflow::ir
