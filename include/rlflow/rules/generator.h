#pragma once
// The rule generator (TASO's idea, rlflow's code): enumerate every small operator graph over a
// fixed set of variables, fingerprint each with an exact integer interpreter, pair graphs whose
// fingerprints are equal, turn each pair into a Rule with symbolic shape conditions, keep the rules
// the float64 reference executor confirms on several shape instantiations, and prune the trivial
// and the duplicate ones.
//
//   World (variables, op set) ──enumerate──▶ Enumeration (graphs + fingerprints)
//     ──candidate_pairs──▶ (a, b) ──direct──▶ Directed ──to_rule──▶ Rule ──verify_numerically──▶ ...
//
// Pieces live in src/rules/generator_{interp,enum,convert,prune}.cpp; generator.cpp runs the
// pipeline.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rlflow/rules/rule.h"

namespace rlflow::rules::gen {

// ---------------------------------------------------------------------------------------------
// Integer interpreter (generator_interp.cpp). Exact int64 arithmetic with two's-complement
// wrap-around, so two graphs either agree bit for bit or they do not.

struct IntTensor {
  ir::Shape shape;
  std::vector<int64_t> data;
  uint64_t fingerprint() const;  // shape and contents
};

// One op on integer tensors. Unsupported ops, parameters or shapes are errors.
Expected<std::vector<IntTensor>> eval_int(ir::OpKind kind, const ir::OpParams& params,
                                          const std::vector<const IntTensor*>& inputs);

// AveragePool is computed as  window_sum * (avg_pool_scale(kernel) / elements in the window),
// i.e. exactly avg_pool_scale(kernel) times the real average (36 for 3x3); kAvgPoolKernel
// constants carry the same factor, so graphs that average the same way agree.
int64_t avg_pool_scale(const std::vector<int64_t>& kernel);

// ---------------------------------------------------------------------------------------------
// Worlds: the variables graphs are built over and the ops that may be used (generator_enum.cpp).

struct VarSpec {
  std::string name;
  ir::Shape shape;
  std::vector<bool> fixed;   // per dim: a literal in every rule (kernel sizes, broadcast 1s)
  bool constant = false;     // a weight: rules require a Weight node there
  bool positive = false;     // test data must be positive (BatchNorm's variance)
  bool operand = true;       // false: read only as a fixed operand of one op (BatchNorm's s, b, m, v)
  int symmetry = -1;         // interchangeable variables (x, y) share a class; -1: none
};

struct ConstSpec {
  ir::ConstantParams params;
  std::vector<bool> fixed;   // per dim, as for variables
};

struct OpSet {
  bool matmul = false, add = false, mul = false, relu = false, scalar_mul = false;
  bool max_pool = false, avg_pool = false, enlarge = false, batch_norm = false;
  std::vector<ir::Activation> conv_acts;  // empty: no Conv; else Conv with each fused activation
  bool conv_bias = false;                 // also Conv with a bias (any weight vector that fits)
  int64_t max_kernel = 3;                 // Conv kernels up to this size, 'same' padding, stride 1
  std::vector<int64_t> pool_kernel = {3, 3};
  std::vector<int64_t> enlarge_to = {3, 3};
  std::vector<std::pair<int64_t, std::vector<int64_t>>> concat_axes;             // rank -> axes
  std::vector<std::pair<int64_t, std::vector<std::vector<int64_t>>>> transposes;  // rank -> perms
  bool transpose_constants = false;       // also transpose weights
  std::vector<ConstSpec> constants;       // Constant ops (no inputs)
  double scalar = 3.0;                    // ScalarMul's value while enumerating (an integer)
  std::vector<int> bn_params;             // BatchNorm's scale, bias, mean, var (variable indices)
};

struct World {
  std::string name;
  std::vector<VarSpec> vars;
  OpSet ops;
  int64_t value_range = 6;  // integer inputs are uniform in [-value_range, value_range]
};

// Convolutions: x, y [2,4,5,7]; 3x3, 1x1 and 1x3 kernels; conv biases; a broadcast bias; BatchNorm.
World conv_world();
// Matrix products: x, y [2,5,4]; weights w1..w3 [4,4]; biases b1, b2 [4].
World matmul_world();
std::vector<World> default_worlds();

// Seeded integer values of every variable.
std::vector<IntTensor> world_values(const World& w, uint64_t seed);

// ---------------------------------------------------------------------------------------------
// Enumeration (generator_enum.cpp).

// A small graph over a world's variables. Tensor ids 0..V-1 are the variables; then come the
// outputs of each node in node order (a Split has two).
struct GNode {
  ir::OpKind kind = ir::OpKind::kRelu;
  ir::OpParams params;
  std::vector<int> inputs;  // tensor ids
};

struct GGraph {
  std::vector<GNode> nodes;
  std::vector<int> outputs;  // values no node reads (sinks); variables for an identity graph
  // Tensor id of node k's output j.
  int tensor_of(const World& w, int node, int output = 0) const;
  // Producer (node, output) of a tensor id, or (-1, var) for a variable.
  std::pair<int, int> producer(const World& w, int tensor) const;
  int num_tensors(const World& w) const;
};

// Values of every tensor of g (variables first), from world_values(w, seed).
Expected<std::vector<IntTensor>> run_int(const World& w, const GGraph& g, uint64_t seed);

// Structural hash of every tensor (variables by index; Add/Mul operands unordered), and whether
// each tensor is computed from weights only.
std::vector<uint64_t> tensor_hashes(const World& w, const GGraph& g);
std::vector<bool> constant_tensors(const World& w, const GGraph& g);

struct EnumOptions {
  int depth = 3;
  uint64_t seed = 1;
  std::function<void(size_t visited)> progress;  // called now and then
};

// Every distinct minimal graph of 1..depth ops, and the identity graphs (one or two activation
// variables as outputs). Minimal: no two nodes compute the same value (structurally or not), no
// node reads a value equal to a variable (split(concat(x, y)):0 is x), no op reads the same
// tensor twice (op(t, t) is a special case of op(t, u)); the rules between non-minimal graphs
// follow from rules between smaller ones. A graph is kept (gets a fingerprint) when every output
// depends on an activation, no output equals a variable unless all do, and it uses
// interchangeable variables in order (y only with x), which loses no rule up to renaming.
class Enumeration {
 public:
  size_t size() const;
  uint64_t fingerprint(size_t i) const;  // of the multiset of output values
  GGraph graph(size_t i) const;
  const World& world() const;

  size_t enumerated = 0;  // distinct minimal graphs visited
  size_t redundant = 0;   // graphs skipped: a value computed twice (with all their extensions)
  size_t kept = 0;        // fingerprinted graphs (identity graphs not included)
  size_t identities = 0;

  struct Impl;
  std::shared_ptr<Impl> impl;
};

Enumeration enumerate(const World& w, const EnumOptions& o);

// Pairs of kept graphs with equal fingerprints (a < b). Groups larger than max_group pair each
// member with the max_group smallest members only.
std::vector<std::pair<size_t, size_t>> candidate_pairs(const Enumeration& e, size_t max_group = 48,
                                                       size_t* groups = nullptr);

// ---------------------------------------------------------------------------------------------
// Pairs, directions and pruning (generator_prune.cpp).

// A candidate rule before conversion: source and target graphs and which target value replaces
// each source output.
struct Directed {
  GGraph source, target;
  std::vector<std::pair<int, int>> outputs;  // source tensor id -> target tensor id
};

// Ops that run at inference time: those reading at least one activation (weight-only ops fold).
int runtime_ops(const World& w, const GGraph& g);

// True when both graphs contain the same op on the same operands (TASO's common-subgraph test):
// such a pair follows from a smaller one.
bool share_common_subgraph(const World& w, const GGraph& a, const GGraph& b);

// The dual: both graphs end in the same op applied to equal values (fed by nothing else), e.g.
// mul(conv(x, enlarge(w)), y) and mul(conv(x, w), y). The pair is the smaller pair (the
// operands) in a context, and that pair is enumerated too.
bool share_common_context(const World& w, const GGraph& a, const GGraph& b, uint64_t seed);

// Maps each output of a to an output of b with the same integer value; nullopt if impossible.
std::optional<std::vector<std::pair<int, int>>> match_outputs(const World& w, const GGraph& a, const GGraph& b,
                                                              uint64_t seed);

// The directions worth emitting: towards fewer runtime ops, or both when equal. Drops directions
// whose target reads a variable the source does not, and sources not connected through nodes
// or shared variables.
std::vector<Directed> directions(const World& w, const GGraph& a, const GGraph& b,
                                 const std::vector<std::pair<int, int>>& a_to_b);

// Canonical form up to renaming interchangeable variables and reordering Add/Mul operands:
// equal keys mean the same rule.
std::string canonical_key(const World& w, const Directed& d);

// Source nodes that a renaming of variables swaps while leaving the rule unchanged: candidates
// for Rule::symmetric (node indices, each group increasing). Empty when the symmetry is not a
// single swap.
std::vector<std::vector<int>> source_symmetries(const World& w, const Directed& d);

// Structural hash of a graph that ignores names, node order and the operand order of Add/Mul.
uint64_t canonical_hash(const ir::Graph& g);

// Rules already accepted. A new rule is derivable when at most `steps` applications of accepted
// rules turn its first instance into exactly (canonical_hash) the graph the new rule gives: it
// is then a special case or a composition of rules the library has.
class RuleBase {
 public:
  void add(std::shared_ptr<const Rule> r);
  bool derives(const Rule& r, int steps) const;
  size_t size() const { return rules_.size(); }

 private:
  bool derives_on(const Rule& r, const Instance& inst, int steps) const;
  std::vector<std::shared_ptr<const Rule>> rules_;
  std::vector<std::vector<const Rule*>> by_root_ = std::vector<std::vector<const Rule*>>(ir::kNumOpKinds);
};

// "relu(conv(x,w1))"-style text of some tensors of a graph, for descriptions and logs.
std::string describe(const World& w, const GGraph& g, const std::vector<int>& tensors);

// ---------------------------------------------------------------------------------------------
// Rule conversion (generator_convert.cpp).

struct ConvertOptions {
  bool general_scalars = true;  // ScalarMul's value as a variable ($s) rather than the literal
  // Conv strides/pads ($cs, $cp) and pool kernel/strides/pads ($pk, $ps, $pp) as variables, with
  // kernel sizes equal rather than pinned, and five instances covering other configurations.
  bool general_params = true;
  int instances = 3;
  uint64_t seed = 1;
};

// Builds the Rule: literal op parameters, conditions pinning fixed dims (kernel sizes), ranks
// and every shape relation the pair needs beyond what the source's own typing enforces, and
// `instances` instantiations with different shapes. Fails when the pair's shapes cannot be
// generalised (a relation that only holds for the world's particular sizes).
Expected<Rule> to_rule(const World& w, const Directed& d, const ConvertOptions& o);

// ---------------------------------------------------------------------------------------------
// The pipeline (generator.cpp).

struct GeneratorOptions {
  int depth = 3;
  std::vector<World> worlds;  // empty: default_worlds()
  uint64_t seed = 1;
  size_t max_group = 48;
  // Rules already in the library (hand-written ones): generated rules they derive are dropped.
  std::vector<const Rule*> existing;
  int derivation_steps = 3;  // drop rules that this many applications of accepted rules derive
  // Progress: stage name, items done, items in the stage (0 when unknown).
  std::function<void(const std::string&, size_t, size_t)> progress;
};

struct GeneratorResult {
  std::vector<Rule> rules;  // provenance "generated", status numerically verified
  GeneratorInfo info;       // totals per stage, in pipeline order
  std::vector<std::pair<std::string, int64_t>> dropped;  // why candidates were dropped, and how many
  std::vector<std::pair<std::string, double>> seconds;   // per phase
};

GeneratorResult generate(const GeneratorOptions& o);

// True for a rule that always pays off on its own: every source op runs at inference time (its
// source matches real models, whose weights are plain initializers), the target runs strictly
// fewer ops, and it adds no Constant op (identity kernels and ones only enable other rewrites).
bool simplifies(const Rule& r);

// The default set for search and RL: rules that simplify, and rules whose source matches
// somewhere in one of the graphs (the zoo models). The others stay in the library, out of the
// default set. Returns how many are in it.
size_t mark_default_set(std::vector<Rule>* rules, const std::vector<ir::Graph>& graphs);

// Replaces every generated rule of lib by `rules` (hand-written ones stay, first) and records the
// generator's totals.
void merge_generated(RuleLibrary* lib, std::vector<Rule> rules, const GeneratorInfo& info);

}  // namespace rlflow::rules::gen
