#pragma once
// TensorProto <-> ir::Tensor, attribute access and file I/O shared by import and export.
#include <onnx/onnx_pb.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "rlflow/ir/tensor.h"
#include "rlflow/util/expected.h"

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

Expected<std::string> read_file(const std::string& path);
// Writes via a temporary file in the same directory and rename(2), so readers never see a
// partial file and a failed write leaves any previous file intact. `write` fills the open file
// descriptor; `check`, if given, inspects the complete temporary file before it is moved into
// place, and an error from it discards the file.
Status write_file_atomic(const std::string& path, const std::function<bool(int fd)>& write,
                         const std::function<Status(const std::string& tmp_path)>& check = {});
Status write_file_atomic(const std::string& path, const std::string& bytes);

}  // namespace rlflow::onnxio
