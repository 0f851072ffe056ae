#pragma once
// `optimise --report report.html` and the Python package's Result.report.to_html(): one
// self-contained HTML page (no network) drawn from the optimise report's JSON (OptimiseReport::to_json).
#include <string>

#include <nlohmann/json.hpp>

namespace rlflow::pipeline {

std::string report_html(const nlohmann::json& report);

}  // namespace rlflow::pipeline
