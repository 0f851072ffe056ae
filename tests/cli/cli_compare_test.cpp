// `rlflow compare` end to end: the peer tools and rlflow on a small KV-cache decoder, each file
// checked against the input in onnxruntime at every binding and the right ones timed. A peer that
// perturbs a weight must be marked wrong and not timed; one that is missing, fails or hangs is
// recorded and the comparison goes on.
#include <cstdlib>

#include "common.h"

namespace rlflow_cli_test {
namespace {

void write_script(const fs::path& p, const std::string& body) {
  std::ofstream f(p);
  f << body;
}

const json* tool(const json& report, const std::string& name) {
  for (const auto& t : report["tools"])
    if (t["name"] == name) return &t;
  ADD_FAILURE() << "no tool " << name << " in " << report["tools"];
  return nullptr;
}

bool in_ci() {
  const char* ci = std::getenv("CI");
  return ci && std::string(ci) == "true";
}

TEST(CompareCli, MarksAWrongPeerWrongAndTimesTheRightOnesAtPrefillAndDecode) {
  TempDir dir;
  // A "peer" that adds 0.5 to the first float weight: a wrong file, which must not be timed as a win.
  write_script(dir / "perturb.py", R"(import sys, onnx, numpy as np
from onnx import numpy_helper
m = onnx.load(sys.argv[1])
for t in m.graph.initializer:
    a = numpy_helper.to_array(t)
    if a.dtype == np.float32 and a.size > 1:
        t.CopyFrom(numpy_helper.from_array(a + np.float32(0.5), t.name))
        break
onnx.save(m, sys.argv[2])
)");
  write_script(dir / "fails.py", "import sys\nsys.exit('this pipeline gives up')\n");
  write_script(dir / "hangs.py", "import time\ntime.sleep(60)\n");
  const std::string perturb = "script:" + (dir / "perturb.py").string(), fails = "script:" + (dir / "fails.py").string(),
                    hangs = "script:" + (dir / "hangs.py").string(), missing = "script:" + (dir / "absent.py").string();
  auto r = rlflow({"compare", (kData / "kv_cache_decoder.onnx").string(), "--peers",
                   "onnxslim,onnxsim," + perturb + "," + fails + "," + hangs + "," + missing, "--timeout", "5", "--rounds", "10",
                   "--max-seconds", "10", "--keep", (dir / "files").string(), "--report", (dir / "page.html").string(), "--json"});
  if (r.code != 0 && r.err.find("onnxruntime is not usable") != std::string::npos && !in_ci()) GTEST_SKIP() << r.err;
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = parse_json(r.out);
  ASSERT_TRUE(j.is_object());

  // Checked at every binding of the decoder's dims; timed at prefill and at a decode step.
  EXPECT_GE(j["checked_at"].size(), 4u) << j["checked_at"];
  ASSERT_EQ(j["timed"].size(), 2u) << j["timed"];
  EXPECT_EQ(j["timed"][0]["label"], "prefill");
  EXPECT_EQ(j["timed"][1]["label"], "decode step");
  EXPECT_NE(j["runner"].get<std::string>().find("thread CPU time"), std::string::npos) << j["runner"];

  const json* wrong = tool(j, perturb);
  ASSERT_TRUE(wrong);
  EXPECT_EQ((*wrong)["status"], "wrong") << *wrong;
  EXPECT_NE((*wrong)["error"].get<std::string>().find("differ"), std::string::npos) << *wrong;
  EXPECT_TRUE((*wrong)["timings"].empty()) << *wrong;
  EXPECT_EQ((*tool(j, fails))["status"], "failed");
  EXPECT_NE((*tool(j, fails))["error"].get<std::string>().find("this pipeline gives up"), std::string::npos) << *tool(j, fails);
  EXPECT_EQ((*tool(j, hangs))["status"], "timed out");
  EXPECT_EQ((*tool(j, missing))["status"], "not installed");

  // onnxslim and onnxsim are pinned in requirements.txt, installed by the full setup CI runs.
  for (const std::string peer : {"onnxslim", "onnxsim"}) {
    const json* t = tool(j, peer);
    ASSERT_TRUE(t);
    if ((*t)["status"] == "not installed" && !in_ci()) continue;
    EXPECT_EQ((*t)["status"], "ok") << *t;
    EXPECT_TRUE((*t)["version"].is_string()) << *t;
    ASSERT_EQ((*t)["timings"].size(), 2u) << *t;
    for (const auto& tm : (*t)["timings"]) {
      EXPECT_GT(tm["median_ms"].get<double>(), 0);
      EXPECT_LE(tm["speedup_ci"][0].get<double>(), tm["speedup"].get<double>());
      EXPECT_GE(tm["speedup_ci"][1].get<double>(), tm["speedup"].get<double>());
    }
    EXPECT_TRUE(fs::exists(fs::path((*t)["path"].get<std::string>()))) << *t;
  }
  const json* ours = tool(j, "rlflow");
  ASSERT_TRUE(ours);
  EXPECT_EQ((*ours)["status"], "ok") << *ours;
  EXPECT_EQ((*ours)["timings"].size(), 2u);
  for (const auto& c : (*ours)["checks"]) EXPECT_TRUE(c["match"].get<bool>()) << c;
  // rlflow against the fastest right peer, never against the wrong one.
  ASSERT_EQ(j["rlflow_vs_fastest_peer"].size(), 2u);
  for (const auto& v : j["rlflow_vs_fastest_peer"])
    if (v["peer"].is_string()) EXPECT_TRUE(v["peer"] == "onnxslim" || v["peer"] == "onnxsim") << v;

  // The page: rlflow's report with the comparison as a section, the wrong peer shown as wrong.
  const std::string page = slurp(dir / "page.html");
  EXPECT_NE(page.find("id=\"comparison\""), std::string::npos);
  EXPECT_NE(page.find("id=\"comparison-plot\""), std::string::npos);
  EXPECT_NE(page.find("<span class=\"bad\">wrong</span>"), std::string::npos);
}

TEST(CompareCli, TheTextTableNamesEveryToolAndAnUnknownPeerIsAUsageError) {
  auto bad = rlflow({"compare", (kData / "tiny_cnn.onnx").string(), "--peers", "onnxslim,onnxzip"});
  EXPECT_EQ(bad.code, 2) << bad.err;
  expect_one_error_line(bad, "no peer tool named 'onnxzip'");

  TempDir dir;
  write_script(dir / "same.py", "import shutil, sys\nshutil.copyfile(sys.argv[1], sys.argv[2])\n");
  // Without --keep the files go to a temporary folder under $TMPDIR, removed at the end.
  const char* old_tmp = std::getenv("TMPDIR");
  const std::string saved = old_tmp ? old_tmp : "";
  setenv("TMPDIR", dir.path().c_str(), 1);
  auto r = rlflow({"compare", (kData / "tiny_cnn.onnx").string(), "--peers", "script:" + (dir / "same.py").string(), "--rounds", "10",
                   "--max-seconds", "5"});
  if (old_tmp) setenv("TMPDIR", saved.c_str(), 1);
  else unsetenv("TMPDIR");
  if (r.code != 0 && r.err.find("onnxruntime is not usable") != std::string::npos && !in_ci()) GTEST_SKIP() << r.err;
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("(input)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("same.py"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rlflow "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rlflow over the fastest right peer at representative"), std::string::npos) << r.out;
  for (const auto& e : dir.entries())  // (a Python package the peers import leaves a .ses file there)
    EXPECT_TRUE(e == "same.py" || e[0] == '.') << e << ": the files are temporary without --keep";
}

}  // namespace
}  // namespace rlflow_cli_test
