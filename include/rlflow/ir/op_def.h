#pragma once
// An op's record: what a plain op's row (OpInfo in ir/op.h) and its parameter struct cannot say by
// themselves. The row gives the ONNX name, domain and first opset, the form and the cost class; the
// struct's `describe` gives the ONNX attributes with their defaults; the record gives the inputs
// and outputs, the shape function, the FLOPs and the forms of the op the IR models. Import, export,
// shape inference, the executor (the ONNX op table's kernel for the op's type), params_str, the
// rule fields, the summary and the cost's work all derive from these three (docs/extending.md).
//
// A record is one file per op family in src/ir/ops/ (found by folder), defining a `const OpDef`
// that its row in src/ir/op.cpp points at.
#include <vector>

#include "rlflow/ir/dtype.h"
#include "rlflow/ir/op.h"
#include "rlflow/util/expected.h"

namespace rlflow::ir {

struct OpDef {
  // ONNX input slots: the first min_inputs are required and up to max_inputs may be given, the
  // optional ones trailing (a node with an absent optional input before a present one stays opaque).
  int min_inputs = 1, max_inputs = 1;
  int outputs = 1;  // ONNX output slots, all of them IR outputs
  // The last opset of the op's domain whose form the record models; 0: every one from the row's
  // `since` on. A node of a model at a later opset stays opaque.
  int until = 0;
  // The output types from the parameters and the input types (already checked against
  // min_inputs..max_inputs); null: the row's form decides (elementwise unary: the input's type).
  Expected<std::vector<TensorType>> (*infer)(const OpParams&, const std::vector<TensorType>&) = nullptr;
  // FLOPs of one run; null: one per element of the first output.
  double (*flops)(const OpParams&, const std::vector<TensorType>& in, const std::vector<TensorType>& out) = nullptr;
  // Whether the IR models this form of the op (an attribute value its kernel or shape function does
  // not handle: the importer keeps the node opaque, with the reason in the log); null: every form.
  Status (*models)(const OpParams&) = nullptr;
  // Bytes one run reads and writes; null: every input and output once (cost/work.cpp).
  double (*bytes)(const std::vector<TensorType>& in, const std::vector<TensorType>& out) = nullptr;
  // Below the row's `since`, the exporter writes the op as a chain of older ops (a case of its own
  // in onnx/export.cpp); false: the op cannot be written there.
  bool lowered_below_since = false;
};

// The input slots a plain op takes: its record's, else its form's (unary 1, binary 2).
struct Arity {
  int min = 1, max = 1;
};
Arity plain_arity(OpKind k);

}  // namespace rlflow::ir
