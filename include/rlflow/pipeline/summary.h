#pragma once
// A graph's summary as reports show it: JSON, and an op table with an optional "after" column.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "rlflow/ir/summary.h"

namespace rlflow::pipeline {

nlohmann::json summary_json(const ir::GraphSummary& s);
void print_op_table(std::FILE* out, const ir::GraphSummary& before, const ir::GraphSummary* after);

}  // namespace rlflow::pipeline
