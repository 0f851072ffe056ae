#include "coster.h"

namespace rlflow::search::detail {

int64_t approx_graph_bytes(const ir::Graph& g) {
  // Heap blocks carry ~16 bytes of allocator overhead each; parameters hold a few small vectors.
  constexpr int64_t kBlock = 16, kParams = 160;
  int64_t bytes = static_cast<int64_t>(sizeof(ir::Graph));
  for (const auto& n : g.nodes()) {
    bytes += static_cast<int64_t>(sizeof(ir::Node)) + kParams;
    bytes += static_cast<int64_t>(n.inputs.size() * sizeof(ir::ValueRef)) + kBlock;
    bytes += static_cast<int64_t>(n.outputs.size() * sizeof(ir::TensorType)) + kBlock;
    for (const auto& t : n.outputs) bytes += static_cast<int64_t>(t.shape.size() * 8) + kBlock;
    if (n.name.size() > 15) bytes += static_cast<int64_t>(n.name.size()) + kBlock;
    for (const auto& s : n.output_names) bytes += static_cast<int64_t>(sizeof(std::string) + (s.size() > 15 ? s.size() + kBlock : 0));
  }
  return bytes;
}

}  // namespace rlflow::search::detail
