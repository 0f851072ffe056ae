#pragma once
// Cost of a graph as TASO defines it: the sum of the costs of its nodes. A node whose inputs are
// all constant costs nothing (it folds at export); graph inputs and weights cost nothing.
// This header includes neither torch nor CUDA.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "rlflow/ir/graph.h"

namespace rlflow::cost {

// Everything a node's run time depends on: op kind, parameters, input and output types.
struct OpSignature {
  ir::OpKind kind = ir::OpKind::kOpaque;
  ir::OpParams params;
  std::vector<ir::TensorType> inputs, outputs;
  std::vector<bool> input_is_constant;  // weights may be pre-transformed (e.g. pre-packed)

  static OpSignature of(const ir::Graph& g, ir::NodeId id);
  // The same, with constness precomputed by constant_nodes(g) (one pass for a whole graph).
  static OpSignature of(const ir::Graph& g, ir::NodeId id, const std::vector<bool>& constant);
  uint64_t hash() const;  // stable across runs: the cache key together with the device
  // of(g, id, constant).hash(), without building the signature (no allocation): memo lookups.
  static uint64_t hash_of(const ir::Graph& g, ir::NodeId id, const std::vector<bool>& constant);
  std::string str() const;
  bool operator==(const OpSignature&) const = default;
};

class CostModel {
 public:
  virtual ~CostModel() = default;
  // Milliseconds for one run of the op.
  virtual Expected<double> op_cost(const OpSignature& sig) = 0;
  // Identifies the device and backend; cached costs are only reused under the same fingerprint.
  virtual std::string device_fingerprint() const = 0;
  virtual std::string name() const = 0;
  // Nodes the target runtime fuses into their producer on its own; they cost nothing under this
  // model, so a rewrite that only does what the runtime does anyway is worth nothing. Indexed by
  // node id; empty (the default) when the runtime runs every node as its own kernel.
  virtual std::vector<bool> runtime_fused(const ir::Graph& g, const std::vector<bool>& constant) const { return {}; }
  // Whether the runtime runs activation `a` inside a Conv's kernel, as its epilogue. A file carries a
  // Conv's activation as a node of its own (ONNX has no fused Conv), so node_costs prices a Conv the
  // IR fused with `a` as the runtime runs the written file: one kernel where this is true (a Conv
  // followed by an `a` that runtime_fused folds into it is priced the same), two otherwise.
  virtual bool fuses_conv_activation(ir::Activation a) const { return false; }
  // What is known about how far this model's predictions are from measured whole-graph time, in
  // words, for reports (each backend describes itself; the default fits a measuring backend).
  virtual std::string known_error() const {
    return "measured per-op timings (" + device_fingerprint() + "); their sum is not a whole-graph measurement";
  }
};

// The base of every cost model that wraps another (a cache, a lock): each virtual forwards to the
// wrapped model unless the wrapper overrides it, so a wrapper cannot drop one. (A lock that did not
// forward runtime_fused once made RL training price onnxruntime's fused nodes at full cost while
// `optimise --search rl` priced them at zero.) A new virtual on CostModel gets its forward here.
class ForwardingCostModel : public CostModel {
 public:
  explicit ForwardingCostModel(CostModel& inner) : inner_(&inner) {}
  Expected<double> op_cost(const OpSignature& sig) override { return inner_->op_cost(sig); }
  std::string device_fingerprint() const override { return inner_->device_fingerprint(); }
  std::string name() const override { return inner_->name(); }
  std::vector<bool> runtime_fused(const ir::Graph& g, const std::vector<bool>& constant) const override {
    return inner_->runtime_fused(g, constant);
  }
  bool fuses_conv_activation(ir::Activation a) const override { return inner_->fuses_conv_activation(a); }
  std::string known_error() const override { return inner_->known_error(); }
  CostModel& inner() const { return *inner_; }

 protected:
  CostModel* inner_;
};

struct NodeCost {
  ir::NodeId node;
  double ms = 0;
  bool folded = false;  // all inputs constant: costs nothing
  bool opaque = false;  // fixed cost: no rewrite touches it, so it cancels in every comparison
  bool fused = false;   // the target runtime fuses it into its producer: costs nothing
};

// Constness is ir::constant_nodes: a constant node folds at export and costs nothing.
using ir::constant_nodes;

// What onnxruntime's CPU graph optimisations (ORT_ENABLE_ALL) fuse into a producer, by node id:
// an activation (Relu, Clip, Sigmoid, Tanh) after a Conv or Gemm without one, and a
// BatchNormalization, or an Add/Mul of a per-channel constant, after a Conv (ConvBNFusion,
// ConvAddFusion, ConvMulFusion, ConvActivationFusion, GemmActivationFusion; HardSigmoid fuses too);
// and for transformers, a bias Add before a Gelu (BiasGeluFusion), a residual Add, and a bias Add
// before it, before a LayerNorm (SkipLayerNormFusion), and a scalar Mul/Div on a MatMul's output or
// input (MatMulScaleFusion); and the RMSNorm chain but its scale Mul (SimplifiedLayerNormFusion).
// Only when the
// producer's output has no other reader and is not a graph output, as onnxruntime requires.
std::vector<bool> onnxruntime_fused_nodes(const ir::Graph& g, const std::vector<bool>& constant);

// What rlflow's cuDNN graph runner (bench --target gpu; the h100 and gpu targets) fuses by itself: a
// Relu that is the only reader of a Conv without an activation (the Conv's output not a graph
// output) runs as that Conv's epilogue (cudnnConvolutionBiasActivationForward). By node id: the Relus.
std::vector<bool> cudnn_runner_fused_nodes(const ir::Graph& g, const std::vector<bool>& constant);
// The graph that runner runs for `g`: each Relu of cudnn_runner_fused_nodes folded into its Conv
// (the Conv carries the activation, the Relu is gone). prepare_graph_gpu runs this.
ir::Graph cudnn_runner_graph(const ir::Graph& g);

// Called after each costed node with (done, total); lets a CLI show progress for slow backends.
using CostProgress = std::function<void(size_t done, size_t total)>;

// Per-node costs of every op node (inputs and weights are skipped), in node order. Every cost is
// checked (finite, >= 0) and an error names the node.
Expected<std::vector<NodeCost>> node_costs(const ir::Graph& g, CostModel& model, const CostProgress& progress = {});
// The same accounting with op costs from `price` (e.g. a memo in front of `model`), which gets
// the node and the graph's constness (OpSignature::of / hash_of build or key its signature).
using OpPricer = std::function<Expected<double>(const ir::Graph& g, ir::NodeId id, const std::vector<bool>& constant)>;
Expected<std::vector<NodeCost>> node_costs(const ir::Graph& g, CostModel& model, const OpPricer& price,
                                           const CostProgress& progress = {});
// The sum of node costs, in milliseconds.
Expected<double> graph_cost(const ir::Graph& g, CostModel& model);

// Fixed cost given to opaque nodes, except those that only re-describe their input (see
// opaque_is_view), which cost nothing, as their modelled forms do.
inline constexpr double kOpaqueCostMs = 0.01;
// An opaque node that is a view in every runtime: Reshape, Flatten, Squeeze, Unsqueeze or Identity of
// the default domain (kept opaque when its shape depends on a dynamic axis). A rewrite of a dynamic
// model writes its new Reshapes relative to their input, and they stay opaque when re-imported: at
// the fixed cost they made every such rewrite look slower once written.
bool opaque_is_view(const ir::Node& n);

// Shape arithmetic: Shape and Size, and the small integer ops computed only from them and from
// constants (the Gather, Slice and Concat that build a Reshape's target). Every runtime computes
// these on the host from tensor metadata, without a kernel on the device, so they cost nothing:
// a dynamic model's rewrite that reads a size at run time is not charged a kernel for it.
inline constexpr int64_t kHostShapeElements = 16;
std::vector<bool> host_shape_nodes(const ir::Graph& g, const std::vector<bool>& constant);

}  // namespace rlflow::cost
