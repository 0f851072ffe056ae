#pragma once
// Shared by the CLI suites: runs the real rlflow binary with its output captured, private temporary
// folders, and tiny models written with the ONNX library.
#include <gtest/gtest.h>

#include "onnx/onnx_lib.h"
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace rlflow_cli_test {

namespace fs = std::filesystem;
using json = nlohmann::json;

inline const fs::path kData = RLFLOW_TEST_DATA;

// Searches without --cost-model measure ops on the CPU: keep their cache out of the user's home.
inline const bool kPrivateCostCache = [] {
  setenv("RLFLOW_COST_CACHE", (fs::temp_directory_path() / "rlflow_cli_test_cost_cache.json").c_str(), 1);
  return true;
}();

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "rlflow_cli_test_XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(path_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  fs::path path_;
};

inline std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

struct Result {
  int code = -1;
  std::string out, err;
  std::vector<std::string> err_lines() const {
    std::vector<std::string> lines;
    std::istringstream ss(err);
    for (std::string l; std::getline(ss, l);) lines.push_back(l);
    return lines;
  }
};

// Runs `rlflow ARGS...` with stdout and stderr captured to files in a private directory.
inline Result rlflow(const std::vector<std::string>& args) {
  TempDir io;
  std::string cmd = quote(RLFLOW_BINARY);
  for (const auto& a : args) cmd += " " + quote(a);
  cmd += " >" + quote((io / "stdout").string()) + " 2>" + quote((io / "stderr").string()) + " </dev/null";
  const int st = std::system(cmd.c_str());
  Result r;
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.out = slurp(io / "stdout");
  r.err = slurp(io / "stderr");
  return r;
}

// The error contract: exactly one stderr line "rlflow: error: ...".
inline void expect_one_error_line(const Result& r, const std::string& must_contain = {}) {
  auto lines = r.err_lines();
  ASSERT_EQ(lines.size(), 1u) << "stderr:\n" << r.err;
  EXPECT_EQ(lines[0].rfind("rlflow: error:", 0), 0u) << lines[0];
  if (!must_contain.empty()) EXPECT_NE(lines[0].find(must_contain), std::string::npos) << lines[0];
}

inline json parse_json(const std::string& s) {
  try {
    return json::parse(s);  // rejects trailing content: exactly one document
  } catch (const std::exception& e) {
    ADD_FAILURE() << "stdout is not one JSON document: " << e.what() << "\n" << s;
    return json();
  }
}

// Writes a serialized TensorProto (the ONNX backend test data format).
inline void write_tensor(const fs::path& p, const std::vector<int64_t>& dims, const std::vector<float>& v) {
  onnx::TensorProto t;
  t.set_data_type(onnx::TensorProto::FLOAT);
  for (auto d : dims) t.add_dims(d);
  for (float x : v) t.add_float_data(x);
  std::ofstream(p, std::ios::binary) << t.SerializeAsString();
}

// y = Relu(x) for x: float[1, 4]; its output is known without running anything.
inline void write_relu_model(const fs::path& p) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("cli_test");
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name("relu");
  for (auto [vi, name] : {std::pair{g->add_input(), "x"}, std::pair{g->add_output(), "y"}}) {
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    tt->mutable_shape()->add_dim()->set_dim_value(1);
    tt->mutable_shape()->add_dim()->set_dim_value(4);
  }
  auto* n = g->add_node();
  n->set_op_type("Relu");
  n->set_name("relu");
  n->add_input("x");
  n->add_output("y");
  std::ofstream(p, std::ios::binary) << m.SerializeAsString();
}

inline std::vector<fs::path> malformed_corpus() {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(kData / "malformed"))
    if (e.path().extension() == ".onnx") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace rlflow_cli_test
