#include "rlflow/pipeline/summary.h"

#include <set>
#include <string>

namespace rlflow::pipeline {

using json = nlohmann::json;

json summary_json(const ir::GraphSummary& s) {
  return {{"ops", s.num_ops}, {"op_counts", s.op_counts}, {"parameters", s.num_parameters}, {"flops", s.flops},
          {"opaque_ops", s.opaque_ops}};
}

void print_op_table(std::FILE* out, const ir::GraphSummary& before, const ir::GraphSummary* after) {
  std::set<std::string> ops;
  for (const auto& [k, v] : before.op_counts) ops.insert(k);
  if (after)
    for (const auto& [k, v] : after->op_counts) ops.insert(k);
  std::fprintf(out, "  %-22s %8s%s\n", "op", after ? "before" : "count", after ? "    after" : "");
  for (const auto& op : ops) {
    auto b = before.op_counts.count(op) ? before.op_counts.at(op) : 0;
    if (after) {
      auto a = after->op_counts.count(op) ? after->op_counts.at(op) : 0;
      std::fprintf(out, "  %-22s %8lld %8lld\n", op.c_str(), static_cast<long long>(b), static_cast<long long>(a));
    } else {
      std::fprintf(out, "  %-22s %8lld\n", op.c_str(), static_cast<long long>(b));
    }
  }
  if (after)
    std::fprintf(out, "  %-22s %8lld %8lld\n", "total", static_cast<long long>(before.num_ops), static_cast<long long>(after->num_ops));
  else
    std::fprintf(out, "  %-22s %8lld\n", "total", static_cast<long long>(before.num_ops));
}

}  // namespace rlflow::pipeline
