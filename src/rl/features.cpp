// Graph featurisation. Every feature is scaled to roughly [0, 1] so graphs of different sizes
// and devices look alike to one network.
//
// Node (node_feature_dim() = op_vocab_size() + 23):
//   op kind one-hot over op_vocabulary() | fused activation one-hot (4) |
//   kernel h/7, kernel w/7, stride h/4, stride w/4, any padding, log2(group)/10, dilated |
//   output: rank/6, log2(1+d)/16 of the last four dims (right-aligned), log2(1+numel)/32, outputs/4 |
//   cost share (node cost / initial graph cost * 10), log1p(node cost in us)/10 |
//   folds at export (all inputs constant), is a graph output, log2(1+consumers)/4
// Edge (edge_feature_dim() = 9): the tensor on the edge: rank/6, log2(1+d)/16 of the last four
//   dims, log2(1+numel)/32, constant, consumer input slot/4, producer output index/4
// The one-hot's slots are an append-only list of op names, not the OpKind enum: a network records how
// many slots it was trained with (its op vocabulary), and nets::fit_node_features folds the slots of
// ops added since into its Opaque slot, so adding an op leaves every trained agent's input as it was.
// Global (global_feature_dim() = 4): cost / initial cost, log10(initial cost in us)/6,
//   step / max steps, log2(1+nodes)/12
#include <algorithm>
#include <array>
#include <cmath>

#include "rlflow/cost/cost_model.h"
#include "rlflow/rl/observation.h"

namespace rlflow::rl {

namespace {

constexpr int kNodeExtra = 4 + 7 + 7 + 2 + 3;

// The op one-hot: slot k is OpKind k (the op table's order, src/ir/op.cpp; kinds are only ever
// appended, so a slot's meaning is fixed once an agent has been trained with it), and the slots
// past the last kind are held for kinds to come, so that adding an op changes no network's shape
// and no seeded training. The first kLegacyOpVocab are the OpKinds of the time before checkpoints
// recorded their vocabulary; an agent trained with fewer slots folds the newer ops into its Opaque
// slot (nets::fit_node_features). More kinds than slots: raise kVocab (older agents still load).
constexpr int kVocab = 64;
static_assert(ir::kNumOpKinds <= kVocab && kLegacyOpVocab <= kVocab);

constexpr int kEdgeDim = 9;
constexpr int kGlobalDim = 4;

float lg(double v) { return static_cast<float>(std::log2(1.0 + std::max(0.0, v))); }

void shape_features(const ir::Shape& s, float* out) {
  out[0] = static_cast<float>(s.size()) / 6.f;
  for (int k = 0; k < 4; ++k) {
    const int idx = static_cast<int>(s.size()) - 4 + k;
    out[1 + k] = idx >= 0 ? lg(static_cast<double>(s[static_cast<size_t>(idx)])) / 16.f : 0.f;
  }
  out[5] = lg(static_cast<double>(ir::numel(s))) / 32.f;
}

void param_features(const ir::Graph& g, const ir::Node& n, float* out) {
  std::fill(out, out + 7, 0.f);
  auto spatial = [&](const std::vector<int64_t>& kernel, const std::vector<int64_t>& strides, const std::vector<int64_t>& pads) {
    if (kernel.size() >= 1) out[0] = static_cast<float>(kernel[0]) / 7.f;
    if (kernel.size() >= 2) out[1] = static_cast<float>(kernel[1]) / 7.f;
    if (strides.size() >= 1) out[2] = static_cast<float>(strides[0]) / 4.f;
    if (strides.size() >= 2) out[3] = static_cast<float>(strides[1]) / 4.f;
    out[4] = std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p != 0; }) ? 1.f : 0.f;
  };
  if (const auto* c = std::get_if<ir::ConvParams>(&n.params)) {
    std::vector<int64_t> kernel;
    if (n.inputs.size() >= 2) {
      const auto& w = g.type(n.inputs[1]).shape;
      kernel.assign(w.begin() + std::min<size_t>(2, w.size()), w.end());
    }
    spatial(kernel, c->strides, c->pads);
    out[5] = lg(static_cast<double>(c->group) - 1.0) / 10.f;
    out[6] = std::any_of(c->dilations.begin(), c->dilations.end(), [](int64_t d) { return d != 1; }) ? 1.f : 0.f;
  } else if (const auto* p = std::get_if<ir::PoolParams>(&n.params)) {
    spatial(p->kernel, p->strides, p->pads);
  } else if (const auto* e = std::get_if<ir::EnlargeParams>(&n.params)) {
    spatial(e->kernel, {}, {});
  }
}

}  // namespace

int op_vocab_size() { return kVocab; }
// A held slot (past the last kind) has no name yet.
std::string_view op_vocab_name(int slot) { return slot >= 0 && slot < ir::kNumOpKinds ? ir::op_name(static_cast<ir::OpKind>(slot)) : std::string_view{}; }
int op_feature_slot(ir::OpKind k) { return static_cast<int>(k); }
int node_feature_dim(int op_vocab) { return op_vocab + kNodeExtra; }
int node_feature_dim() { return node_feature_dim(kVocab); }
int edge_feature_dim() { return kEdgeDim; }
int global_feature_dim() { return kGlobalDim; }

GraphFeatures featurize(const ir::Graph& g, const std::vector<double>& node_cost, double cost, double cost0,
                        double step_fraction) {
  GraphFeatures f;
  const int nd = node_feature_dim();
  f.num_nodes = static_cast<int32_t>(g.size());
  f.nodes.assign(static_cast<size_t>(f.num_nodes) * nd, 0.f);
  const auto constant = ir::constant_nodes(g);
  std::vector<int> consumers(g.size(), 0);
  std::vector<uint8_t> is_output(g.size(), 0);
  for (const auto& o : g.outputs()) is_output[static_cast<size_t>(o.value.node)] = 1;
  for (size_t i = 0; i < g.size(); ++i) {
    const auto& n = g.node(static_cast<ir::NodeId>(i));
    for (size_t s = 0; s < n.inputs.size(); ++s) {
      const auto& in = n.inputs[s];
      ++consumers[static_cast<size_t>(in.node)];
      f.src.push_back(in.node);
      f.dst.push_back(static_cast<int32_t>(i));
      float e[kEdgeDim];
      shape_features(g.type(in).shape, e);
      e[6] = constant[static_cast<size_t>(in.node)] ? 1.f : 0.f;
      e[7] = static_cast<float>(s) / 4.f;
      e[8] = static_cast<float>(in.index) / 4.f;
      f.edges.insert(f.edges.end(), e, e + kEdgeDim);
    }
  }
  f.num_edges = static_cast<int32_t>(f.src.size());
  const double c0 = cost0 > 0 ? cost0 : 1.0;
  for (size_t i = 0; i < g.size(); ++i) {
    const auto& n = g.node(static_cast<ir::NodeId>(i));
    float* x = &f.nodes[i * static_cast<size_t>(nd)];
    x[op_feature_slot(n.kind)] = 1.f;
    float* r = x + kVocab;
    if (const auto* c = std::get_if<ir::ConvParams>(&n.params)) r[static_cast<int>(c->act)] = 1.f;
    param_features(g, n, r + 4);
    if (!n.outputs.empty()) shape_features(n.outputs[0].shape, r + 11);
    r[17] = static_cast<float>(n.outputs.size()) / 4.f;
    const double nc = i < node_cost.size() ? node_cost[i] : 0.0;
    r[18] = static_cast<float>(nc / c0 * 10.0);
    r[19] = static_cast<float>(std::log1p(nc * 1e3) / 10.0);
    r[20] = constant[i] ? 1.f : 0.f;
    r[21] = is_output[i] ? 1.f : 0.f;
    r[22] = lg(consumers[i]) / 4.f;
  }
  f.global = {static_cast<float>(cost / c0), static_cast<float>(std::log10(1.0 + c0 * 1e3) / 6.0),
              static_cast<float>(step_fraction), lg(static_cast<double>(g.size())) / 12.f};
  return f;
}

bool Observation::valid(int xfer, int location) const {
  if (xfer < 0 || xfer >= static_cast<int>(xfer_mask.size()) || !xfer_mask[static_cast<size_t>(xfer)]) return false;
  if (xfer == num_xfers()) return true;  // NO-OP takes no location
  const auto& v = location_valid[static_cast<size_t>(xfer)];
  return location >= 0 && location < static_cast<int>(v.size()) && v[static_cast<size_t>(location)];
}

std::vector<uint8_t> Observation::location_mask(int xfer, size_t L) const {
  std::vector<uint8_t> m(L, 0);
  if (xfer < 0 || xfer >= num_xfers()) return m;
  const auto& v = location_valid[static_cast<size_t>(xfer)];
  for (size_t l = 0; l < std::min(L, v.size()); ++l) m[l] = v[l];
  return m;
}

}  // namespace rlflow::rl
