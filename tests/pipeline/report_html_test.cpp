// `optimise --report`: the HTML page drawn from the optimise report's JSON shows every section, labels
// each figure measured or predicted, escapes what the JSON says, fetches nothing, and renders whatever
// fields a report lacks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "rlflow/pipeline/report_html.h"

namespace {

using json = nlohmann::json;
using rlflow::pipeline::report_html;

// The structure of a real `optimise --json` report (tests/data/tiny_attention.onnx on ort), with the
// fusions, per-step costs, per-op costs, latency samples and bindings filled in.
json rich_report() {
  json r = json::parse(R"JSON({
    "ok": true, "model": "tests/data/tiny_attention.onnx", "output": "/tmp/x.onnx", "search": "taso", "target": "ort",
    "target_info": {"name": "ort", "runtime": "onnxruntime 1.32.0 CPU", "device": "x86-64 CPU, 1 thread", "cost_model": "ort"},
    "opset": {"input": 13, "output": 23, "why": "the newest onnxruntime 1.32 runs (--opset auto)"},
    "before": {"ops": 36, "parameters": 2119, "flops": 40208.0, "opaque_ops": [],
               "op_counts": {"Add": 5, "Div": 3, "Erf": 1, "MatMul": 8, "ReduceMean": 2, "Transpose": 4}},
    "after": {"ops": 24, "parameters": 2114, "flops": 39680.0, "opaque_ops": [],
              "op_counts": {"Add": 2, "Div": 1, "Gelu": 1, "LayerNormalization": 1, "MatMul": 8, "Transpose": 2}},
    "composites": {"gelu": 1, "layer_norm": 1, "removed_nodes": 12},
    "fusions": [
      {"fusion": "layer_norm", "node": "LayerNorm_0", "op": "LayerNormalization",
       "replaced": [{"name": "ln/ReduceMean", "op": "ReduceMean"}, {"name": "ln/Sub", "op": "Sub"}, {"name": "ln/Pow", "op": "Pow"}],
       "cost_before_ms": 0.0061, "cost_after_ms": 0.0012},
      {"fusion": "gelu", "node": "Gelu_0", "op": "Gelu", "replaced": [{"name": "mlp/Erf", "op": "Erf"}]}
    ],
    "steps": [
      {"rule": "fuse_matmul_add", "nodes": [3, 4], "replaced": [{"name": "attn/q/MatMul", "op": "MatMul"}, {"name": "attn/q/Add", "op": "Add"}],
       "cost_before_ms": 0.0158, "cost_after_ms": 0.0147},
      {"rule": "transpose_transpose", "nodes": [9, 10], "replaced": [{"name": "t1", "op": "Transpose"}, {"name": "t2", "op": "Transpose"}],
       "cost_before_ms": 0.0147, "cost_after_ms": 0.0133},
      {"rule": "old_style_step", "nodes": [11, 12]}
    ],
    "rules_applied": {"fuse_matmul_add": 1, "transpose_transpose": 1, "old_style_step": 1},
    "cost": {"model": "ort", "profile": "ort-cpu", "predicted": true, "before_ms": 0.01916, "after_ms": 0.01329, "speedup": 1.4413,
             "known_error": "relative error median 10.7%", "describes": "the file written, re-imported",
             "by_op": {"before": {"MatMul": 0.0071, "Add": 0.0019, "ReduceMean": 0.0018},
                       "after": {"MatMul": 0.0064, "Add": 0.0008, "LayerNormalization": 0.0012}}},
    "measured": {"accepted": true, "before_ms": 0.02276, "after_ms": 0.02268, "speedup": 1.012, "speedup_ci": [0.992, 1.064],
                 "ci_coverage": 0.95, "rounds": 6, "min_lower_bound": 0.99, "target": "ort", "decision": "rewritten graph written",
                 "runner": "onnxruntime 1.32.0 CPU (1 thread, wall clock)",
                 "before_samples_ms": [0.0227, 0.0229, 0.0226, 0.0228, 0.0231, 0.0225],
                 "after_samples_ms": [0.0226, 0.0227, 0.0228, 0.0225, 0.0229, 0.0224],
                 "candidates": [{"candidate": "all rewrites", "steps": 3, "predicted_ms": 0.01329, "verdict": "written",
                                 "measured": {"before_ms": 0.02276, "after_ms": 0.02268, "speedup": 1.012, "speedup_ci": [0.992, 1.064],
                                              "ci_coverage": 0.95, "rounds": 6, "accepted": true}}]},
    "verification": {"enabled": true, "method": "reference executor", "ok": true, "max_abs_diff": 3.5762786865234375e-07,
                     "atol": 0.0001, "rtol": 0.001, "seed": 0,
                     "bindings": [{"label": "ones", "sizes": {"batch": 1, "seq": 1}, "checked": true, "max_abs_diff": 1.2e-07},
                                  {"label": "primes", "sizes": {"batch": 3, "seq": 7}, "checked": true, "max_abs_diff": 3.58e-07},
                                  {"label": "decode", "sizes": {"batch": 2, "past": 5}, "checked": false, "note": "no past input"}]},
    "search_report": {"strategy": "taso", "stop_reason": "converged (no rewrite improves the cost)", "expanded": 14, "unique_graphs": 14},
    "time_s": {"import": 0.029, "search": 0.0026, "export": 0.002, "verify": 0.0089, "measure": 0.006, "total": 0.6978}
  })JSON");
  return r;
}

size_t count(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos; at = haystack.find(needle, at + needle.size())) ++n;
  return n;
}

// The text of the element whose id is `id`, up to the first `end` after it.
std::string element(const std::string& html, const std::string& id, const std::string& end) {
  size_t from = html.find("id=\"" + id + "\"");
  if (from == std::string::npos) return "";
  size_t to = html.find(end, from);
  return html.substr(from, to == std::string::npos ? std::string::npos : to - from);
}

TEST(ReportHtml, IsOneCompletePage) {
  std::string html = report_html(rich_report());
  EXPECT_EQ(html.rfind("<!doctype html>", 0), 0u);
  EXPECT_NE(html.find("<meta charset=\"utf-8\">"), std::string::npos);
  EXPECT_NE(html.find("</html>"), std::string::npos);
  for (const char* section : {"id=\"run\"", "id=\"ops\"", "id=\"rewrites\"", "id=\"cost\"", "id=\"latency\"", "id=\"verification\"", "<footer>"})
    EXPECT_NE(html.find(section), std::string::npos) << section;
}

TEST(ReportHtml, HeaderNamesTargetRuntimeDeviceCostModelOpsetAndSearch) {
  std::string run = element(report_html(rich_report()), "run", "</section>");
  ASSERT_FALSE(run.empty());
  for (const char* expected : {"onnxruntime 1.32.0 CPU", "x86-64 CPU, 1 thread", "<b>ort</b>", "profile ort-cpu", "13 &rarr; 23",
                               "the newest onnxruntime 1.32 runs (--opset auto)", "<b>taso</b>", "converged (no rewrite improves the cost)",
                               "rewritten graph written"})
    EXPECT_NE(run.find(expected), std::string::npos) << expected;
}

TEST(ReportHtml, LabelsMeasuredAndPredictedFiguresWithTheirSources) {
  std::string html = report_html(rich_report());
  std::string run = element(html, "run", "</section>");
  // The provenance boxes: what measured (the runner) and what predicted (the cost model).
  EXPECT_NE(run.find("<div class=\"prov m\">"), std::string::npos);
  EXPECT_NE(run.find("on <b>onnxruntime 1.32.0 CPU (1 thread, wall clock)</b>"), std::string::npos);
  EXPECT_NE(run.find("<div class=\"prov p\">"), std::string::npos);
  EXPECT_NE(run.find("predicted by the <b>ort</b> cost model"), std::string::npos);
  EXPECT_NE(run.find("relative error median 10.7%"), std::string::npos);
  // The headline speedups each carry their tag.
  size_t measured_kpi = html.find("Speedup on the target"), predicted_kpi = html.find("Predicted speedup");
  ASSERT_NE(measured_kpi, std::string::npos);
  ASSERT_NE(predicted_kpi, std::string::npos);
  EXPECT_NE(html.substr(measured_kpi, predicted_kpi - measured_kpi).find("class=\"tag m\""), std::string::npos);
  EXPECT_NE(html.substr(predicted_kpi, 600).find("class=\"tag p\""), std::string::npos);
  EXPECT_NE(html.find("1.012&times;"), std::string::npos);
  EXPECT_NE(html.find("1.441&times;"), std::string::npos);
  // Every costed section says predicted; the latency section says measured.
  EXPECT_NE(element(html, "rewrites", "</section>").find("class=\"tag p\""), std::string::npos);
  EXPECT_NE(element(html, "cost", "</section>").find("class=\"tag p\""), std::string::npos);
  EXPECT_NE(element(html, "latency", "</section>").find("class=\"tag m\""), std::string::npos);
}

TEST(ReportHtml, HistogramHasARowPerOpTypeBeforeAndAfter) {
  std::string ops = element(report_html(rich_report()), "ops", "</section>");
  ASSERT_FALSE(ops.empty());
  EXPECT_NE(ops.find("<th scope=\"row\">Erf</th><td class=\"num\">1</td><td class=\"num\">0</td><td class=\"num\">-1</td>"), std::string::npos);
  EXPECT_NE(ops.find("<th scope=\"row\">Gelu</th><td class=\"num\">0</td><td class=\"num\">1</td><td class=\"num\">+1</td>"), std::string::npos);
  EXPECT_NE(ops.find("<th scope=\"row\">MatMul</th><td class=\"num\">8</td><td class=\"num\">8</td><td class=\"num\"></td>"), std::string::npos);
  EXPECT_NE(ops.find("<th scope=\"row\">Add</th><td class=\"num\">5</td><td class=\"num\">2</td>"), std::string::npos);
  // One row per op type in either graph: 6 before, 2 new after.
  EXPECT_EQ(count(ops, "<th scope=\"row\">"), 8u);
  // The largest first.
  EXPECT_LT(ops.find(">MatMul</th>"), ops.find(">Add</th>"));
  std::string chart = element(ops, "op-histogram-chart", "</svg>");
  EXPECT_EQ(count(chart, "<rect class=\"bar before\""), 8u);
  EXPECT_EQ(count(chart, "<rect class=\"bar after\""), 8u);
  EXPECT_NE(ops.find("36 ops &rarr; 24 ops"), std::string::npos);
}

TEST(ReportHtml, FusionRowsShowTheFusedNodeTheReplacedNodesAndThePredictedCostChange) {
  std::string rewrites = element(report_html(rich_report()), "rewrites", "</section>");
  ASSERT_EQ(count(rewrites, "<tr class=\"fusion\">"), 2u);
  size_t ln = rewrites.find("<tr class=\"fusion\">"), gelu = rewrites.find("<tr class=\"fusion\">", ln + 1);
  std::string row = rewrites.substr(ln, gelu - ln);
  for (const char* expected : {"<b>layer_norm</b>", "<code class=\"op\">LayerNormalization</code> <span class=\"node-name\">LayerNorm_0</span>",
                               "<code class=\"op\">ReduceMean</code> <span class=\"node-name\">ln/ReduceMean</span>",
                               "<code class=\"op\">Pow</code> <span class=\"node-name\">ln/Pow</span>", "0.0061&nbsp;ms", "0.0012&nbsp;ms",
                               "-0.0049&nbsp;ms", "-80.3%"})
    EXPECT_NE(row.find(expected), std::string::npos) << expected;
  // A fusion without costs still lists what it replaced.
  std::string second = rewrites.substr(gelu, rewrites.find("</tr>", gelu) - gelu);
  EXPECT_NE(second.find("<span class=\"node-name\">mlp/Erf</span>"), std::string::npos);
  EXPECT_NE(second.find("&mdash;"), std::string::npos);
}

TEST(ReportHtml, StepRowsShowTheRuleTheReplacedNodesAndTheGraphCostChange) {
  std::string rewrites = element(report_html(rich_report()), "rewrites", "</section>");
  ASSERT_EQ(count(rewrites, "<tr class=\"step\">"), 3u);
  size_t first = rewrites.find("<tr class=\"step\">");
  std::string row = rewrites.substr(first, rewrites.find("</tr>", first) - first);
  for (const char* expected : {"<code>fuse_matmul_add</code>", "<code class=\"op\">MatMul</code> <span class=\"node-name\">attn/q/MatMul</span>",
                               "<code class=\"op\">Add</code> <span class=\"node-name\">attn/q/Add</span>", "0.0158&nbsp;ms", "0.0147&nbsp;ms",
                               "-7.0%"})
    EXPECT_NE(row.find(expected), std::string::npos) << expected;
  // A step from an older report (node ids only) still shows which nodes.
  EXPECT_NE(rewrites.find("nodes 11, 12"), std::string::npos);
  // Two of three steps costed: no trajectory drawn from a partial record.
  EXPECT_EQ(rewrites.find("id=\"step-cost-chart\""), std::string::npos);
  json r = rich_report();
  r["steps"].erase(2);
  std::string costed = element(report_html(r), "rewrites", "</section>");
  std::string chart = element(costed, "step-cost-chart", "</svg>");
  ASSERT_FALSE(chart.empty());
  EXPECT_EQ(count(chart, "<circle class=\"point\""), 3u);
  EXPECT_NE(chart.find("<polyline"), std::string::npos);
}

TEST(ReportHtml, CostByOpIsAPairedBarChartWithValuesLabelledPredicted) {
  std::string cost = element(report_html(rich_report()), "cost", "</section>");
  ASSERT_FALSE(cost.empty());
  EXPECT_NE(cost.find("by the <b>ort</b> cost model"), std::string::npos);
  EXPECT_NE(cost.find("0.01916&nbsp;ms &rarr; 0.01329&nbsp;ms"), std::string::npos);
  std::string chart = element(cost, "cost-by-op-chart", "</svg>");
  ASSERT_FALSE(chart.empty());
  EXPECT_EQ(chart.rfind("id=\"cost-by-op-chart\" class=\"chart\" viewBox=", 0), 0u);
  // MatMul, Add, ReduceMean, LayerNormalization: a before and an after bar each, with its value.
  EXPECT_EQ(count(chart, "<rect class=\"bar before\""), 4u);
  EXPECT_EQ(count(chart, "<rect class=\"bar after\""), 4u);
  for (const char* value : {">0.0071 ms</text>", ">0.0064 ms</text>", ">0.0018 ms</text>", ">0.0012 ms</text>", ">0 ms</text>"})
    EXPECT_NE(chart.find(value), std::string::npos) << value;
  EXPECT_NE(chart.find(">before (predicted)</text>"), std::string::npos);
  EXPECT_NE(chart.find(">after (predicted)</text>"), std::string::npos);
  EXPECT_LT(chart.find(">MatMul</text>"), chart.find(">Add</text>"));

  json r = rich_report();
  r["cost"].erase("by_op");
  EXPECT_NE(report_html(r).find("no per-op cost breakdown"), std::string::npos);
  r["cost"] = nullptr;
  EXPECT_NE(element(report_html(r), "cost", "</section>").find("No cost model prediction"), std::string::npos);
}

TEST(ReportHtml, LatencyPlotDrawsEveryRoundWithTheMediansAndTheSpeedupInterval) {
  std::string latency = element(report_html(rich_report()), "latency", "</section>");
  std::string plot = element(latency, "latency-plot", "</svg>");
  ASSERT_FALSE(plot.empty());
  EXPECT_EQ(count(plot, "<circle class=\"dot before\""), 6u);
  EXPECT_EQ(count(plot, "<circle class=\"dot after\""), 6u);
  EXPECT_EQ(count(plot, "<rect class=\"box "), 2u);
  EXPECT_NE(plot.find(">median 0.02276 ms</text>"), std::string::npos);
  EXPECT_NE(plot.find(">median 0.02268 ms</text>"), std::string::npos);
  EXPECT_NE(plot.find("ms (measured)"), std::string::npos);
  EXPECT_NE(latency.find("speedup <b>1.012&times;</b>"), std::string::npos);
  EXPECT_NE(latency.find("95% CI [0.992, 1.064]"), std::string::npos);
  EXPECT_NE(latency.find("<tr class=\"candidate\"><td>all rewrites</td>"), std::string::npos);

  // One very slow round does not squash the axis: it is drawn at the edge and said so.
  json r = rich_report();
  r["measured"]["before_samples_ms"].push_back(0.5);
  latency = element(report_html(r), "latency", "</section>");
  plot = element(latency, "latency-plot", "</svg>");
  EXPECT_EQ(count(plot, "<circle class=\"dot before\""), 6u);
  EXPECT_EQ(count(plot, "<path class=\"dot before\""), 1u);
  EXPECT_NE(latency.find("1 slow round beyond"), std::string::npos);
}

TEST(ReportHtml, NotMeasuredSaysWhyAndThatTheSpeedupIsPredicted) {
  json r = rich_report();
  r.erase("measured");
  r["predicted"] = {{"reason", "the target <cudnn> cannot run on this machine"}, {"cost_model", "ort"}, {"known_error", "median 10.7%"}};
  std::string html = report_html(r);
  std::string latency = element(html, "latency", "</section>");
  EXPECT_NE(latency.find("Not measured on the target."), std::string::npos);
  EXPECT_NE(latency.find("the target &lt;cudnn&gt; cannot run on this machine"), std::string::npos);
  EXPECT_NE(latency.find("predicted by the <b>ort</b> cost model"), std::string::npos);
  EXPECT_EQ(latency.find("<svg"), std::string::npos);
  EXPECT_NE(element(html, "run", "</section>").find("<b>Nothing was measured.</b>"), std::string::npos);

  r.erase("predicted");
  r["kept_input"] = "no rewrite is measurably faster";
  latency = element(report_html(r), "latency", "</section>");
  EXPECT_NE(latency.find("The input graph was kept: no rewrite is measurably faster"), std::string::npos);
}

TEST(ReportHtml, VerificationShowsTheMethodToleranceSeedAndEveryBinding) {
  std::string v = element(report_html(rich_report()), "verification", "</section>");
  for (const char* expected : {"reference executor", "<b>ok</b>", "3.576e-07", "atol 0.0001, rtol 0.001", "<dt>Seed</dt><dd>0</dd>"})
    EXPECT_NE(v.find(expected), std::string::npos) << expected;
  EXPECT_EQ(count(v, "<tr class=\"binding\">"), 3u);
  EXPECT_NE(v.find("<td><b>primes</b></td><td><code>batch=3 seq=7</code></td><td><span class=\"good\">yes</span></td><td class=\"num\">3.58e-07</td>"),
            std::string::npos);
  EXPECT_NE(v.find("<td><b>decode</b></td><td><code>batch=2 past=5</code></td><td><span class=\"muted\">no</span></td><td class=\"num\">&mdash;</td>"
                   "<td>no past input</td>"),
            std::string::npos);

  json r = rich_report();
  r["verification"] = {{"enabled", false}};
  EXPECT_NE(element(report_html(r), "verification", "</section>").find("<b>Not verified</b> (--no-verify)"), std::string::npos);
  r["verification"] = {{"enabled", true}, {"method", "reference executor"}, {"ok", false}, {"max_abs_diff", 0.5}, {"atol", 1e-4}};
  std::string failed = report_html(r);
  EXPECT_NE(element(failed, "verification", "</section>").find("<b>failed</b>"), std::string::npos);
  EXPECT_NE(failed.find("<span class=\"bad\">failed</span>"), std::string::npos);
}

TEST(ReportHtml, EscapesEveryStringFromTheReport) {
  json r = rich_report();
  const std::string evil = "<script>alert(\"x\")</script> & 'q'";
  const std::string escaped = "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;q&#39;";
  r["model"] = "models/" + evil + ".onnx";
  r["output"] = evil;
  r["target_info"]["device"] = evil;
  r["before"]["op_counts"][evil] = 1;
  r["cost"]["by_op"]["before"][evil] = 0.001;
  r["fusions"][0]["replaced"][0]["name"] = evil;
  r["steps"][0]["rule"] = evil;
  r["verification"]["bindings"][0]["label"] = evil;
  r["verification"]["bindings"][0]["sizes"] = {{evil, 1}};
  r["measured"]["runner"] = evil;
  std::string html = report_html(r);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find(evil), std::string::npos);
  EXPECT_NE(html.find("<title>rlflow report: models/" + escaped + ".onnx</title>"), std::string::npos);
  EXPECT_GE(count(html, escaped), 8u);
}

TEST(ReportHtml, FetchesNothing) {
  json r = rich_report();
  r["model"] = "https://example.com/model.onnx";  // the report's own text is shown, escaped, never linked
  std::string html = report_html(r);
  html.erase(html.find("https://example.com/model.onnx"), std::string("https://example.com/model.onnx").size());
  html.erase(html.find("https://example.com/model.onnx"), std::string("https://example.com/model.onnx").size());  // and the <title>
  for (const char* external : {"http://", "https://", "src=", "<link", "<img", "<iframe", "@import", "url(", "<script", "//cdn"})
    EXPECT_EQ(html.find(external), std::string::npos) << external;
  // Links stay on the page.
  for (size_t at = html.find("href=\""); at != std::string::npos; at = html.find("href=\"", at + 1)) EXPECT_EQ(html[at + 6], '#');
}

TEST(ReportHtml, MinimalReportsRender) {
  for (const char* text : {R"({"ok": true})", "{}", "null", "[]", "3", R"({"ok": true, "search": "none", "steps": [], "cost": null,
                            "verification": {"enabled": false}, "predicted": {"reason": "--search none"}})"}) {
    std::string html;
    ASSERT_NO_THROW(html = report_html(json::parse(text))) << text;
    EXPECT_EQ(html.rfind("<!doctype html>", 0), 0u) << text;
    EXPECT_NE(html.find("</html>"), std::string::npos) << text;
    EXPECT_NE(html.find("No rewrite applied"), std::string::npos) << text;
  }
}

TEST(ReportHtml, NullsAndWrongTypesAnywhereDoNotThrow) {
  const json replacements[] = {nullptr, "x", 3, -1.5, true, json::array(), json::array({1, nullptr, "y"}), json::object(), json{{"a", nullptr}},
                               std::nan("")};
  const json base = rich_report();
  // Each field at the top and one level down, replaced by each odd value.
  for (const auto& [key, value] : base.items()) {
    for (const auto& odd : replacements) {
      json r = base;
      r[key] = odd;
      EXPECT_NO_THROW(report_html(r)) << key << " = " << odd.dump();
      if (!value.is_object()) continue;
      for (const auto& [inner, unused] : value.items()) {
        json s = base;
        s[key][inner] = odd;
        EXPECT_NO_THROW(report_html(s)) << key << "." << inner << " = " << odd.dump();
      }
    }
  }
  json r = base;
  r["fusions"] = json::array({nullptr, 3, json{{"replaced", "x"}}, json{{"replaced", json::array({nullptr, 1, json::object()})}}});
  r["steps"] = json::array({json::object(), json{{"cost_before_ms", 0}, {"cost_after_ms", 0}}, json{{"cost_before_ms", 1}, {"cost_after_ms", 1}}});
  r["measured"]["before_samples_ms"] = json::array({0.02, nullptr, "x", std::nan(""), 0.02, 0.02});
  r["measured"]["after_samples_ms"] = json::array({0.02});
  r["measured"]["speedup_ci"] = json::array({1});
  r["cost"]["by_op"]["after"] = json{{"MatMul", "fast"}, {"Add", -1}, {"Gelu", 1e300}};
  r["verification"]["bindings"] = json::array({nullptr, json{{"checked", "yes"}, {"sizes", 7}}});
  std::string html;
  ASSERT_NO_THROW(html = report_html(r));
  EXPECT_NE(html.find("</html>"), std::string::npos);
}

TEST(ReportHtml, LongListsFoldSoThePageStaysReadable) {
  json r = rich_report();
  json steps = json::array();
  for (int i = 0; i < 100; ++i)
    steps.push_back({{"rule", "rule_" + std::to_string(i)}, {"nodes", {i}}, {"replaced", {{{"name", "n" + std::to_string(i)}, {"op", "Add"}}}},
                     {"cost_before_ms", 1.0 - i * 0.001}, {"cost_after_ms", 1.0 - (i + 1) * 0.001}});
  r["steps"] = steps;
  json replaced = json::array();
  for (int i = 0; i < 30; ++i) replaced.push_back({{"name", "chain/" + std::to_string(i)}, {"op", i % 3 ? "Mul" : "Add"}});
  r["fusions"][0]["replaced"] = replaced;
  std::string rewrites = element(report_html(r), "rewrites", "</section>");
  EXPECT_EQ(count(rewrites, "<tr class=\"step\">"), 100u);
  size_t fold = rewrites.find("<details class=\"more\"><summary>Show 75 more rewrites</summary>");
  ASSERT_NE(fold, std::string::npos);
  EXPECT_EQ(count(rewrites.substr(0, fold), "<tr class=\"step\">"), 25u);
  EXPECT_NE(rewrites.find("<details class=\"nodes\"><summary>30 nodes: Add&nbsp;&times;10, Mul&nbsp;&times;20</summary>"), std::string::npos);
  EXPECT_NE(rewrites.find("chain/29"), std::string::npos);
}

TEST(ReportHtml, FailedRunSaysSo) {
  std::string html = report_html(json{{"ok", false}, {"error", "cannot read <model>"}});
  EXPECT_NE(html.find("<b>optimise failed:</b> cannot read &lt;model&gt;"), std::string::npos);
}

TEST(ReportHtml, NumbersAreShortAndCountsGrouped) {
  json r = rich_report();
  r["before"]["parameters"] = 124439808;
  r["cost"]["before_ms"] = 12.3456789;
  std::string html = report_html(r);
  EXPECT_NE(html.find("parameters 124,439,808"), std::string::npos);
  EXPECT_NE(html.find("12.35&nbsp;ms"), std::string::npos);
  EXPECT_EQ(html.find("12.3456"), std::string::npos);
}

// Renders a page to look at: RLFLOW_REPORT_HTML_OUT=page.html [RLFLOW_REPORT_HTML_IN=report.json]
// (then scripts/docs/report_screenshot page.html page.png). Skipped otherwise.
TEST(ReportHtml, WritesAPageWhenAsked) {
  const char* out = std::getenv("RLFLOW_REPORT_HTML_OUT");
  if (!out || !*out) GTEST_SKIP() << "set RLFLOW_REPORT_HTML_OUT to write a page";
  json r = rich_report();
  if (const char* in = std::getenv("RLFLOW_REPORT_HTML_IN"); in && *in) {
    std::ifstream file(in);
    ASSERT_TRUE(file) << in;
    r = json::parse(file);
  }
  std::ofstream(out) << report_html(r);
  std::ifstream back(out);
  std::stringstream text;
  text << back.rdbuf();
  EXPECT_NE(text.str().find("</html>"), std::string::npos);
}

}  // namespace
