// `rlflow cost` end to end: the real binary on the small test models.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cost/common.h"

using json = nlohmann::json;
using rlflow::cost::testing::TempDir;

namespace {

const std::string kData = RLFLOW_TEST_DATA;

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct Result {
  int code = -1;
  std::string out, err;
};

// `cwd`: the working directory of the run (empty: this process's).
Result rlflow(const std::vector<std::string>& args, const std::string& cwd = "") {
  TempDir io;
  std::string cmd = cwd.empty() ? quote(RLFLOW_BINARY) : "cd " + quote(cwd) + " && " + quote(RLFLOW_BINARY);
  for (const auto& a : args) cmd += " " + quote(a);
  cmd += " >" + quote(io.file("stdout")) + " 2>" + quote(io.file("stderr")) + " </dev/null";
  const int st = std::system(cmd.c_str());
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, slurp(io.file("stdout")), slurp(io.file("stderr"))};
}

json parse(const Result& r) {
  try {
    return json::parse(r.out);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not one JSON document: " << e.what() << "\n" << r.out << "\nstderr: " << r.err;
    return json::object();
  }
}

TEST(CostCli, DeterministicTableJsonAndOpaqueRows) {
  auto a = rlflow({"cost", kData + "/tiny_cnn.onnx", "--deterministic", "--json"});
  ASSERT_EQ(a.code, 0) << a.err;
  auto j = parse(a);
  EXPECT_EQ(j["cost_model"]["kind"], "analytic");
  double sum = 0;
  for (const auto& op : j["ops"]) sum += op["ms"].get<double>();
  EXPECT_GT(j["total_ms"].get<double>(), 0);
  EXPECT_NEAR(sum, j["total_ms"].get<double>(), 1e-12);
  EXPECT_TRUE(j["cache"].is_null());  // analytic is not cached

  auto text = rlflow({"cost", kData + "/opaque_op.onnx", "--cost-model", "analytic", "--device-profile", "h100"});
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("Softplus"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("fixed, cancels in comparisons"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("2 opaque ops"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("analytic/h100/"), std::string::npos) << text.out;
}

TEST(CostCli, CpuBackendCachesAndMeasuresTheGraph) {
  TempDir dir;
  const auto cache = dir.file("cache.json");
  const std::vector<std::string> args = {"cost", kData + "/tiny_residual.onnx", "--cost-model", "cpu", "--cache", cache,
                                         "--repeats", "3", "--warmup", "1", "--json"};
  auto first = rlflow(args);
  ASSERT_EQ(first.code, 0) << first.err;
  auto f = parse(first);
  EXPECT_GT(f["cache"]["misses"].get<int>(), 0);
  auto second_args = args;
  second_args.push_back("--measure-graph");
  auto second = rlflow(second_args);
  ASSERT_EQ(second.code, 0) << second.err;
  auto s = parse(second);
  EXPECT_EQ(s["cache"]["misses"], 0);
  EXPECT_EQ(s["total_ms"], f["total_ms"]);
  EXPECT_GT(s["measure"]["measured_ms"].get<double>(), 0);
  EXPECT_GT(s["measure"]["ratio"].get<double>(), 0);
}

TEST(CostCli, UsageErrors) {
  auto none = rlflow({"cost"});
  EXPECT_EQ(none.code, 2) << none.err;
  auto calib = rlflow({"cost", "calibrate", "--cost-model", "analytic"});
  EXPECT_EQ(calib.code, 2) << calib.err;
  auto unknown = rlflow({"cost", kData + "/tiny_cnn.onnx", "--cost-model", "ort-measurd"});
  EXPECT_EQ(unknown.code, 2) << unknown.err;
  // A --profile that is not YAML (here a model) is refused before anything is timed or written.
  const std::string model = kData + "/tiny_cnn.onnx";
  const auto before = std::filesystem::file_size(model);
  auto onto_model = rlflow({"cost", "calibrate", "--cost-model", "cpu", "--profile", model});
  EXPECT_EQ(onto_model.code, 2) << onto_model.err;
  EXPECT_NE(onto_model.err.find("YAML"), std::string::npos) << onto_model.err;
  EXPECT_EQ(std::filesystem::file_size(model), before);
}

// `ort` is the analytic onnxruntime profile in every command; calibrate cannot time it, and says
// which name measures onnxruntime instead (until 2026-11-25 calibrate read `ort` as that).
TEST(CostCli, CalibrateRefusesTheAnalyticOrtAndNamesOrtMeasured) {
  auto r = rlflow({"cost", "calibrate", "--cost-model", "ort", "--json"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--cost-model ort-measured"), std::string::npos) << r.err;
  auto j = parse(r);
  EXPECT_EQ(j["ok"], false);
  EXPECT_NE(j["error"].dump().find("ort-measured"), std::string::npos) << r.out;
  for (const char* k : {"recorded", "analytic"}) {
    auto other = rlflow({"cost", "calibrate", "--cost-model", k});
    EXPECT_EQ(other.code, 2) << other.err;
    EXPECT_NE(other.err.find("measuring backend"), std::string::npos) << other.err;
  }
}

// The binary registers ort-measured before it declares its flags: every command that names a
// cost model lists it, and `ort` keeps meaning the analytic profile.
TEST(CostCli, EveryCostModelFlagKnowsOrtMeasured) {
  for (const std::vector<std::string>& cmd : std::vector<std::vector<std::string>>{
           {"cost", "--help"}, {"cost", "calibrate", "--help"}, {"optimise", "--help"}, {"train-agent", "--help"},
           {"train-world-model", "--help"}}) {
    auto r = rlflow(cmd);
    EXPECT_EQ(r.code, 0) << cmd[0] << r.err;
    EXPECT_NE(r.out.find("ort-measured"), std::string::npos) << cmd[0] << " " << cmd[1] << ":\n" << r.out;
  }
  auto ort = rlflow({"cost", kData + "/tiny_cnn.onnx", "--cost-model", "ort", "--json"});
  ASSERT_EQ(ort.code, 0) << ort.err;
  EXPECT_EQ(parse(ort)["cost_model"]["name"], "analytic");
}

// ort-measured through the one factory, from a working directory outside the source tree (the
// onnxruntime helper is shipped data, found next to the binary or in its source tree).
TEST(CostCli, OrtMeasuredTimesEachOpInOnnxruntimeFromAnyDirectory) {
  TempDir elsewhere;
  const std::string cwd = elsewhere.file("");
  auto r = rlflow({"cost", kData + "/tiny_cnn.onnx", "--cost-model", "ort-measured", "--warmup", "0", "--repeats", "1", "--json"}, cwd);
  if (r.code != 0 && r.err.find("onnxruntime is not usable") != std::string::npos) GTEST_SKIP() << r.err;
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = parse(r);
  EXPECT_EQ(j["cost_model"]["name"], "ort-measured");
  EXPECT_EQ(j["cost_model"]["fingerprint"].get<std::string>().rfind("ort/onnxruntime", 0), 0u) << j["cost_model"];
  EXPECT_GE(j["total_ms"].get<double>(), 0);
  EXPECT_TRUE(j["cache"].is_null());  // not cached: the fingerprint does not name the CPU
  // The whole-graph check runs the file where the cost model says it runs: in onnxruntime.
  auto whole = rlflow({"cost", kData + "/tiny_cnn.onnx", "--cost-model", "ort", "--measure-graph", "--json"}, cwd);
  ASSERT_EQ(whole.code, 0) << whole.err;
  auto w = parse(whole);
  EXPECT_NE(w["measure"]["method"].get<std::string>().find("onnxruntime"), std::string::npos) << w["measure"];
  EXPECT_GT(w["measure"]["measured_ms"].get<double>(), 0);
  // --deterministic: a measuring backend gives way to the analytic model, ort-measured too.
  auto d = rlflow({"cost", kData + "/tiny_cnn.onnx", "--cost-model", "ort-measured", "--deterministic", "--json"});
  ASSERT_EQ(d.code, 0) << d.err;
  EXPECT_EQ(parse(d)["cost_model"]["name"], "analytic");
}

}  // namespace
