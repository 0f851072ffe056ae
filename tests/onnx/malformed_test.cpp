#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "rlflow/exec/executor.h"
#include "rlflow/onnx/model_io.h"

#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <fstream>

using namespace rlflow;
namespace fs = std::filesystem;

namespace {

const fs::path kMalformed = fs::path(RLFLOW_TEST_DATA) / "malformed";

std::vector<fs::path> corpus() {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(kMalformed))
    if (e.path().extension() == ".onnx") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

Error import_error(const std::string& path) {
  exec::Executor ex;
  onnxio::ImportOptions opts;
  opts.evaluator = &ex;
  auto r = onnxio::import_model_file(path, opts);
  EXPECT_FALSE(r.ok()) << path << " was accepted";
  return r.ok() ? Error{} : r.error();
}

}  // namespace

TEST(Malformed, CorpusIsPresent) {
  // The README lists 13 files; a missing one would silently shrink the other tests.
  EXPECT_EQ(corpus().size(), 13u);
}

TEST(Malformed, EveryFileIsRejectedWithACleanError) {
  for (const auto& f : corpus()) {
    SCOPED_TRACE(f.filename().string());
    const Error e = import_error(f.string());
    EXPECT_TRUE(e.code == ErrorCode::kBadInput || e.code == ErrorCode::kUnsupported)
        << "code " << static_cast<int>(e.code) << ": " << e.message;
    EXPECT_NE(e.message.find(f.string()), std::string::npos) << "message does not name the file: " << e.message;
    EXPECT_EQ(e.message.find('\n'), std::string::npos) << "message spans several lines: " << e.message;
  }
}

TEST(Malformed, MessagesNameTheProblem) {
  const std::map<std::string, std::vector<std::string>> expect = {
      {"cycle.onnx", {"cycle"}},
      {"empty.onnx", {"empty"}},
      {"unsupported_dtype.onnx", {"dtype"}},
      {"duplicate_output_name.onnx", {"produced more than once", "'t'"}},
      {"dangling_input.onnx", {"ghost"}},
      {"no_graph.onnx", {"no graph"}},
      {"undefined_graph_output.onnx", {"'y'"}},
      {"raw_data_size_mismatch.onnx", {"'w'", "bytes"}},
      {"huge_dims.onnx", {"'w'"}},
      {"inconsistent_shapes.onnx", {"broadcast"}},
      {"garbage.onnx", {"not an ONNX model"}},
      {"text.onnx", {"not an ONNX model"}},
      {"truncated.onnx", {"not an ONNX model"}},
  };
  for (const auto& [file, needles] : expect) {
    SCOPED_TRACE(file);
    const Error e = import_error((kMalformed / file).string());
    for (const auto& n : needles) EXPECT_NE(e.message.find(n), std::string::npos) << "missing '" << n << "' in: " << e.message;
  }
}

TEST(Malformed, UnsupportedDtypeIsNotAnInternalError) {
  const Error e = import_error((kMalformed / "unsupported_dtype.onnx").string());
  EXPECT_NE(e.code, ErrorCode::kInternal);
}

TEST(Malformed, MissingFile) {
  const std::string path = (fs::temp_directory_path() / "rlflow_no_such_model_9f2c.onnx").string();
  const Error e = import_error(path);
  EXPECT_EQ(e.code, ErrorCode::kBadInput);
  EXPECT_NE(e.message.find(path), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("no such file"), std::string::npos) << e.message;
}

TEST(Malformed, DirectoryInsteadOfFile) {
  const std::string path = kMalformed.string();
  const Error e = import_error(path);
  EXPECT_EQ(e.code, ErrorCode::kBadInput);
  EXPECT_NE(e.message.find(path), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("directory"), std::string::npos) << e.message;
}

TEST(Malformed, InMemoryBytesUseTheLabel) {
  onnxio::ImportOptions opts;
  auto empty = onnxio::import_model("", "my-label", ".", opts);
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.error().message.find("my-label"), std::string::npos);
  auto junk = onnxio::import_model(std::string("\xff\xff\xff\xff", 4), "junk-label", ".", opts);
  ASSERT_FALSE(junk.ok());
  EXPECT_EQ(junk.error().code, ErrorCode::kBadInput);
  EXPECT_NE(junk.error().message.find("junk-label"), std::string::npos);
}

// ---- valid ONNX that rlflow cannot take yet, and hostile external-data fields ----

namespace {

void add_value(onnx::ValueInfoProto* v, const std::string& name, int32_t dtype, std::vector<int64_t> dims) {
  v->set_name(name);
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(dtype);
  for (auto d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
}

onnx::ModelProto one_graph_model() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(13);
  return m;
}

Error import_bytes_error(const onnx::ModelProto& m, const std::string& label, const std::string& base_dir = ".") {
  exec::Executor ex;
  onnxio::ImportOptions opts;
  opts.evaluator = &ex;
  auto r = onnxio::import_model(m.SerializeAsString(), label, base_dir, opts);
  EXPECT_FALSE(r.ok()) << label << " was accepted";
  return r.ok() ? Error{} : r.error();
}

}  // namespace

TEST(Malformed, HalfPrecisionIsACleanUnsupportedError) {
  // Conv + Relu in float16: valid ONNX that onnxruntime runs; rlflow refuses it at import (exit 3)
  // instead of failing inside the executor (it used to exit 5 in ATen's CPU convolution, which has no Half kernel).
  auto m = one_graph_model();
  auto* g = m.mutable_graph();
  add_value(g->add_input(), "x", onnx::TensorProto::FLOAT16, {1, 3, 8, 8});
  add_value(g->add_output(), "y", onnx::TensorProto::FLOAT16, {1, 4, 6, 6});
  auto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT16);
  for (int64_t d : {4, 3, 3, 3}) w->add_dims(d);
  w->set_raw_data(std::string(4 * 3 * 3 * 3 * 2, '\0'));
  auto* conv = g->add_node();
  conv->set_op_type("Conv");
  conv->add_input("x");
  conv->add_input("w");
  conv->add_output("c");
  auto* relu = g->add_node();
  relu->set_op_type("Relu");
  relu->add_input("c");
  relu->add_output("y");
  const Error e = import_bytes_error(m, "half.onnx");
  EXPECT_TRUE(e.code == ErrorCode::kUnsupported || e.code == ErrorCode::kBadInput) << e.message;  // both exit 3
  EXPECT_NE(e.message.find("float16"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("half.onnx"), std::string::npos) << e.message;
  EXPECT_EQ(e.message.find('\n'), std::string::npos) << e.message;
}

TEST(Malformed, ExternalDataFieldsAreParsedWithChecks) {
  const fs::path dir = fs::temp_directory_path() / ("rlflow_extdata_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  { std::ofstream(dir / "w.bin", std::ios::binary) << std::string(64, '\0'); }
  for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"offset", "12abc"}, {"offset", "-8"}, {"length", "99999999999999999999999"}, {"offset", ""}}) {
    SCOPED_TRACE(key + "=" + value);
    auto m = one_graph_model();
    auto* g = m.mutable_graph();
    add_value(g->add_input(), "x", onnx::TensorProto::FLOAT, {4});
    add_value(g->add_output(), "y", onnx::TensorProto::FLOAT, {4});
    auto* w = g->add_initializer();
    w->set_name("w");
    w->set_data_type(onnx::TensorProto::FLOAT);
    w->add_dims(4);
    w->set_data_location(onnx::TensorProto::EXTERNAL);
    auto* loc = w->add_external_data();
    loc->set_key("location");
    loc->set_value("w.bin");
    auto* kv = w->add_external_data();
    kv->set_key(key);
    kv->set_value(value);
    auto* add = g->add_node();
    add->set_op_type("Add");
    add->add_input("x");
    add->add_input("w");
    add->add_output("y");
    const Error e = import_bytes_error(m, "ext.onnx", dir.string());
    EXPECT_EQ(e.code, ErrorCode::kBadInput) << e.message;
    EXPECT_NE(e.message.find(key), std::string::npos) << e.message;
  }
  fs::remove_all(dir);
}

// Inputs scripts/fuzz found crashing the importer (under ASan/UBSan) before they were fixed: each
// must now be a graph or a clean error.
TEST(Malformed, FuzzFindingsImportCleanly) {
  const fs::path dir = kMalformed / "fuzz";
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    SCOPED_TRACE(e.path().filename().string());
    ++n;
    exec::Executor ex;
    onnxio::ImportOptions opts;
    opts.evaluator = &ex;
    auto r = onnxio::import_model_file(e.path().string(), opts);
    if (!r) {
      EXPECT_NE(r.error().code, ErrorCode::kInternal) << r.error().message;
      EXPECT_EQ(r.error().message.find('\n'), std::string::npos) << r.error().message;
    }
  }
  EXPECT_GE(n, 1);
}
