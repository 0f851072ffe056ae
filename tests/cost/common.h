#pragma once
// Shared by the cost tests: repository device profiles, temporary folders, small signatures.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>

#include "rlflow/cost/cost_model.h"
#include "rlflow/ir/shape_inference.h"

namespace rlflow::cost::testing {

// Every test process reads profiles from the repository and never touches ~/.cache.
inline const bool kTestEnvironment = [] {
  setenv("RLFLOW_DEVICES", RLFLOW_SOURCE_DIR "/configs/devices", 1);
  setenv("RLFLOW_COST_CACHE", (std::filesystem::temp_directory_path() / "rlflow_cost_test_default_cache.json").c_str(), 1);
  return true;
}();

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "rlflow_cost_test_XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

struct Arg {
  ir::Shape shape;
  bool constant = false;
  ir::DType dtype = ir::DType::kFloat32;
};

// A signature with shape-inferred outputs; fails the test on a bad op.
inline OpSignature sig(ir::OpKind kind, ir::OpParams params, std::vector<Arg> args) {
  OpSignature s;
  s.kind = kind;
  s.params = std::move(params);
  for (auto& a : args) {
    s.inputs.push_back({a.dtype, a.shape});
    s.input_is_constant.push_back(a.constant);
  }
  auto out = ir::infer_types(kind, s.params, s.inputs);
  EXPECT_TRUE(out.ok()) << (out.ok() ? "" : out.error().message);
  if (out.ok()) s.outputs = *out;
  return s;
}

inline ir::ConvParams conv2d(int64_t k, int64_t stride = 1, ir::Activation act = ir::Activation::kNone) {
  ir::ConvParams p;
  p.strides = {stride, stride};
  p.pads = {k / 2, k / 2, k / 2, k / 2};
  p.dilations = {1, 1};
  p.act = act;
  return p;
}

}  // namespace rlflow::cost::testing
