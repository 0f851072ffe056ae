#pragma once
// TensorProto <-> ir::Tensor, attribute access and file I/O shared by import and export.
#include "onnx_lib.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "rlflow/ir/attributes.h"
#include "rlflow/ir/tensor.h"
#include "rlflow/util/expected.h"
#include "rlflow/util/file_io.h"

namespace rlflow::onnxio {

Expected<ir::DType> dtype_from_onnx(int32_t t, const std::string& what);
int32_t dtype_to_onnx(ir::DType t);

// Reads raw_data, typed fields or external data (relative to base_dir).
Expected<ir::TensorPtr> tensor_from_proto(const onnx::TensorProto& t, const std::string& base_dir);
// Same, but moves raw_data out of `t` instead of copying it (t is left without data).
Expected<ir::TensorPtr> take_tensor_from_proto(onnx::TensorProto* t, const std::string& base_dir);
void tensor_to_proto(const ir::Tensor& t, const std::string& name, onnx::TensorProto* out);

const onnx::AttributeProto* find_attr(const onnx::NodeProto& n, const std::string& name);
int64_t attr_int(const onnx::NodeProto& n, const std::string& name, int64_t dflt);
double attr_float(const onnx::NodeProto& n, const std::string& name, double dflt);
std::string attr_string(const onnx::NodeProto& n, const std::string& name, const std::string& dflt);
std::optional<std::vector<int64_t>> attr_ints(const onnx::NodeProto& n, const std::string& name);
// Every attribute the executor may read, parsed once (tensor attributes read relative to base_dir).
Expected<ir::AttributesPtr> attributes_from_proto(const onnx::NodeProto& n, const std::string& base_dir);


}  // namespace rlflow::onnxio
