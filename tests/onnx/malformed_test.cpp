#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "rlflow/exec/executor.h"
#include "rlflow/onnx/model_io.h"

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
