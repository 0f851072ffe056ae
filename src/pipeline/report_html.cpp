// `optimise --report report.html`: the optimise report (OptimiseReport::to_json) as one page that opens
// offline. CSS is inline and the charts are SVG drawn here, so the file can be mailed or attached to an
// issue alone. The JSON may come from an older or newer rlflow, a failed run or `--search none`:
// every field is optional and a missing one shows as a dash, never as an exception.
#include "rlflow/pipeline/report_html.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rlflow::pipeline {

namespace {

using json = nlohmann::json;

// ---------------------------------------------------------------------------------------------
// Reading the JSON without trusting its shape.

const json& at(const json& j, const char* key) {
  static const json kNull;
  if (!j.is_object()) return kNull;
  auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}

std::optional<double> num(const json& j) {
  if (!j.is_number()) return std::nullopt;
  return j.get<double>();
}

std::optional<bool> boolean(const json& j) {
  if (!j.is_boolean()) return std::nullopt;
  return j.get<bool>();
}

bool has(const json& j) { return !j.is_null() && !(j.is_string() && j.get_ref<const std::string&>().empty()); }

// ---------------------------------------------------------------------------------------------
// Text.

std::string esc(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string printf_str(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// Four significant digits; plain notation between 1e-4 and 1e15, so a latency reads as 0.02276.
std::string fmt_num(double v, int sig = 4) {
  if (std::isnan(v)) return "n/a";
  if (std::isinf(v)) return v > 0 ? "&#8734;" : "-&#8734;";
  double a = std::fabs(v);
  char buf[64];
  if (a == 0) return "0";
  if (a >= 9999.5 && a < 1e15) std::snprintf(buf, sizeof buf, "%.0f", v);
  else if (a >= 1e-4 && a < 9999.5) std::snprintf(buf, sizeof buf, "%.*g", sig, v);
  else std::snprintf(buf, sizeof buf, "%.*g", sig, v);
  return buf;
}

// Counts: integral values with thousands separators, anything else as a number.
std::string fmt_count(double v) {
  if (!std::isfinite(v) || v != std::floor(v) || std::fabs(v) >= 1e15) return fmt_num(v);
  std::string digits = std::to_string(static_cast<long long>(std::fabs(v)));
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return (v < 0 ? "-" : "") + out;
}

std::string fmt_ms(double v) { return fmt_num(v) + "&nbsp;ms"; }
std::string fmt_s(double v) { return fmt_num(v, 3) + "&nbsp;s"; }
std::string fmt_x(double v) { return fmt_num(v) + "&times;"; }

std::string pct_change(double before, double after) {
  if (!(before > 0) || !std::isfinite(before) || !std::isfinite(after)) return "";
  double pct = (after - before) / before * 100;
  if (pct == 0) return "0%";
  return printf_str(std::fabs(pct) < 0.05 ? "%+.2f%%" : "%+.1f%%", pct);
}

// A change in cost: lower is better, so a fall is green.
std::string delta_cell(double before, double after) {
  std::string cls = after < before ? "good" : after > before ? "bad" : "";
  std::string d = after - before > 0 ? "+" + fmt_num(after - before) : fmt_num(after - before);
  return "<td class=\"num " + cls + "\">" + d + "&nbsp;ms</td><td class=\"num " + cls + "\">" + pct_change(before, after) + "</td>";
}

// Any JSON value as short plain text (escaped): for fields whose shape this page does not know.
std::string plain(const json& j) {
  if (j.is_null()) return "&mdash;";
  if (j.is_string()) return esc(j.get_ref<const std::string&>());
  if (j.is_boolean()) return j.get<bool>() ? "yes" : "no";
  if (j.is_number()) return fmt_count(j.get<double>());
  std::string out;
  if (j.is_array()) {
    for (const auto& e : j) out += (out.empty() ? "" : ", ") + plain(e);
    return out;
  }
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) out += (out.empty() ? "" : " ") + esc(k) + "=" + plain(v);
    return out;
  }
  return esc(j.dump());
}

std::string text(const json& j, const std::string& fallback = "&mdash;") { return has(j) ? plain(j) : fallback; }

std::string ms_or_dash(const json& j) { return num(j) ? fmt_ms(*num(j)) : "&mdash;"; }

const char* kMeasuredTag = "<span class=\"tag m\" title=\"measured end to end on the target\">measured</span>";
const char* kPredictedTag = "<span class=\"tag p\" title=\"predicted by the cost model\">predicted</span>";
const char* kCountedTag = "<span class=\"tag c\" title=\"counted in the graph\">counted</span>";
const char* kComputedTag = "<span class=\"tag c\" title=\"computed by running both graphs\">computed</span>";

// ---------------------------------------------------------------------------------------------
// SVG.

std::string px(double v) { return printf_str("%.1f", v); }

// A step of 1, 2 or 5 times a power of ten giving about `want` ticks over `span`.
double nice_step(double span, int want) {
  if (!(span > 0) || !std::isfinite(span)) return 1;
  double raw = span / want, mag = std::pow(10.0, std::floor(std::log10(raw))), f = raw / mag;
  return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * mag;
}

std::vector<double> ticks(double lo, double hi, int want) {
  std::vector<double> out;
  double step = nice_step(hi - lo, want);
  for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9 && out.size() < 50; t += step)
    out.push_back(std::fabs(t) < step * 1e-9 ? 0 : t);
  return out;
}

std::string legend(double x, double y, const std::vector<std::pair<std::string, std::string>>& entries) {
  std::string s;
  for (const auto& [cls, label] : entries) {
    s += "<rect class=\"key " + cls + "\" x=\"" + px(x) + "\" y=\"" + px(y - 10) + "\" width=\"12\" height=\"12\" rx=\"2\"/>";
    s += "<text x=\"" + px(x + 18) + "\" y=\"" + px(y) + "\">" + label + "</text>";
    x += 30 + 7.0 * label.size();
  }
  return s;
}

std::string shorten(const std::string& s, size_t n) { return s.size() <= n ? s : s.substr(0, n - 1) + "\xe2\x80\xa6"; }

struct PairRow {
  std::string label;
  double before = 0, after = 0;
};

// The viewBox width and the label and value columns: a chart beside a table is drawn narrower, so that
// its text stays the size of the page's text when scaled to the column.
struct BarLayout {
  double width = 900, label_w = 170, value_w = 120, row_h = 34;
};

// Horizontal paired bars (before above after) with each value printed at the end of its bar.
std::string paired_bars(const std::string& id, const std::vector<PairRow>& rows, const std::string& before_name,
                        const std::string& after_name, const std::function<std::string(double)>& value, const std::string& aria,
                        BarLayout layout = {}) {
  const double width = layout.width, label_w = layout.label_w, value_w = layout.value_w, top = 30, row_h = layout.row_h, bar_h = (row_h - 10) / 2;
  double max = 0;
  for (const auto& r : rows) max = std::max({max, r.before, r.after});
  const double area = width - label_w - value_w, scale = max > 0 ? area / max : 0;
  const double height = top + row_h * rows.size() + 6;
  std::string s = "<svg id=\"" + id + "\" class=\"chart\" viewBox=\"0 0 " + px(width) + " " + px(height) + "\" role=\"img\" aria-label=\"" +
                  esc(aria) + "\">";
  s += legend(label_w, 14, {{"bar before", before_name}, {"bar after", after_name}});
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    double y = top + row_h * i + 4;
    if (i % 2 == 1) s += "<rect class=\"stripe\" x=\"0\" y=\"" + px(y - 4) + "\" width=\"" + px(width) + "\" height=\"" + px(row_h) + "\"/>";
    s += "<text class=\"row-label\" x=\"" + px(label_w - 10) + "\" y=\"" + px(y + bar_h + 5) + "\" text-anchor=\"end\"><title>" + esc(r.label) +
         "</title>" + esc(shorten(r.label, 24)) + "</text>";
    for (int k = 0; k < 2; ++k) {
      double v = k == 0 ? r.before : r.after, w = std::isfinite(v) && v > 0 ? std::max(1.0, v * scale) : 0;
      double yy = y + k * (bar_h + 3);
      const std::string& name = k == 0 ? before_name : after_name;
      s += "<rect class=\"bar " + std::string(k == 0 ? "before" : "after") + "\" x=\"" + px(label_w) + "\" y=\"" + px(yy) + "\" width=\"" +
           px(w) + "\" height=\"" + px(bar_h) + "\" rx=\"2\"><title>" + esc(r.label) + ", " + name + ": " + value(v) + "</title></rect>";
      s += "<text class=\"value\" x=\"" + px(label_w + w + 6) + "\" y=\"" + px(yy + bar_h - 2) + "\">" + value(v) + "</text>";
    }
  }
  s += "<line class=\"axis\" x1=\"" + px(label_w) + "\" x2=\"" + px(label_w) + "\" y1=\"" + px(top - 4) + "\" y2=\"" + px(height - 4) + "\"/>";
  return s + "</svg>";
}

double quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return NAN;
  double pos = q * (sorted.size() - 1);
  size_t i = static_cast<size_t>(pos);
  if (i + 1 >= sorted.size()) return sorted.back();
  return sorted[i] + (pos - i) * (sorted[i + 1] - sorted[i]);
}

std::vector<double> numbers(const json& arr) {
  std::vector<double> out;
  if (!arr.is_array()) return out;
  for (const auto& e : arr)
    if (auto v = num(e); v && std::isfinite(*v)) out.push_back(*v);
  return out;
}

struct Series {
  std::string name, cls;
  std::vector<double> samples;
  std::optional<double> median;  // the report's, which the plot marks when it has no samples
};

// Each round's latency as a dot (jittered vertically), over a box from the quartiles with whiskers to the
// furthest sample within 1.5 IQR. The axis stops at 3 IQR past the upper quartile so one slow round
// does not squash the rest; dots beyond it are drawn as arrows at the edge and counted in the caption.
std::string latency_plot(const std::string& id, const std::vector<Series>& series, std::string* caption_note) {
  const double width = 900, left = 120, right = 40, top = 34, band = 78, gap = 10;
  double lo = INFINITY, hi = -INFINITY, cap = -INFINITY;
  for (const auto& s : series) {
    std::vector<double> v = s.samples;
    if (s.median) v.push_back(*s.median);
    if (v.empty()) continue;
    std::sort(v.begin(), v.end());
    lo = std::min(lo, v.front());
    hi = std::max(hi, v.back());
    double q1 = quantile(v, 0.25), q3 = quantile(v, 0.75);
    cap = std::max(cap, q3 + 3 * (q3 - q1));
  }
  if (!std::isfinite(lo)) return "";
  bool any_samples = false;
  for (const auto& se : series) any_samples = any_samples || !se.samples.empty();
  // Medians alone have no spread to show: draw them as bars from zero, so that two close medians do
  // not fill the axis as if they were far apart.
  if (!any_samples) lo = 0;
  if (cap > lo && cap < hi) hi = cap;
  if (hi <= lo) {
    double d = lo != 0 ? std::fabs(lo) * 0.05 : 1e-3;
    lo -= d;
    hi += d;
  }
  double pad = (hi - lo) * 0.04;
  const double x0 = any_samples ? lo - pad : 0, x1 = hi + pad, plot_w = width - left - right;
  auto x = [&](double v) { return left + (std::min(v, x1) - x0) / (x1 - x0) * plot_w; };
  const double axis_y = top + series.size() * (band + gap), height = axis_y + 46;
  std::string s = "<svg id=\"" + id + "\" class=\"chart\" viewBox=\"0 0 " + px(width) + " " + px(height) +
                  "\" role=\"img\" aria-label=\"measured latency per round\">";
  std::vector<std::pair<std::string, std::string>> keys;
  for (const auto& se : series) keys.push_back({"dot " + se.cls, se.name});
  s += legend(left, 16, keys);
  for (double t : ticks(x0, x1, 7)) {
    s += "<line class=\"grid\" x1=\"" + px(x(t)) + "\" x2=\"" + px(x(t)) + "\" y1=\"" + px(top - 4) + "\" y2=\"" + px(axis_y) + "\"/>";
    s += "<text class=\"tick\" x=\"" + px(x(t)) + "\" y=\"" + px(axis_y + 16) + "\" text-anchor=\"middle\">" + fmt_num(t) + "</text>";
  }
  s += "<line class=\"axis\" x1=\"" + px(left) + "\" x2=\"" + px(width - right) + "\" y1=\"" + px(axis_y) + "\" y2=\"" + px(axis_y) + "\"/>";
  s += "<text class=\"axis-title\" x=\"" + px(left + plot_w / 2) + "\" y=\"" + px(axis_y + 38) +
       "\" text-anchor=\"middle\">latency of one round, ms (measured)</text>";
  int clipped = 0;
  for (size_t k = 0; k < series.size(); ++k) {
    const auto& se = series[k];
    const double y0 = top + k * (band + gap), cy = y0 + band / 2;
    s += "<rect class=\"band\" x=\"" + px(left) + "\" y=\"" + px(y0) + "\" width=\"" + px(plot_w) + "\" height=\"" + px(band) + "\"/>";
    s += "<text class=\"row-label\" x=\"" + px(left - 12) + "\" y=\"" + px(cy - 2) + "\" text-anchor=\"end\">" + esc(se.name) + "</text>";
    s += "<text class=\"tick\" x=\"" + px(left - 12) + "\" y=\"" + px(cy + 13) + "\" text-anchor=\"end\">" +
         (se.samples.empty() ? std::string("median only") : "n = " + std::to_string(se.samples.size())) + "</text>";
    std::vector<double> v = se.samples;
    std::sort(v.begin(), v.end());
    double med = se.median ? *se.median : quantile(v, 0.5);
    if (v.size() >= 2) {
      double q1 = quantile(v, 0.25), q3 = quantile(v, 0.75), iqr = q3 - q1;
      double wlo = q1, whi = q3;
      for (double e : v)
        if (e >= q1 - 1.5 * iqr) {
          wlo = e;
          break;
        }
      for (auto it = v.rbegin(); it != v.rend(); ++it)
        if (*it <= q3 + 1.5 * iqr) {
          whi = *it;
          break;
        }
      const double bh = band * 0.56;
      s += "<line class=\"whisker " + se.cls + "\" x1=\"" + px(x(wlo)) + "\" x2=\"" + px(x(q1)) + "\" y1=\"" + px(cy) + "\" y2=\"" + px(cy) + "\"/>";
      s += "<line class=\"whisker " + se.cls + "\" x1=\"" + px(x(q3)) + "\" x2=\"" + px(x(whi)) + "\" y1=\"" + px(cy) + "\" y2=\"" + px(cy) + "\"/>";
      for (double w : {wlo, whi})
        s += "<line class=\"whisker " + se.cls + "\" x1=\"" + px(x(w)) + "\" x2=\"" + px(x(w)) + "\" y1=\"" + px(cy - 8) + "\" y2=\"" + px(cy + 8) +
             "\"/>";
      s += "<rect class=\"box " + se.cls + "\" x=\"" + px(x(q1)) + "\" y=\"" + px(cy - bh / 2) + "\" width=\"" + px(std::max(1.0, x(q3) - x(q1))) +
           "\" height=\"" + px(bh) + "\" rx=\"3\"><title>" + esc(se.name) + ": quartiles " + fmt_num(q1) + " to " + fmt_num(q3) +
           " ms</title></rect>";
    }
    for (size_t i = 0; i < se.samples.size(); ++i) {
      double e = se.samples[i];
      // A fixed hash of the index: the same report always draws the same picture.
      double jitter = static_cast<double>((static_cast<uint32_t>(i) * 2654435761u) % 1000u) / 1000.0 - 0.5;
      double cy_i = cy + jitter * band * 0.62;
      std::string tip = "<title>" + esc(se.name) + ", round " + std::to_string(i + 1) + ": " + fmt_num(e) + " ms</title>";
      if (e > x1) {
        ++clipped;
        double ex = width - right + 4;
        s += "<path class=\"dot " + se.cls + "\" d=\"M" + px(ex) + " " + px(cy_i - 4) + "L" + px(ex + 7) + " " + px(cy_i) + "L" + px(ex) + " " +
             px(cy_i + 4) + "Z\">" + tip + "</path>";
      } else {
        s += "<circle class=\"dot " + se.cls + "\" cx=\"" + px(x(e)) + "\" cy=\"" + px(cy_i) + "\" r=\"3.2\">" + tip + "</circle>";
      }
    }
    if (!any_samples && std::isfinite(med))
      s += "<rect class=\"bar " + se.cls + "\" x=\"" + px(left) + "\" y=\"" + px(cy - 10) + "\" width=\"" + px(x(med) - left) +
           "\" height=\"20\" rx=\"2\"/>";
    if (std::isfinite(med)) {
      s += "<line class=\"median " + se.cls + "\" x1=\"" + px(x(med)) + "\" x2=\"" + px(x(med)) + "\" y1=\"" + px(y0 + 4) + "\" y2=\"" +
           px(y0 + band - 4) + "\"/>";
      double tx = x(med);
      const char* anchor = tx > width - right - 120 ? "end" : "start";
      s += "<text class=\"median-label\" x=\"" + px(tx + (anchor[0] == 'e' ? -6 : 6)) + "\" y=\"" + px(y0 + 13) + "\" text-anchor=\"" + anchor +
           "\">median " + fmt_num(med) + " ms</text>";
    }
  }
  if (clipped > 0 && caption_note)
    *caption_note = std::to_string(clipped) + " slow round" + (clipped == 1 ? "" : "s") + " beyond " + fmt_num(x1) +
                    " ms drawn as arrows at the right edge (not to scale).";
  return s + "</svg>";
}

// The predicted whole-graph cost after each rewrite, as a line: where the search found its gains.
std::string trajectory_plot(const std::vector<double>& costs) {
  const double width = 900, height = 190, left = 70, right = 20, top = 14, bottom = 36;
  double lo = *std::min_element(costs.begin(), costs.end()), hi = *std::max_element(costs.begin(), costs.end());
  if (hi <= lo) {
    double d = lo != 0 ? std::fabs(lo) * 0.05 : 1e-3;
    lo -= d;
    hi += d;
  }
  double pad = (hi - lo) * 0.08;
  lo -= pad;
  hi += pad;
  const double pw = width - left - right, ph = height - top - bottom;
  auto x = [&](size_t i) { return left + (costs.size() > 1 ? pw * i / (costs.size() - 1) : pw / 2); };
  auto y = [&](double v) { return top + ph * (1 - (v - lo) / (hi - lo)); };
  std::string s = "<svg id=\"step-cost-chart\" class=\"chart\" viewBox=\"0 0 " + px(width) + " " + px(height) +
                  "\" role=\"img\" aria-label=\"predicted graph cost after each rewrite\">";
  for (double t : ticks(lo, hi, 4)) {
    s += "<line class=\"grid\" x1=\"" + px(left) + "\" x2=\"" + px(width - right) + "\" y1=\"" + px(y(t)) + "\" y2=\"" + px(y(t)) + "\"/>";
    s += "<text class=\"tick\" x=\"" + px(left - 8) + "\" y=\"" + px(y(t) + 4) + "\" text-anchor=\"end\">" + fmt_num(t) + "</text>";
  }
  std::string points;
  for (size_t i = 0; i < costs.size(); ++i) points += (i ? " " : "") + px(x(i)) + "," + px(y(costs[i]));
  s += "<polyline class=\"line\" points=\"" + points + "\"/>";
  size_t every = std::max<size_t>(1, costs.size() / 12);
  for (size_t i = 0; i < costs.size(); ++i) {
    s += "<circle class=\"point\" cx=\"" + px(x(i)) + "\" cy=\"" + px(y(costs[i])) + "\" r=\"3\"><title>" +
         (i == 0 ? std::string("before the first rewrite") : "after rewrite " + std::to_string(i)) + ": " + fmt_num(costs[i]) +
         " ms (predicted)</title></circle>";
    if (i % every == 0 || i + 1 == costs.size())
      s += "<text class=\"tick\" x=\"" + px(x(i)) + "\" y=\"" + px(height - bottom + 16) + "\" text-anchor=\"middle\">" + std::to_string(i) + "</text>";
  }
  s += "<text class=\"axis-title\" x=\"" + px(left + pw / 2) + "\" y=\"" + px(height - 4) +
       "\" text-anchor=\"middle\">rewrites applied (predicted graph cost, ms)</text>";
  return s + "</svg>";
}

// ---------------------------------------------------------------------------------------------
// Page pieces.

// Rows past the first `shown` fold into a <details> with the same columns, so a search that applied
// 400 rewrites still gives a page that can be read from the top.
std::string folded_table(const std::string& cls, const std::string& head, const std::vector<std::string>& rows, size_t shown,
                         const std::string& what) {
  std::string s = "<table class=\"" + cls + "\"><thead>" + head + "</thead><tbody>";
  for (size_t i = 0; i < rows.size() && i < shown; ++i) s += rows[i];
  s += "</tbody></table>";
  if (rows.size() > shown) {
    s += "<details class=\"more\"><summary>Show " + std::to_string(rows.size() - shown) + " more " + what + "</summary><table class=\"" + cls +
         "\"><thead>" + head + "</thead><tbody>";
    for (size_t i = shown; i < rows.size(); ++i) s += rows[i];
    s += "</tbody></table></details>";
  }
  return s;
}

std::string node_label(const json& n, const char* name_key = "name") {
  std::string op = has(at(n, "op")) ? plain(at(n, "op")) : "?";
  std::string s = "<code class=\"op\">" + op + "</code>";
  if (has(at(n, name_key))) s += " <span class=\"node-name\">" + plain(at(n, name_key)) + "</span>";
  else if (n.is_string() || n.is_number()) s = "<span class=\"node-name\">" + plain(n) + "</span>";
  return s;
}

// The nodes a rewrite or fusion removed: short lists inline, long ones as an op tally with the full
// list folded under it.
std::string replaced_cell(const json& replaced, const json& node_ids) {
  if (!replaced.is_array() || replaced.empty()) {
    if (node_ids.is_array() && !node_ids.empty()) return "<span class=\"muted\">nodes " + plain(node_ids) + "</span>";
    return "<span class=\"muted\">&mdash;</span>";
  }
  std::string list = "<ul class=\"nodes\">";
  for (const auto& n : replaced) list += "<li>" + node_label(n) + "</li>";
  list += "</ul>";
  if (replaced.size() <= 4) return list;
  std::map<std::string, int> tally;
  for (const auto& n : replaced) tally[has(at(n, "op")) ? plain(at(n, "op")) : "?"]++;
  std::string summary = std::to_string(replaced.size()) + " nodes: ";
  bool first = true;
  for (const auto& [op, count] : tally) {
    summary += std::string(first ? "" : ", ") + op + (count > 1 ? "&nbsp;&times;" + std::to_string(count) : "");
    first = false;
  }
  return "<details class=\"nodes\"><summary>" + summary + "</summary>" + list + "</details>";
}

std::map<std::string, double> number_map(const json& j) {
  std::map<std::string, double> out;
  if (!j.is_object()) return out;
  for (const auto& [k, v] : j.items())
    if (auto d = num(v)) out[k] = *d;
  return out;
}

// Union of the keys, largest first (by the larger of the two values), then by name.
std::vector<PairRow> pair_rows(const std::map<std::string, double>& before, const std::map<std::string, double>& after) {
  std::map<std::string, PairRow> rows;
  for (const auto& [k, v] : before) rows[k] = {k, v, rows[k].after};
  for (const auto& [k, v] : after) rows[k] = {k, rows[k].before, v};
  std::vector<PairRow> out;
  for (auto& [k, r] : rows) out.push_back(r);
  std::stable_sort(out.begin(), out.end(), [](const PairRow& a, const PairRow& b) {
    double ka = std::max(a.before, a.after), kb = std::max(b.before, b.after);
    return ka != kb ? ka > kb : a.label < b.label;
  });
  return out;
}

struct Context {
  std::string cost_model;  // the name every predicted figure is credited to
  std::string runner;      // what measured, when something did
  bool measured = false;
};

std::string predicted_by(const Context& c) { return c.cost_model.empty() ? "the cost model" : "the <b>" + c.cost_model + "</b> cost model"; }

std::string kpi(const std::string& label, const std::string& value, const std::string& sub, const std::string& cls = "") {
  return "<div class=\"kpi " + cls + "\"><div class=\"label\">" + label + "</div><div class=\"value\">" + value + "</div><div class=\"sub\">" + sub +
         "</div></div>";
}

std::string ci_text(const json& ci, const json& coverage) {
  if (!ci.is_array() || ci.size() != 2 || !num(ci[0]) || !num(ci[1])) return "";
  std::string level = num(coverage) ? printf_str("%.0f%%", *num(coverage) * 100) + " CI " : "CI ";
  return level + "[" + fmt_num(*num(ci[0])) + ", " + fmt_num(*num(ci[1])) + "]";
}

std::string header_section(const json& r, const Context& c) {
  const json& ti = at(r, "target_info");
  const json& cost = at(r, "cost");
  const json& m = at(r, "measured");
  std::string s = "<header class=\"top\"><div class=\"eyebrow\">rlflow optimise &middot; report</div>";
  s += "<h1><code>" + text(at(r, "model"), "(model not named)") + "</code> <span class=\"arrow\">&rarr;</span> <code>" +
       text(at(r, "output"), "(no output)") + "</code></h1>";
  if (boolean(at(r, "ok")) == false) {
    std::string why = has(at(r, "error")) ? plain(at(r, "error")) : has(at(r, "message")) ? plain(at(r, "message")) : "no reason given";
    s += "<div class=\"banner bad\"><b>optimise failed:</b> " + why + "</div>";
  }
  s += "<nav class=\"toc\"><a href=\"#run\">The run</a><a href=\"#ops\">Op histogram</a><a href=\"#rewrites\">Fusions and rewrites</a>"
       "<a href=\"#cost\">Predicted cost</a><a href=\"#latency\">Measured latency</a><a href=\"#verification\">Verification</a></nav>";
  s += "</header>";

  // Headline figures, each with where it comes from.
  s += "<div class=\"kpis\">";
  if (c.measured && num(at(m, "speedup"))) {
    std::string sub = kMeasuredTag + std::string(" ") + ci_text(at(m, "speedup_ci"), at(m, "ci_coverage"));
    if (num(at(m, "rounds"))) sub += ", " + fmt_count(*num(at(m, "rounds"))) + " rounds";
    s += kpi("Speedup on the target", fmt_x(*num(at(m, "speedup"))), sub, "accent-m");
  } else {
    std::string why = has(at(at(r, "predicted"), "reason")) ? plain(at(at(r, "predicted"), "reason"))
                      : has(at(r, "kept_input"))             ? "kept the input: " + plain(at(r, "kept_input"))
                                                             : "no reason given";
    s += kpi("Speedup on the target", "&mdash;", "<span class=\"tag c\">not measured</span> " + why);
  }
  if (num(at(cost, "speedup")))
    s += kpi("Predicted speedup", fmt_x(*num(at(cost, "speedup"))),
             kPredictedTag + std::string(" ") + ms_or_dash(at(cost, "before_ms")) + " &rarr; " + ms_or_dash(at(cost, "after_ms")), "accent-p");
  else
    s += kpi("Predicted speedup", "&mdash;", "no cost prediction in this report");
  const json& before = at(r, "before");
  const json& after = at(r, "after");
  if (num(at(before, "ops")) || num(at(after, "ops")))
    s += kpi("Ops", text(at(before, "ops")) + " &rarr; " + text(at(after, "ops")),
             kCountedTag + std::string(" nodes in the graph"));
  else
    s += kpi("Ops", "&mdash;", "no graph summary");
  const json& v = at(r, "verification");
  if (boolean(at(v, "enabled")) == false) s += kpi("Verification", "off", "<span class=\"tag c\">not run</span> (--no-verify)", "accent-warn");
  else if (auto ok = boolean(at(v, "ok")))
    s += kpi("Verification", *ok ? "<span class=\"good\">passed</span>" : "<span class=\"bad\">failed</span>",
             text(at(v, "method"), "") + (num(at(v, "max_abs_diff")) ? ", max abs diff " + fmt_num(*num(at(v, "max_abs_diff"))) : ""),
             *ok ? "" : "accent-bad");
  else
    s += kpi("Verification", "&mdash;", "no check recorded");
  s += "</div>";

  // Facts.
  s += "<section class=\"card\" id=\"run\"><h2>The run</h2><dl class=\"facts\">";
  std::string target = has(at(ti, "name")) ? plain(at(ti, "name")) : text(at(r, "target"));
  s += "<dt>Target</dt><dd><b>" + target + "</b></dd>";
  std::string runtime = has(at(ti, "runtime")) ? plain(at(ti, "runtime")) : has(at(m, "runner")) ? plain(at(m, "runner")) : "&mdash;";
  s += "<dt>Runtime</dt><dd>" + runtime + "</dd>";
  s += "<dt>Device</dt><dd>" + text(at(ti, "device")) + "</dd>";
  std::string cm = c.cost_model.empty() ? "&mdash;" : "<b>" + c.cost_model + "</b>";
  if (has(at(cost, "profile"))) cm += " (profile " + plain(at(cost, "profile")) + ")";
  const json& table = at(cost, "table");
  if (table.is_object())
    cm += "; recorded table " + text(at(table, "path")) + " (" + text(at(table, "hits"), "?") + " hits, " + text(at(table, "misses"), "?") +
          " misses)";
  s += "<dt>Cost model</dt><dd>" + cm + "</dd>";
  const json& opset = at(r, "opset");
  if (opset.is_object()) {
    s += "<dt>Opset</dt><dd>" + text(at(opset, "input"), "?") + " &rarr; " + text(at(opset, "output"), "?");
    if (has(at(opset, "why"))) s += " <span class=\"muted\">(" + plain(at(opset, "why")) + ")</span>";
    s += "</dd>";
  }
  const json& sr = at(r, "search_report");
  std::string search = "<b>" + (has(at(r, "search")) ? plain(at(r, "search")) : text(at(sr, "strategy"))) + "</b>";
  if (sr.is_object()) {
    if (has(at(sr, "stop_reason"))) search += ", stopped: " + plain(at(sr, "stop_reason"));
    std::vector<std::string> bits;
    if (num(at(sr, "expanded"))) bits.push_back(fmt_count(*num(at(sr, "expanded"))) + " graphs expanded");
    if (num(at(sr, "unique_graphs"))) bits.push_back(fmt_count(*num(at(sr, "unique_graphs"))) + " unique");
    if (num(at(sr, "rules"))) bits.push_back(fmt_count(*num(at(sr, "rules"))) + " rules");
    if (num(at(at(sr, "seconds"), "total"))) bits.push_back(fmt_s(*num(at(at(sr, "seconds"), "total"))));
    if (!bits.empty()) {
      search += " <span class=\"muted\">(";
      for (size_t i = 0; i < bits.size(); ++i) search += (i ? ", " : "") + bits[i];
      search += ")</span>";
    }
    if (has(at(sr, "agent_warning"))) search += "<br><span class=\"bad\">" + plain(at(sr, "agent_warning")) + "</span>";
  }
  s += "<dt>Search</dt><dd>" + search + "</dd>";
  for (const char* key : {"dynamic_dims", "fixed_dims", "min_dims"})
    if (has(at(r, key))) s += "<dt>" + esc(key) + "</dt><dd><code>" + plain(at(r, key)) + "</code></dd>";
  std::string decision;
  if (has(at(m, "decision"))) decision = plain(at(m, "decision"));
  if (has(at(r, "kept_input"))) decision += (decision.empty() ? "" : "; ") + std::string("kept the input graph: ") + plain(at(r, "kept_input"));
  if (!decision.empty()) s += "<dt>Decision</dt><dd>" + decision + "</dd>";
  s += "</dl>";

  // Which figures are measured and which predicted: the one thing a reader must not confuse.
  s += "<div class=\"provenance\">";
  s += "<div class=\"prov m\"><div class=\"prov-title\">" + std::string(kMeasuredTag) + " figures</div>";
  if (c.measured) {
    s += "End-to-end latency of the input and the written file, run interleaved";
    if (num(at(m, "rounds"))) s += " for " + fmt_count(*num(at(m, "rounds"))) + " rounds";
    s += " on <b>" + (c.runner.empty() ? std::string("the target") : c.runner) + "</b>";
    if (has(at(m, "target"))) s += " (target " + plain(at(m, "target")) + ")";
    s += ": the speedup above and the <a href=\"#latency\">latency plot</a>.";
  } else {
    s += "<b>Nothing was measured.</b> ";
    const json& pr = at(r, "predicted");
    if (has(at(pr, "reason"))) s += "Reason: " + plain(at(pr, "reason")) + ". ";
    else if (has(at(r, "kept_input"))) s += "The input graph was kept: " + plain(at(r, "kept_input")) + ". ";
    s += "Every timing on this page is a prediction.";
  }
  s += "</div><div class=\"prov p\"><div class=\"prov-title\">" + std::string(kPredictedTag) + " figures</div>";
  if (cost.is_object() || !c.cost_model.empty()) {
    s += "Whole-graph and per-op costs, the cost of each rewrite and fusion: predicted by " + predicted_by(c) + ", not timed.";
    if (has(at(cost, "known_error"))) s += " <span class=\"muted\">Known error: " + plain(at(cost, "known_error")) + ".</span>";
  } else {
    s += "No cost model prediction in this report.";
  }
  s += "</div></div></section>";
  return s;
}

std::string histogram_section(const json& r) {
  const json& before = at(r, "before");
  const json& after = at(r, "after");
  std::string s = "<section class=\"card\" id=\"ops\"><h2>Op histogram " + std::string(kCountedTag) + "</h2>";
  auto rows = pair_rows(number_map(at(before, "op_counts")), number_map(at(after, "op_counts")));
  if (rows.empty()) return s + "<p class=\"muted\">This report has no op counts.</p></section>";
  s += "<p class=\"lead\">Nodes of each ONNX op type in the input and in the written graph.";
  if (num(at(before, "ops")) || num(at(after, "ops")))
    s += " " + text(at(before, "ops")) + " ops &rarr; " + text(at(after, "ops")) + " ops";
  if (num(at(before, "parameters")) || num(at(after, "parameters")))
    s += "; parameters " + text(at(before, "parameters")) + " &rarr; " + text(at(after, "parameters"));
  if (num(at(before, "flops")) || num(at(after, "flops")))
    s += "; FLOPs " + text(at(before, "flops")) + " &rarr; " + text(at(after, "flops"));
  s += ".</p><div class=\"split\"><div class=\"split-table\"><table class=\"histogram\"><thead><tr><th>op</th><th class=\"num\">before</th>"
       "<th class=\"num\">after</th><th class=\"num\">change</th></tr></thead><tbody>";
  for (const auto& row : rows) {
    double d = row.after - row.before;
    std::string cls = d < 0 ? " class=\"fell\"" : d > 0 ? " class=\"rose\"" : "";
    s += "<tr" + cls + "><th scope=\"row\">" + esc(row.label) + "</th><td class=\"num\">" + fmt_count(row.before) + "</td><td class=\"num\">" +
         fmt_count(row.after) + "</td><td class=\"num\">" + (d == 0 ? std::string("") : (d > 0 ? "+" : "") + fmt_count(d)) + "</td></tr>";
  }
  s += "</tbody></table></div><div class=\"split-chart\">";
  s += paired_bars("op-histogram-chart", rows, "before", "after", [](double v) { return fmt_count(v); }, "op counts before and after",
                   BarLayout{560, 150, 50, 30});
  s += "</div></div>";
  for (const char* side : {"before", "after"}) {
    const json& opaque = at(at(r, side), "opaque_ops");
    if (opaque.is_array() && !opaque.empty())
      s += "<p class=\"muted\">Opaque ops " + std::string(side) + " (passed through, not optimised): " + plain(opaque) + "</p>";
  }
  return s + "</section>";
}

std::string rewrites_section(const json& r, const Context& c) {
  std::string s = "<section class=\"card\" id=\"rewrites\"><h2>Fusions and rewrites</h2>";
  s += "<p class=\"lead\">Costs in this section are " + std::string(kPredictedTag) + " by " + predicted_by(c) + ".</p>";

  // Fusions: composite chains fused into one op before the search.
  s += "<h3>Fusions</h3>";
  const json& fusions = at(r, "fusions");
  if (fusions.is_array() && !fusions.empty()) {
    std::string head =
        "<tr><th class=\"num\">#</th><th>fusion</th><th>fused node</th><th>replaced</th><th class=\"num\">cost before</th>"
        "<th class=\"num\">cost after</th><th class=\"num\">&Delta; ms</th><th class=\"num\">&Delta;</th></tr>";
    std::vector<std::string> rows;
    for (size_t i = 0; i < fusions.size(); ++i) {
      const json& f = fusions[i];
      std::string row = "<tr class=\"fusion\"><td class=\"num\">" + std::to_string(i + 1) + "</td><td><b>" + text(at(f, "fusion"), "?") +
                        "</b></td><td>" + node_label(f, "node") + "</td><td>" + replaced_cell(at(f, "replaced"), nullptr) + "</td>";
      auto b = num(at(f, "cost_before_ms")), a = num(at(f, "cost_after_ms"));
      row += "<td class=\"num\">" + (b ? fmt_ms(*b) : "&mdash;") + "</td><td class=\"num\">" + (a ? fmt_ms(*a) : "&mdash;") + "</td>";
      row += a && b ? delta_cell(*b, *a) : "<td></td><td></td>";
      rows.push_back(row + "</tr>");
    }
    s += "<p class=\"muted small\">Composite chains fused into one op before the search; cost before is the replaced nodes', cost after the "
         "fused op's.</p>";
    s += folded_table("rows fusions", head, rows, 20, "fusions");
  } else {
    // Older reports only count the fusions.
    std::string counts;
    int removed = 0;
    const json& comp = at(r, "composites");
    if (comp.is_object())
      for (const auto& [k, v] : comp.items()) {
        auto n = num(v);
        if (!n || *n == 0) continue;
        if (k == "removed_nodes") removed = static_cast<int>(*n);
        else counts += (counts.empty() ? "" : ", ") + esc(k) + "&nbsp;&times;" + fmt_count(*n);
      }
    if (counts.empty()) s += "<p class=\"muted\">No fusion applied.</p>";
    else
      s += "<p>" + counts + (removed ? " <span class=\"muted\">(" + std::to_string(removed) + " nodes removed)</span>" : "") +
           "<br><span class=\"muted small\">This report lists the fusions by count only.</span></p>";
  }

  // The chains a fusion looked at and refused, by its reason (what -vv logs as it happens).
  const json& attempts = at(r, "fusion_attempts");
  if (attempts.is_object()) {
    std::vector<std::string> rows;
    for (const auto& [name, a] : attempts.items()) {
      const json& refused = at(a, "refused");
      if (!refused.is_array()) continue;
      for (const auto& why : refused)
        rows.push_back("<tr class=\"refused\"><td><b>" + esc(name) + "</b></td><td class=\"num\">" + text(at(a, "seen")) +
                       "</td><td class=\"num\">" + text(at(a, "fused")) + "</td><td class=\"num\">" + text(at(why, "count")) + "</td><td>" +
                       text(at(why, "why")) + "</td><td>" + text(at(why, "nodes")) + "</td></tr>");
    }
    if (!rows.empty()) {
      s += "<h3>Chains not fused</h3><p class=\"muted small\">Each chain a fusion recognised the start of and refused, with its reason.</p>";
      s += folded_table("rows refused",
                        "<tr><th>fusion</th><th class=\"num\">seen</th><th class=\"num\">fused</th><th class=\"num\">refused</th>"
                        "<th>why</th><th>root nodes</th></tr>",
                        rows, 20, "reasons");
    }
  }

  // Rewrites chosen by the search, in the order applied.
  s += "<h3>Rewrites</h3>";
  const json& steps = at(r, "steps");
  if (steps.is_array() && !steps.empty()) {
    std::map<std::string, int> per_rule;
    std::vector<double> trajectory;
    bool costed = true;
    for (const auto& st : steps) {
      per_rule[has(at(st, "rule")) ? plain(at(st, "rule")) : "?"]++;
      auto b = num(at(st, "cost_before_ms")), a = num(at(st, "cost_after_ms"));
      if (!a || !b) costed = false;
      else {
        if (trajectory.empty()) trajectory.push_back(*b);
        trajectory.push_back(*a);
      }
    }
    s += "<p class=\"muted small\">" + std::to_string(steps.size()) + " rewrite" + (steps.size() == 1 ? "" : "s") + " by " +
         std::to_string(per_rule.size()) + " rule" + (per_rule.size() == 1 ? "" : "s") +
         "; cost before and after is the whole graph's, predicted, around each step.</p>";
    if (costed && trajectory.size() >= 2) s += trajectory_plot(trajectory);
    std::string head =
        "<tr><th class=\"num\">#</th><th>rule</th><th>replaced</th><th class=\"num\">graph before</th><th class=\"num\">graph after</th>"
        "<th class=\"num\">&Delta; ms</th><th class=\"num\">&Delta;</th></tr>";
    std::vector<std::string> rows;
    for (size_t i = 0; i < steps.size(); ++i) {
      const json& st = steps[i];
      std::string row = "<tr class=\"step\"><td class=\"num\">" + std::to_string(i + 1) + "</td><td><code>" + text(at(st, "rule"), "?") +
                        "</code></td><td>" + replaced_cell(at(st, "replaced"), at(st, "nodes")) + "</td>";
      auto b = num(at(st, "cost_before_ms")), a = num(at(st, "cost_after_ms"));
      row += "<td class=\"num\">" + (b ? fmt_ms(*b) : "&mdash;") + "</td><td class=\"num\">" + (a ? fmt_ms(*a) : "&mdash;") + "</td>";
      row += a && b ? delta_cell(*b, *a) : "<td></td><td></td>";
      rows.push_back(row + "</tr>");
    }
    s += folded_table("rows steps", head, rows, 25, "rewrites");
  } else {
    std::string why;
    const json& sr = at(r, "search_report");
    if (has(at(sr, "stop_reason"))) why = " The search stopped: " + plain(at(sr, "stop_reason")) + ".";
    else if (at(r, "search") == "none" || !sr.is_object()) why = " No search ran.";
    s += "<p class=\"muted\">No rewrite applied." + why + "</p>";
  }
  return s + "</section>";
}

std::string cost_section(const json& r, const Context& c) {
  const json& cost = at(r, "cost");
  std::string s = "<section class=\"card\" id=\"cost\"><h2>Cost by op type " + std::string(kPredictedTag) + "</h2>";
  if (!cost.is_object()) return s + "<p class=\"muted\">No cost model prediction in this report.</p></section>";
  s += "<p class=\"lead\">Predicted milliseconds per ONNX op type, by " + predicted_by(c) + ". Whole graph: " + ms_or_dash(at(cost, "before_ms")) +
       " &rarr; " + ms_or_dash(at(cost, "after_ms"));
  if (num(at(cost, "speedup"))) s += " (" + fmt_x(*num(at(cost, "speedup"))) + ", predicted)";
  s += ".";
  if (has(at(cost, "describes"))) s += " <span class=\"muted\">After: " + plain(at(cost, "describes")) + ".</span>";
  s += "</p>";
  const json& by_op = at(cost, "by_op");
  auto rows = pair_rows(number_map(at(by_op, "before")), number_map(at(by_op, "after")));
  if (rows.empty()) return s + "<p class=\"muted\">This report has no per-op cost breakdown.</p></section>";
  s += paired_bars("cost-by-op-chart", rows, "before (predicted)", "after (predicted)", [](double v) { return fmt_num(v) + " ms"; },
                   "predicted cost per op type before and after");
  return s + "</section>";
}

std::string measured_cell(const json& meas) {
  if (!meas.is_object()) return "<td class=\"num\">&mdash;</td><td class=\"num\">&mdash;</td><td class=\"num\">&mdash;</td>";
  std::string sp = num(at(meas, "speedup")) ? fmt_x(*num(at(meas, "speedup"))) : "&mdash;";
  std::string ci = ci_text(at(meas, "speedup_ci"), at(meas, "ci_coverage"));
  return "<td class=\"num\">" + ms_or_dash(at(meas, "before_ms")) + "</td><td class=\"num\">" + ms_or_dash(at(meas, "after_ms")) +
         "</td><td class=\"num\">" + sp + (ci.empty() ? "" : "<br><span class=\"muted small\">" + ci + "</span>") + "</td>";
}

std::string latency_block(const std::string& id, const json& meas) {
  std::vector<Series> series;
  series.push_back({"input", "before", numbers(at(meas, "before_samples_ms")), num(at(meas, "before_ms"))});
  series.push_back({"output", "after", numbers(at(meas, "after_samples_ms")), num(at(meas, "after_ms"))});
  std::string note;
  std::string plot = latency_plot(id, series, &note);
  std::string s = plot;
  if (series[0].samples.empty() && series[1].samples.empty())
    s += "<p class=\"muted small\">This report has the medians only, not the per-round samples.</p>";
  if (!note.empty()) s += "<p class=\"muted small\">" + note + "</p>";
  return s;
}

std::string latency_section(const json& r, const Context& c) {
  const json& m = at(r, "measured");
  std::string s = "<section class=\"card\" id=\"latency\"><h2>Measured latency " + std::string(kMeasuredTag) + "</h2>";
  if (!c.measured) {
    s += "<div class=\"banner warn\"><b>Not measured on the target.</b> ";
    const json& pr = at(r, "predicted");
    if (has(at(pr, "reason"))) s += "Reason: " + plain(at(pr, "reason")) + ". ";
    if (has(at(r, "kept_input"))) s += "The input graph was kept: " + plain(at(r, "kept_input")) + ". ";
    if (!has(at(pr, "reason")) && !has(at(r, "kept_input"))) s += "The report gives no reason. ";
    s += "The speedups on this page are predicted by " + predicted_by(c);
    std::string known = has(at(pr, "known_error")) ? plain(at(pr, "known_error")) : has(at(at(r, "cost"), "known_error")) ? plain(at(at(r, "cost"), "known_error")) : "";
    if (!known.empty()) s += " (known error: " + known + ")";
    return s + ".</div></section>";
  }
  s += "<p class=\"lead\">Per-round latency of the input and the written file, measured interleaved on <b>" +
       (c.runner.empty() ? std::string("the target") : c.runner) + "</b>.";
  if (!numbers(at(m, "before_samples_ms")).empty() || !numbers(at(m, "after_samples_ms")).empty())
    s += " Each dot is one round; boxes span the quartiles, whiskers reach 1.5&times;IQR.";
  s += "</p>";
  s += "<div class=\"stats\">";
  s += "<div><span class=\"swatch before\"></span>input median <b>" + ms_or_dash(at(m, "before_ms")) + "</b></div>";
  s += "<div><span class=\"swatch after\"></span>output median <b>" + ms_or_dash(at(m, "after_ms")) + "</b></div>";
  if (num(at(m, "speedup"))) {
    s += "<div>speedup <b>" + fmt_x(*num(at(m, "speedup"))) + "</b>";
    std::string ci = ci_text(at(m, "speedup_ci"), at(m, "ci_coverage"));
    if (!ci.empty()) s += " <span class=\"muted\">" + ci + "</span>";
    s += "</div>";
  }
  if (auto acc = boolean(at(m, "accepted"))) {
    s += "<div>" + std::string(*acc ? "<span class=\"good\">accepted</span>" : "<span class=\"bad\">rejected</span>");
    if (num(at(m, "min_lower_bound"))) s += " <span class=\"muted\">(needs CI lower bound &ge; " + fmt_num(*num(at(m, "min_lower_bound"))) + ")</span>";
    s += "</div>";
  }
  s += "</div>";
  s += latency_block("latency-plot", m);

  const json& cands = at(m, "candidates");
  if (cands.is_array() && !cands.empty()) {
    s += "<h3>Candidates</h3><table class=\"rows candidates\"><thead><tr><th>candidate</th><th class=\"num\">rewrites</th>"
         "<th class=\"num\">predicted<br>" + std::string(kPredictedTag) + "</th><th class=\"num\">input median<br>" + kMeasuredTag +
         "</th><th class=\"num\">output median<br>" + kMeasuredTag + "</th><th class=\"num\">speedup<br>" + kMeasuredTag +
         "</th><th>verdict</th></tr></thead><tbody>";
    std::string plots;
    for (size_t i = 0; i < cands.size(); ++i) {
      const json& cd = cands[i];
      std::string verdict = text(at(cd, "verdict"));
      for (const char* key : {"why", "verification_failed"})
        if (has(at(cd, key))) verdict += "<br><span class=\"muted small\">" + plain(at(cd, key)) + "</span>";
      s += "<tr class=\"candidate\"><td>" + text(at(cd, "candidate")) + "</td><td class=\"num\">" + text(at(cd, "steps")) + "</td><td class=\"num\">" +
           ms_or_dash(at(cd, "predicted_ms")) + "</td>" + measured_cell(at(cd, "measured")) + "<td>" + verdict + "</td></tr>";
      const json& dec = at(cd, "measured_decode");
      if (dec.is_object())
        s += "<tr class=\"decode\"><td class=\"indent\">at the " + text(at(dec, "binding"), "short binding") + "</td><td></td><td></td>" + measured_cell(dec) +
             "<td></td></tr>";
      const json& vs = at(cd, "measured_vs_chosen");
      if (vs.is_object())
        s += "<tr class=\"vs-chosen\"><td class=\"indent\">against " + text(at(vs, "against"), "the candidate chosen before") + " at the " +
             text(at(vs, "binding"), "same binding") + "</td><td></td><td></td>" + measured_cell(vs) + "<td></td></tr>";
      const json& cm = at(cd, "measured");
      if (cands.size() > 1 && (!numbers(at(cm, "before_samples_ms")).empty() || !numbers(at(cm, "after_samples_ms")).empty()))
        plots += "<details class=\"more\"><summary>Latency of candidate " + std::to_string(i + 1) + ": " + text(at(cd, "candidate")) +
                 "</summary>" + latency_block("latency-plot-" + std::to_string(i + 1), cm) + "</details>";
    }
    s += "</tbody></table>" + plots;
  }
  return s + "</section>";
}

std::string verification_section(const json& r) {
  const json& v = at(r, "verification");
  std::string s = "<section class=\"card\" id=\"verification\"><h2>Verification</h2>";
  if (!v.is_object()) return s + "<p class=\"muted\">This report has no verification record.</p></section>";
  if (boolean(at(v, "enabled")) == false)
    return s + "<div class=\"banner warn\"><b>Not verified</b> (--no-verify): the written file was not compared with the input.</div></section>";
  if (!has(at(v, "method"))) return s + "<p class=\"muted\">Enabled; no check was recorded (nothing was rewritten).</p></section>";
  auto ok = boolean(at(v, "ok"));
  s += "<p class=\"lead\">The written graph run against the input on seeded random inputs; differences are " + std::string(kComputedTag) +
       ", not timings.</p>";
  s += "<dl class=\"facts\"><dt>Method</dt><dd>" + plain(at(v, "method")) + "</dd>";
  s += "<dt>Result</dt><dd>" + std::string(!ok ? "&mdash;" : *ok ? "<span class=\"good\"><b>ok</b></span>" : "<span class=\"bad\"><b>failed</b></span>") +
       "</dd>";
  if (num(at(v, "max_abs_diff")) || num(at(v, "atol"))) {
    s += "<dt>Max abs diff</dt><dd><b>" + text(at(v, "max_abs_diff")) + "</b> <span class=\"muted\">vs atol " + text(at(v, "atol")) + ", rtol " +
         text(at(v, "rtol")) + "</span>";
    if (has(at(v, "tolerance_note"))) s += " <span class=\"muted\">(" + plain(at(v, "tolerance_note")) + ")</span>";
    s += "</dd>";
  }
  if (has(at(v, "seed"))) s += "<dt>Seed</dt><dd>" + plain(at(v, "seed")) + "</dd>";
  if (has(at(v, "note"))) s += "<dt>Note</dt><dd>" + plain(at(v, "note")) + "</dd>";
  s += "</dl>";
  const json& bindings = at(v, "bindings");
  if (bindings.is_array() && !bindings.empty()) {
    std::string head = "<tr><th>binding</th><th>sizes</th><th>checked</th><th class=\"num\">max abs diff</th><th>note</th></tr>";
    std::vector<std::string> rows;
    for (const auto& b : bindings) {
      auto checked = boolean(at(b, "checked"));
      rows.push_back("<tr class=\"binding\"><td><b>" + text(at(b, "label")) + "</b></td><td><code>" + text(at(b, "sizes"), "") + "</code></td><td>" +
                     (!checked ? "&mdash;" : *checked ? "<span class=\"good\">yes</span>" : "<span class=\"muted\">no</span>") +
                     "</td><td class=\"num\">" + text(at(b, "max_abs_diff")) + "</td><td>" + text(at(b, "note"), "") + "</td></tr>");
    }
    s += "<h3>Bindings of the symbolic dims</h3>" + folded_table("rows bindings", head, rows, 20, "bindings");
  }
  return s + "</section>";
}

// `rlflow compare`'s table and plot: each tool's speedup over the input at each timed binding (a
// pair of bars per right tool), and every tool's status, so that a wrong file is seen as wrong.
std::string comparison_section(const json& r) {
  const json& c = at(r, "comparison");
  if (!c.is_object()) return "";
  std::string s = "<section class=\"card\" id=\"comparison\"><h2>Against the peer tools " + std::string(kMeasuredTag) + "</h2>";
  s += "<p class=\"lead\">Each tool rewrote the same input; every file was checked against it in onnxruntime at " +
       std::to_string(at(c, "checked_at").is_array() ? at(c, "checked_at").size() : 0) +
       " bindings of its symbolic dims, and the right ones were timed interleaved in " + text(at(c, "runner")) +
       ", paired by round with the input.</p>";
  const json& timed = at(c, "timed");
  std::vector<std::string> labels;
  if (timed.is_array())
    for (const auto& t : timed) labels.push_back(text(at(t, "label"), "?"));
  std::vector<PairRow> rows;
  const json& tools = at(c, "tools");
  if (tools.is_array() && !labels.empty())
    for (const auto& t : tools) {
      const json& tm = at(t, "timings");
      if (!tm.is_array() || tm.empty()) continue;
      PairRow row{text(at(t, "name")), num(at(tm[0], "speedup")).value_or(0), tm.size() > 1 ? num(at(tm[1], "speedup")).value_or(0) : 0};
      rows.push_back(row);
    }
  if (!rows.empty())
    s += paired_bars("comparison-plot", rows, labels[0], labels.size() > 1 ? labels[1] : "", [](double v) { return v > 0 ? fmt_x(v) : std::string(); },
                     "speedup over the input of each tool's file");
  std::string head = "<tr><th>tool</th><th>version</th><th>status</th><th class=\"num\">nodes</th><th class=\"num\">seconds</th>";
  for (const auto& l : labels) head += "<th class=\"num\">" + esc(l) + "</th>";
  head += "<th>note</th></tr>";
  std::vector<std::string> trs;
  if (tools.is_array())
    for (const auto& t : tools) {
      const std::string status = text(at(t, "status"));
      const std::string cls = status == "ok" ? "good" : status == "wrong" ? "bad" : "muted";
      std::string tr = "<tr><td><b>" + text(at(t, "name")) + "</b></td><td>" + text(at(t, "version"), "") + "</td><td><span class=\"" + cls +
                       "\">" + status + "</span></td><td class=\"num\">" + text(at(t, "nodes")) + "</td><td class=\"num\">" +
                       (num(at(t, "seconds")) ? fmt_num(*num(at(t, "seconds")), 3) : "&mdash;") + "</td>";
      const json& tm = at(t, "timings");
      for (size_t k = 0; k < labels.size(); ++k) {
        if (!tm.is_array() || k >= tm.size()) {
          tr += "<td class=\"num\">&mdash;</td>";
          continue;
        }
        const json& ci = at(tm[k], "speedup_ci");
        tr += "<td class=\"num\">" + (num(at(tm[k], "speedup")) ? fmt_x(*num(at(tm[k], "speedup"))) : "&mdash;") +
              (ci.is_array() && ci.size() == 2 ? " <span class=\"muted\">[" + fmt_num(num(ci[0]).value_or(0)) + ", " + fmt_num(num(ci[1]).value_or(0)) + "]</span>" : "") +
              "</td>";
      }
      trs.push_back(tr + "<td>" + text(at(t, "error"), "") + "</td></tr>");
    }
  s += folded_table("rows comparison", head, trs, 20, "tools");
  const json& vs = at(c, "rlflow_vs_fastest_peer");
  if (vs.is_array())
    for (const auto& v : vs)
      if (has(at(v, "peer")))
        s += "<p>rlflow over the fastest right peer at " + text(at(v, "label")) + " (" + text(at(v, "peer")) + "): <b>" +
             fmt_x(num(at(v, "speedup")).value_or(0)) + "</b> <span class=\"muted\">" + ci_text(at(v, "speedup_ci"), json()) + "</span></p>";
  const json& fails = at(c, "input_fails");
  if (fails.is_array())
    for (const auto& f : fails) s += "<p class=\"muted\">" + plain(f) + "</p>";
  return s + "</section>";
}

std::string footer(const json& r) {
  const json& t = at(r, "time_s");
  std::string s = "<footer>";
  if (num(at(t, "total"))) {
    s += "rlflow took <b>" + fmt_s(*num(at(t, "total"))) + "</b> (wall clock of rlflow itself";
    for (const char* k : {"import", "search", "export", "verify", "measure"})
      if (num(at(t, k))) s += std::string(", ") + k + " " + fmt_s(*num(at(t, k)));
    s += ").<br>";
  } else if (has(t)) {
    s += "Time: " + plain(t) + "<br>";
  }
  return s + "Generated by <code>rlflow optimise --report</code>. A self-contained page: no network, no scripts.</footer>";
}

const char* kStyle = R"CSS(
:root{--ink:#0f172a;--muted:#64748b;--line:#e2e8f0;--bg:#f4f6f9;--card:#fff;--before:#8a9ab2;--before-ink:#475569;--after:#0d9488;--after-ink:#0f766e;--good:#15803d;--bad:#b91c1c}
*{box-sizing:border-box}
html{-webkit-text-size-adjust:100%}
body{margin:0;background:var(--bg);color:var(--ink);font:14px/1.55 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,"DejaVu Sans",sans-serif}
main{max-width:1100px;margin:0 auto;padding:28px 32px 36px}
code{font:12.5px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,"DejaVu Sans Mono",monospace;background:#eef2f6;border-radius:4px;padding:1px 5px;word-break:break-all}
header.top .eyebrow{font-size:11.5px;font-weight:600;letter-spacing:.09em;text-transform:uppercase;color:var(--muted)}
header.top h1{font-size:20px;font-weight:650;margin:6px 0 0;line-height:1.6}
header.top h1 code{font-size:17px;background:#fff;border:1px solid var(--line);padding:2px 8px}
.arrow{color:var(--muted);margin:0 4px}
nav.toc{margin:12px 0 0;font-size:13px}
nav.toc a{color:var(--after-ink);text-decoration:none;margin-right:16px}
nav.toc a:hover{text-decoration:underline}
h2{font-size:16.5px;margin:0 0 6px;display:flex;align-items:center;gap:10px}
h3{font-size:13px;text-transform:uppercase;letter-spacing:.06em;color:var(--muted);margin:22px 0 8px}
.card{overflow-x:auto;background:var(--card);border:1px solid var(--line);border-radius:12px;padding:20px 24px;margin:16px 0;box-shadow:0 1px 2px rgba(15,23,42,.04)}
.lead{color:#334155;margin:0 0 14px}
.muted{color:var(--muted)}.small{font-size:12.5px}
.good{color:var(--good)}.bad{color:var(--bad)}
.kpis{display:grid;grid-template-columns:repeat(4,minmax(0,1fr));gap:14px;margin:20px 0 4px}
.kpi{background:var(--card);border:1px solid var(--line);border-top:3px solid #cbd5e1;border-radius:12px;padding:12px 16px 14px}
.kpi.accent-m{border-top-color:#16a34a}.kpi.accent-p{border-top-color:#7c3aed}.kpi.accent-bad{border-top-color:var(--bad)}.kpi.accent-warn{border-top-color:#d97706}
.kpi .label{font-size:11.5px;font-weight:600;color:var(--muted);text-transform:uppercase;letter-spacing:.06em}
.kpi .value{font-size:26px;font-weight:650;margin:2px 0 4px;font-variant-numeric:tabular-nums;letter-spacing:-.01em}
.kpi .sub{font-size:12px;color:var(--muted);line-height:1.5}
dl.facts{display:grid;grid-template-columns:140px 1fr;gap:6px 18px;margin:8px 0 0}
dl.facts dt{color:var(--muted)}
dl.facts dd{margin:0;min-width:0;overflow-wrap:anywhere}
.provenance{display:grid;grid-template-columns:1fr 1fr;gap:14px;margin-top:18px}
.prov{border-radius:8px;padding:12px 16px;font-size:13.5px}
.prov.m{background:#f0fdf4;border:1px solid #bbf7d0}
.prov.p{background:#f5f3ff;border:1px solid #ddd6fe}
.prov-title{font-weight:650;margin-bottom:4px}
.tag{display:inline-block;font-size:10px;font-weight:700;text-transform:uppercase;letter-spacing:.06em;padding:1px 7px;border-radius:999px;line-height:16px;vertical-align:1px;white-space:nowrap}
.tag.m{background:#dcfce7;color:#166534}.tag.p{background:#ede9fe;color:#5b21b6}.tag.c{background:#eef2f6;color:#475569}
.banner{border-radius:8px;padding:12px 16px;margin:12px 0}
.banner.warn{background:#fffbeb;border:1px solid #fde68a}
.banner.bad{background:#fef2f2;border:1px solid #fecaca;color:#7f1d1d}
table{border-collapse:collapse;width:100%;font-variant-numeric:tabular-nums;font-size:13px}
th,td{padding:6px 10px;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
thead th{font-size:11.5px;font-weight:600;color:var(--muted);text-transform:uppercase;letter-spacing:.04em;border-bottom:1px solid #cbd5e1;background:#f8fafc;white-space:nowrap}
tbody th{font-weight:500}
.num{text-align:right;white-space:nowrap}
tr.fell td:last-child{color:var(--good)}tr.rose td:last-child{color:var(--bad)}
td.indent{padding-left:28px;color:var(--muted)}
ul.nodes{list-style:none;margin:0;padding:0}
ul.nodes li{margin:1px 0}
details.nodes ul.nodes{margin-top:4px;max-height:260px;overflow:auto}
.node-name{color:#334155;overflow-wrap:anywhere}
code.op{background:#e0f2f1;color:#115e59;white-space:nowrap;word-break:normal}
details summary{cursor:pointer;color:var(--after-ink)}
details.more{margin-top:10px}
details.more>summary{font-size:13px;font-weight:600}
.split{display:grid;grid-template-columns:minmax(260px,2fr) 3fr;gap:24px;align-items:start}
.stats{display:flex;flex-wrap:wrap;gap:8px 28px;margin:0 0 10px;font-size:13.5px}
.swatch{display:inline-block;width:10px;height:10px;border-radius:50%;margin-right:7px}
.swatch.before{background:var(--before)}.swatch.after{background:var(--after)}
svg.chart{display:block;width:100%;height:auto;margin:6px 0}
svg text{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Arial,"DejaVu Sans",sans-serif;font-size:12px;fill:#334155}
svg text.value,svg text.tick{font-size:11px;fill:#475569}
svg text.axis-title{font-size:11.5px;fill:var(--muted)}
svg text.row-label{font-size:12.5px;fill:var(--ink)}
svg text.median-label{font-size:11px;font-weight:600;fill:#334155}
svg .stripe{fill:#f8fafc}
svg .band{fill:#f8fafc}
svg .axis{stroke:#94a3b8;stroke-width:1}
svg .grid{stroke:#e2e8f0;stroke-width:1}
svg .bar.before,svg .dot.before{fill:var(--before)}
svg .bar.after,svg .dot.after{fill:var(--after)}
svg .dot{fill-opacity:.75}
svg .box{fill-opacity:.10;stroke-width:1.5}
svg .box.before{fill:var(--before);stroke:var(--before-ink)}svg .box.after{fill:var(--after);stroke:var(--after-ink)}
svg .whisker{stroke-width:1.3}
svg .whisker.before{stroke:var(--before-ink)}svg .whisker.after{stroke:var(--after-ink)}
svg .median{stroke-width:3}
svg .median.before{stroke:var(--before-ink)}svg .median.after{stroke:var(--after-ink)}
svg .line{fill:none;stroke:#7c3aed;stroke-width:2}
svg .point{fill:#7c3aed}
footer{color:var(--muted);font-size:12px;text-align:center;margin:26px 0 0;line-height:1.7}
@media (max-width:800px){.kpis{grid-template-columns:repeat(2,minmax(0,1fr))}.split,.provenance{grid-template-columns:1fr}main{padding:18px}}
@media print{body{background:#fff}.card,.kpi{box-shadow:none;break-inside:avoid}details{display:block}}
)CSS";

}  // namespace

std::string report_html(const nlohmann::json& report) {
  Context c;
  const json& cost = at(report, "cost");
  const json& m = at(report, "measured");
  c.cost_model = has(at(cost, "model"))                         ? plain(at(cost, "model"))
                 : has(at(at(report, "target_info"), "cost_model")) ? plain(at(at(report, "target_info"), "cost_model"))
                 : has(at(at(report, "predicted"), "cost_model"))   ? plain(at(at(report, "predicted"), "cost_model"))
                                                                    : "";
  c.measured = m.is_object();
  c.runner = has(at(m, "runner")) ? plain(at(m, "runner")) : has(at(at(report, "target_info"), "runtime")) ? plain(at(at(report, "target_info"), "runtime")) : "";

  std::string title = has(at(report, "model")) ? plain(at(report, "model")) : "model";
  std::string s = "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">";
  s += "<title>rlflow report: " + title + "</title><style>" + kStyle + "</style></head><body><main>";
  s += header_section(report, c);
  s += histogram_section(report);
  s += rewrites_section(report, c);
  s += cost_section(report, c);
  s += latency_section(report, c);
  s += verification_section(report);
  s += comparison_section(report);
  s += footer(report);
  return s + "</main></body></html>\n";
}

}  // namespace rlflow::pipeline
