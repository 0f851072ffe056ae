#pragma once
// A search's report as JSON: what `optimise --json` prints under "search_report".
#include <nlohmann/json.hpp>

#include "rlflow/search/optimizer.h"

namespace rlflow::search {

// Refusals by reason, the non-zero ones (rules::Rejection names).
nlohmann::json rejections_json(const rules::RejectionCounts& counts);

// One phase of a combined search: {name, from ("input" or the index of the phase it started from),
// ran, returned, initial_ms, best_ms (null when it did not run), steps, seconds, stop_reason}.
nlohmann::json phase_json(const Phase& p);

// Every counter of the result's report, its stop reason, and its phases (an empty array for a
// single strategy).
nlohmann::json report_json(const Result& r);

}  // namespace rlflow::search
