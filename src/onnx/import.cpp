#include "onnx_lib.h"
#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <queue>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "fold.h"
#include "proto_io.h"
#include "rlflow/ir/dim_expr.h"
#include "rlflow/ir/op_def.h"
#include "rlflow/ir/builder.h"
#include "rlflow/ir/shape_inference.h"
#include "rlflow/onnx/model_io.h"
#include "rlflow/util/file_io.h"

namespace rlflow::onnxio {

using ir::OpKind;
using ir::TensorPtr;
using ir::TensorType;
using ir::ValueRef;

namespace {

// Older opsets import too: ops whose legacy attributes change the meaning stay opaque.
constexpr int64_t kMinOpset = 1;

// Float weights big enough that no shape computation reads them: their data is moved, not copied,
// and ONNX shape inference sees only their type.
bool is_bulk_weight(const onnx::TensorProto& t) {
  if (t.data_type() != onnx::TensorProto::FLOAT && t.data_type() != onnx::TensorProto::DOUBLE &&
      t.data_type() != onnx::TensorProto::FLOAT16)
    return false;
  int64_t n = 1;
  for (auto d : t.dims()) {
    if (d < 0 || d > (int64_t{1} << 40)) return false;
    n *= d;
    if (n > (int64_t{1} << 40)) return false;
  }
  return n > 1024;
}

struct Value {
  std::optional<ValueRef> ref;  // produced in the IR graph
  TensorPtr constant;           // known value (initializer, Constant, folded)
  std::optional<TensorType> type;
  TensorPtr shadow{};           // dynamic models: its value at the representative sizes (not folded)
};

// A node the converter declines becomes opaque; a node that is malformed is an error.
struct Decline {};

class Importer {
 public:
  Importer(onnx::ModelProto& m, std::string label, std::string base_dir, const ImportOptions& o, ImportStats* s)
      : model_(m), label_(std::move(label)), base_dir_(std::move(base_dir)), opts_(o), stats_(s) {}

  Expected<ir::Graph> run();

 private:
  Error bad(const std::string& why) const { return Error::bad_input(label_ + ": " + why); }
  Error bad_node(const onnx::NodeProto& n, const std::string& why) const {
    return bad("node '" + n.name() + "' (" + n.op_type() + "): " + why);
  }

  Status read_meta();
  Status read_initializers();
  Status read_inputs();
  Status infer_onnx_types();
  Expected<std::vector<const onnx::NodeProto*>> sorted_nodes();
  Status convert_node(const onnx::NodeProto& n);
  Expected<bool> convert_known(const onnx::NodeProto& n);  // false: decline (becomes opaque)
  Expected<bool> convert_plain(const onnx::NodeProto& n);  // a plain op, from its row and record; false: not one
  Status convert_opaque(const onnx::NodeProto& n);
  Expected<ir::OpaqueParams> opaque_params(const onnx::NodeProto& n) const;
  Expected<bool> fold_through_evaluator(const onnx::NodeProto& n);
  Expected<std::optional<std::vector<TensorPtr>>> evaluate_node(const onnx::NodeProto& n, const std::vector<TensorPtr>& ins);
  std::unordered_map<std::string, TensorPtr> shadow_values(const onnx::NodeProto& n, bool varying_shape);
  // The equal weight of ImportOptions::share_weights_with, if there is one, else `t`.
  TensorPtr shared_weight(TensorPtr t);
  std::unordered_multimap<uint64_t, TensorPtr> weight_pool_;
  void infer_node_types(const onnx::NodeProto& n);
  void record_type(const onnx::ValueInfoProto& vi);

  Expected<ValueRef> ref(const std::string& name);
  TensorPtr constant(const onnx::NodeProto& n, int k) const {
    if (k >= n.input_size() || n.input(k).empty()) return nullptr;
    auto it = values_.find(n.input(k));
    return it == values_.end() ? nullptr : it->second.constant;
  }
  std::optional<TensorType> type_of(const std::string& name) const {
    auto it = values_.find(name);
    return it == values_.end() ? std::nullopt : it->second.type;
  }
  bool present(const onnx::NodeProto& n, int k) const { return k < n.input_size() && !n.input(k).empty(); }
  Expected<std::vector<ValueRef>> emit(const onnx::NodeProto& n, OpKind kind, std::vector<ValueRef> ins,
                                       ir::OpParams params, int num_outputs = 1);
  Status alias(const onnx::NodeProto& n, const std::string& src);
  Status check_arity(const onnx::NodeProto& n) const;

  onnx::ModelProto& model_;  // large initializer data is moved out of it into the graph
  std::string label_, base_dir_;
  const ImportOptions& opts_;
  ImportStats* stats_;
  ir::GraphBuilder b_;
  std::unordered_map<std::string, Value> values_;
  std::unordered_map<std::string, TensorType> onnx_types_;
  int64_t opset_ = 0;
  // Dynamic models: the declared symbolic dims of inputs and outputs, the size each symbolic dim
  // was given, and (from ONNX inference over the symbolic model) which axes of each tensor vary.
  std::map<std::string, std::vector<std::string>> symbolic_;
  std::map<std::string, int64_t> dim_sizes_;
  std::unordered_map<std::string, std::vector<bool>> varying_axes_;
  // Dynamic models: a kept Shape node's output -> the tensor it reads and the first axis it gives.
  std::unordered_map<std::string, std::pair<std::string, int64_t>> shape_of_;
  bool fold_static_dims(const onnx::NodeProto& n);
  std::unordered_map<std::string, TensorPtr> shadow_out_;  // shadow values of the node being converted
  bool dynamic() const { return !symbolic_.empty(); }
  // Whether node n reads an initializer of at least ir::kNoDuplicateBytes that another node reads too.
  bool reads_shared_initializer(const onnx::NodeProto& n) {
    if (readers_.empty())
      for (const auto& m : model_.graph().node())
        for (const auto& in : m.input()) ++readers_[in];
    for (const auto& in : n.input()) {
      auto it = values_.find(in);
      if (it == values_.end() || !it->second.constant || it->second.constant->nbytes() < ir::kNoDuplicateBytes) continue;
      auto r = readers_.find(in);
      if (r != readers_.end() && r->second > 1) return true;
    }
    return false;
  }
  std::unordered_map<std::string, int> readers_;
  void infer_varying_axes();
  onnx::ModelProto inference_copy(bool static_inputs) const;
  bool varies(const std::string& tensor, int64_t from, int64_t to) const;
};

// Where `m` or a message in it holds a field this build's ONNX proto does not define (a path like
// "graph.node[3]"), or nothing. Reflection over the set fields only: weights' bytes are not read.
std::optional<std::string> unknown_field_path(const google::protobuf::Message& m, const std::string& at = "model") {
  const auto* r = m.GetReflection();
  if (!r->GetUnknownFields(m).empty()) return at;
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  r->ListFields(m, &fields);
  for (const auto* f : fields) {
    if (f->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) continue;
    if (f->is_repeated()) {
      for (int i = 0; i < r->FieldSize(m, f); ++i)
        if (auto p = unknown_field_path(r->GetRepeatedMessage(m, f, i), at + "." + f->name() + "[" + std::to_string(i) + "]")) return p;
    } else if (auto p = unknown_field_path(r->GetMessage(m, f), at + "." + f->name())) {
      return p;
    }
  }
  return std::nullopt;
}

Status Importer::read_meta() {
  if (!model_.has_graph()) return bad("the model has no graph");
  ir::ModelMeta meta;
  meta.ir_version = model_.ir_version();
  meta.opsets.clear();
  // "ai.onnx" is the default domain spelled out (onnxruntime runs it): kept as "".
  for (const auto& o : model_.opset_import()) meta.opsets.emplace_back(o.domain() == "ai.onnx" ? std::string() : o.domain(), o.version());
  meta.producer_name = model_.producer_name();
  meta.producer_version = model_.producer_version();
  meta.domain = model_.domain();
  meta.doc_string = model_.doc_string();
  meta.model_version = model_.model_version();
  meta.graph_name = model_.graph().name();
  for (const auto& kv : model_.metadata_props()) meta.metadata.emplace_back(kv.key(), kv.value());
  for (const auto& f : model_.functions()) meta.functions.push_back(f.SerializeAsString());
  opset_ = meta.opset("");
  if (model_.ir_version() <= 0) return bad("missing ir_version (not an ONNX model?)");
  if (opset_ == 0) return bad("the model imports no default-domain opset");
  if (opset_ < kMinOpset) return Error::unsupported(label_ + ": opset " + std::to_string(opset_) + " is older than " + std::to_string(kMinOpset));
  // An opset or IR version the linked onnx library does not know has schemas rlflow cannot check
  // (an opset-25 ReduceMean without its axes reduced over every axis): refused, not guessed.
  const int64_t known_opset = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map().at("").second;
  if (opset_ > known_opset)
    return Error::unsupported(label_ + ": opset " + std::to_string(opset_) + " is newer than rlflow's ONNX library knows (" +
                              std::to_string(known_opset) + ")");
  // A newer IR version is read as the newest known one where the file holds no field the library
  // does not know: IR versions add fields and types, and onnx 1.23's make_model writes IR 14 for a
  // model of any opset. A file with an unknown field (a feature of the newer IR) is refused.
  if (model_.ir_version() > onnx::Version::IR_VERSION) {
    const auto known = static_cast<int64_t>(onnx::Version::IR_VERSION);
    if (auto where = unknown_field_path(model_))
      return Error::unsupported(label_ + ": IR version " + std::to_string(model_.ir_version()) + " is newer than rlflow's ONNX library knows (" +
                                std::to_string(known) + "), and the file uses a field it does not know (in " + *where + ")");
    spdlog::info("{}: IR version {} read as {}, the newest rlflow's ONNX library knows (the file uses nothing newer)", label_,
                 model_.ir_version(), known);
    if (stats_) stats_->ir_version_read_as_known = model_.ir_version();
    meta.ir_version = known;
    model_.set_ir_version(known);
  }
  if (model_.graph().output_size() == 0) return bad("the graph has no outputs");
  b_ = ir::GraphBuilder(std::move(meta));
  return {};
}

TensorPtr Importer::shared_weight(TensorPtr t) {
  if (!opts_.share_weights_with) return t;
  if (weight_pool_.empty())
    for (size_t i = 0; i < opts_.share_weights_with->size(); ++i) {
      const auto& n = opts_.share_weights_with->node(static_cast<ir::NodeId>(i));
      if (n.kind == ir::OpKind::kWeight && n.value) weight_pool_.emplace(n.value->content_hash(), n.value);
    }
  auto [lo, hi] = weight_pool_.equal_range(t->content_hash());
  for (auto it = lo; it != hi; ++it)
    if (it->second->type() == t->type() && it->second->same_content(*t)) return it->second;  // t's copy is freed here
  return t;
}

Status Importer::read_initializers() {
  for (auto& t : *model_.mutable_graph()->mutable_initializer()) {
    if (values_.count(t.name())) return bad("initializer '" + t.name() + "' is defined twice");
    auto v = is_bulk_weight(t) ? take_tensor_from_proto(&t, base_dir_) : tensor_from_proto(t, base_dir_);
    if (!v) return bad(v.error().message);
    values_[t.name()] = Value{std::nullopt, shared_weight(*v), (*v)->type()};
  }
  if (model_.graph().sparse_initializer_size() > 0) return Error::unsupported(label_ + ": sparse initializers are not supported");
  return {};
}

Status Importer::read_inputs() {
  struct GivenExpr {
    std::string input;
    int axis;
    ir::DimExpr expr;
    int64_t size;
  };
  std::vector<GivenExpr> given_exprs;
  // A misspelt --input-shape name is reported before any input it was meant to fix.
  for (const auto& entry : opts_.input_shapes) {
    const std::string& name = entry.first;  // not a structured binding: clang 14 cannot capture those
    if (std::none_of(model_.graph().input().begin(), model_.graph().input().end(),
                     [&](const onnx::ValueInfoProto& vi) { return vi.name() == name; }))
      return Error{ErrorCode::kUsage, "--input-shape: the model has no input named '" + name + "'"};
  }
  std::unordered_set<std::string> seen;
  size_t position = 0;
  for (const auto& vi : model_.graph().input()) {
    if (!seen.insert(vi.name()).second) return bad("graph input '" + vi.name() + "' is declared twice");
    if (values_.count(vi.name())) continue;  // an initializer with a default: treated as a constant
    const size_t pos = position++;
    if (pos < opts_.positional_constants.size() && opts_.positional_constants[pos]) {
      const auto& t = opts_.positional_constants[pos];
      values_[vi.name()] = Value{std::nullopt, t, t->type()};
      continue;
    }
    if (!vi.type().has_tensor_type()) return Error::unsupported(label_ + ": graph input '" + vi.name() + "' is not a tensor");
    const auto& tt = vi.type().tensor_type();
    auto dt = dtype_from_onnx(tt.elem_type(), "graph input '" + vi.name() + "'");
    if (!dt) return bad(dt.error().message);
    ir::Shape shape;
    auto ov = opts_.input_shapes.find(vi.name());
    const ir::Shape* override_shape = ov != opts_.input_shapes.end() ? &ov->second
                                      : pos < opts_.positional_input_shapes.size() ? &opts_.positional_input_shapes[pos]
                                                                                   : nullptr;
    if (override_shape) {
      if (tt.has_shape() && tt.shape().dim_size() != static_cast<int>(override_shape->size()))
        return Error{ErrorCode::kUsage, "input shape for " + vi.name() + ": rank " + std::to_string(override_shape->size()) +
                                            " does not match the model's rank " + std::to_string(tt.shape().dim_size())};
      shape = *override_shape;
      // A static dim keeps its size: the written file declares the input as the model does, so a
      // different size would describe a file that cannot run at it (issue 41).
      if (tt.has_shape() && opts_.keep_static_dims)
        for (int a = 0; a < tt.shape().dim_size(); ++a) {
          const auto& d = tt.shape().dim(a);
          if (d.has_dim_value() && d.dim_value() > 0 && d.dim_value() != shape[static_cast<size_t>(a)])
            return Error{ErrorCode::kUsage, "input shape for " + vi.name() + ": axis " + std::to_string(a) + " is " +
                                                std::to_string(d.dim_value()) + " in the model, not " +
                                                std::to_string(shape[static_cast<size_t>(a)]) +
                                                " (only symbolic dims take a size from --input-shape)"};
        }
    } else {
      if (!tt.has_shape()) return bad("graph input '" + vi.name() + "' has no shape; pass --input-shape " + vi.name() + ":d0,d1,...");
      for (const auto& d : tt.shape().dim()) {
        if (d.has_dim_value() && d.dim_value() <= 0) {
          // Some exporters write 0 for "unknown": suggest the shape with those axes given size 1.
          std::string example;
          for (const auto& e : tt.shape().dim())
            example += (example.empty() ? "" : ",") + std::to_string(e.has_dim_value() && e.dim_value() > 0 ? e.dim_value() : 1);
          return Error::unsupported(label_ + ": graph input '" + vi.name() + "' has a dimension of size " + std::to_string(d.dim_value()) +
                                    " (an empty tensor, which rlflow does not optimise); if it stands for an unknown size, pass "
                                    "--input-shape " + vi.name() + ":" + example + " to give it one");
        }
        if (d.has_dim_value()) {
          shape.push_back(d.dim_value());
          continue;
        }
        if (auto f = opts_.fixed_dims.find(d.dim_param()); !d.dim_param().empty() && f != opts_.fixed_dims.end()) {
          if (stats_) stats_->fixed_found.insert(f->first);
          shape.push_back(f->second);
          continue;
        }
        // A symbolic dimension: one representative size per name, shared by every input using it.
        const int64_t axis = static_cast<int64_t>(shape.size());
        const std::string key = d.dim_param().empty() ? vi.name() + ":" + std::to_string(axis) : d.dim_param();
        auto size_of = [&](const std::string& name, bool leading) -> int64_t {
          if (auto f = opts_.fixed_dims.find(name); f != opts_.fixed_dims.end()) {
            if (stats_) stats_->fixed_found.insert(name);
            return f->second;
          }
          auto given = opts_.dim_values.find(name);
          auto chosen = dim_sizes_.find(name);
          const int64_t size = given != opts_.dim_values.end() ? given->second
                               : chosen != dim_sizes_.end()   ? chosen->second
                               : ir::symbol_role(name) == ir::SymbolRole::kBatch || (leading && ir::symbol_role(name) != ir::SymbolRole::kPast)
                                   ? 1
                                   : kDefaultDynamicSize;
          dim_sizes_[name] = size;
          return size;
        };
        // An exporter's expression over names (a KV-cache mask's "past_sequence_length +
        // sequence_length") is evaluated from its names' sizes, so every input agrees with the others.
        auto expr = d.dim_param().empty() ? Expected<ir::DimExpr>(Error::bad_input("unnamed")) : ir::DimExpr::parse(d.dim_param());
        int64_t size = 0;
        if (expr && !expr->is_symbol() && !expr->symbols().empty() && !opts_.dim_values.count(key)) {
          std::map<std::string, int64_t> binding;
          for (const auto& name : expr->symbols()) binding[name] = size_of(name, false);
          auto v = expr->eval(binding);
          if (!v) return bad(v.error().message);
          size = *v;
          if (size <= 0)
            return Error{ErrorCode::kUsage, "dimension '" + key + "' of graph input '" + vi.name() + "' is " + std::to_string(size) +
                                                " at these sizes; give its names other sizes with --input-shape"};
        } else {
          size = size_of(key, axis == 0);
        }
        if (size <= 0) return Error{ErrorCode::kUsage, "size " + std::to_string(size) + " for dimension '" + key + "'"};
        shape.push_back(size);
      }
    }
    // Symbolic dims are recorded whether or not --input-shape gave their sizes: the written file keeps them.
    if (tt.has_shape()) {
      std::vector<std::string> sym;
      bool any = false;
      for (int a = 0; a < tt.shape().dim_size(); ++a) {
        const auto& d = tt.shape().dim(a);
        const bool symbolic = !d.has_dim_value() && !(!d.dim_param().empty() && opts_.fixed_dims.count(d.dim_param()));
        any = any || symbolic;
        sym.push_back(!symbolic ? std::string() : d.dim_param().empty() ? std::string("?") : d.dim_param());
        if (symbolic && override_shape && a < static_cast<int>(override_shape->size())) {
          const std::string key = d.dim_param().empty() ? vi.name() + ":" + std::to_string(a) : d.dim_param();
          auto expr = d.dim_param().empty() ? Expected<ir::DimExpr>(Error::bad_input("unnamed")) : ir::DimExpr::parse(key);
          // A size given for an expression's input fixes its names only where it is one name; an
          // expression is checked against its names' sizes once every input is read.
          if (!expr || expr->is_symbol() || expr->symbols().empty()) dim_sizes_[key] = (*override_shape)[static_cast<size_t>(a)];
          else given_exprs.push_back({vi.name(), a, std::move(*expr), (*override_shape)[static_cast<size_t>(a)]});
        }
      }
      if (any) symbolic_[vi.name()] = std::move(sym);
    }
    TensorType t{*dt, shape};
    values_[vi.name()] = Value{b_.input(vi.name(), t), nullptr, t};
  }
  // A size given for a dim written as an expression must be what the expression gives (a mask over
  // past + sequence): otherwise the inputs disagree and the model cannot run at these sizes.
  for (const auto& g : given_exprs) {
    std::map<std::string, int64_t> known;
    bool all = true;
    for (const auto& name : g.expr.symbols()) {
      auto it = dim_sizes_.find(name);
      if (it == dim_sizes_.end()) all = false;
      else known[name] = it->second;
    }
    if (!all) continue;
    auto v = g.expr.eval(known);
    if (v && *v != g.size)
      return Error{ErrorCode::kUsage, "input shape for " + g.input + ": axis " + std::to_string(g.axis) + " is '" + g.expr.str() +
                                          "', which is " + std::to_string(*v) + " at the sizes of the other inputs, not " + std::to_string(g.size)};
  }
  return {};
}

// A copy of the model for ONNX shape inference, its large float initializers stripped of data (only
// their types matter), so inference costs little even for big models. With `static_inputs` the graph
// inputs take the sizes import gave them; otherwise they stay as declared, symbolic dims and all.
onnx::ModelProto Importer::inference_copy(bool static_inputs) const {
  onnx::ModelProto copy;
  *copy.mutable_opset_import() = model_.opset_import();
  copy.set_ir_version(model_.ir_version());
  auto* g = copy.mutable_graph();
  for (const auto& n : model_.graph().node()) *g->add_node() = n;
  if (static_inputs) {
    for (const auto& o : model_.graph().output()) *g->add_output() = o;
    for (const auto& vi : model_.graph().value_info()) *g->add_value_info() = vi;
  }
  for (const auto& t : model_.graph().initializer()) {
    auto* c = g->add_initializer();
    if (is_bulk_weight(t)) {
      c->set_name(t.name());
      c->set_data_type(t.data_type());
      *c->mutable_dims() = t.dims();
      c->set_data_location(onnx::TensorProto::EXTERNAL);  // never read: only its type matters
      auto* kv = c->add_external_data();
      kv->set_key("location");
      kv->set_value("stripped");
    } else {
      *c = t;
    }
  }
  for (const auto& vi : model_.graph().input()) {
    auto* c = g->add_input();
    *c = vi;
    auto it = values_.find(vi.name());
    if (static_inputs && it != values_.end() && it->second.ref && it->second.type) {
      auto* shp = c->mutable_type()->mutable_tensor_type()->mutable_shape();
      shp->clear_dim();
      for (auto d : it->second.type->shape) shp->add_dim()->set_dim_value(d);
    }
  }
  try {
    // Data propagation carries shape values through Shape -> Gather -> Concat chains, so an
    // Expand or Reshape whose shape is computed from static shapes gets a static type.
    onnx::ShapeInferenceOptions o{false, 0, true};
    onnx::shape_inference::InferShapes(copy, onnx::OpSchemaRegistry::Instance(), o);
  } catch (const std::exception& e) {
    spdlog::debug("{}: ONNX shape inference stopped early: {}", label_, e.what());
  }
  return copy;
}

// ONNX's own shape inference supplies the output types of opaque nodes.
Status Importer::infer_onnx_types() {
  const auto copy = inference_copy(true);
  // Inferred intermediate types, then graph outputs (inference refines their declared types).
  for (const auto& vi : copy.graph().value_info()) record_type(vi);
  for (const auto& vi : copy.graph().output()) record_type(vi);
  return {};
}

// ONNX inference over the model as declared, symbolic inputs and all: an axis whose extent it cannot
// state as a number varies with the input sizes. Values computed from such an extent (Shape, Size)
// are not folded, so the written file computes them at run time as its input did.
void Importer::infer_varying_axes() {
  const auto copy = inference_copy(false);
  auto note = [&](const onnx::ValueInfoProto& vi) {
    if (!vi.type().has_tensor_type() || !vi.type().tensor_type().has_shape()) return;
    std::vector<bool> v;
    for (const auto& d : vi.type().tensor_type().shape().dim()) v.push_back(!d.has_dim_value());
    varying_axes_[vi.name()] = std::move(v);
  };
  for (const auto& vi : copy.graph().input()) note(vi);
  for (const auto& vi : copy.graph().value_info()) note(vi);
}

// Whether axes [from, to) of a tensor may differ at other input sizes (unknown counts as yes).
bool Importer::varies(const std::string& tensor, int64_t from, int64_t to) const {
  if (!dynamic()) return false;
  auto it = varying_axes_.find(tensor);
  if (it == varying_axes_.end()) return values_.count(tensor) == 0 || !values_.at(tensor).constant;
  for (int64_t a = std::max<int64_t>(from, 0); a < to && a < static_cast<int64_t>(it->second.size()); ++a)
    if (it->second[static_cast<size_t>(a)]) return true;
  return false;
}

void Importer::record_type(const onnx::ValueInfoProto& vi) {
  if (!vi.type().has_tensor_type() || !vi.type().tensor_type().has_shape()) return;
  const auto& tt = vi.type().tensor_type();
  auto dt = dtype_from_onnx(tt.elem_type(), vi.name());
  if (!dt) return;
  ir::Shape s;
  for (const auto& d : tt.shape().dim()) {
    if (!d.has_dim_value()) return;
    s.push_back(d.dim_value());
  }
  onnx_types_[vi.name()] = TensorType{*dt, s};
}

// ONNX shape inference of one node, given what import knows by now: the static types of its inputs
// and the values of its (small) constant inputs. This types an opaque node whose shape depends on
// values that were folded on import, which whole-model inference could not see.
void Importer::infer_node_types(const onnx::NodeProto& n) {
  onnx::ModelProto m;
  *m.mutable_opset_import() = model_.opset_import();
  m.set_ir_version(model_.ir_version());
  auto* g = m.mutable_graph();
  *g->add_node() = n;
  std::unordered_set<std::string> seen;
  for (const auto& name : n.input()) {
    if (name.empty() || !seen.insert(name).second) continue;
    auto it = values_.find(name);
    if (it == values_.end() || !it->second.type) continue;
    // Values at the representative sizes type the node as well as constants do.
    const auto& c = it->second.constant ? it->second.constant : it->second.shadow;
    if (c && c->nbytes() <= ir::kMaxFoldGrowthBytes) tensor_to_proto(*c, name, g->add_initializer());
    auto* vi = g->add_input();
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(dtype_to_onnx(it->second.type->dtype));
    auto* shp = tt->mutable_shape();
    for (auto d : it->second.type->shape) shp->add_dim()->set_dim_value(d);
  }
  for (const auto& o : n.output())
    if (!o.empty()) g->add_output()->set_name(o);
  try {
    onnx::ShapeInferenceOptions o{false, 0, true};
    onnx::shape_inference::InferShapes(m, onnx::OpSchemaRegistry::Instance(), o);
  } catch (const std::exception& e) {
    spdlog::debug("{}: ONNX shape inference of node '{}' failed: {}", label_, n.name(), e.what());
    return;
  }
  for (const auto& vi : m.graph().value_info()) record_type(vi);
  for (const auto& vi : m.graph().output()) record_type(vi);
}

Expected<std::vector<const onnx::NodeProto*>> Importer::sorted_nodes() {
  const auto& nodes = model_.graph().node();
  std::unordered_map<std::string, int> producer;
  for (int i = 0; i < nodes.size(); ++i) {
    if (nodes[i].op_type().empty()) return bad("node '" + nodes[i].name() + "' has an empty op_type");
    for (const auto& o : nodes[i].output()) {
      if (o.empty()) continue;
      if (producer.count(o) || values_.count(o))
        return bad("tensor '" + o + "' is produced more than once (node '" + nodes[i].name() + "')");
      producer[o] = i;
    }
  }
  std::vector<int> indeg(static_cast<size_t>(nodes.size()), 0);
  std::vector<std::vector<int>> succ(static_cast<size_t>(nodes.size()));
  for (int i = 0; i < nodes.size(); ++i) {
    for (const auto& a : nodes[i].attribute())
      if (a.has_g() || a.graphs_size() > 0)
        return Error::unsupported(label_ + ": node '" + nodes[i].name() + "' (" + nodes[i].op_type() +
                                  ") has a subgraph; control flow is not supported");
    for (const auto& in : nodes[i].input()) {
      if (in.empty() || values_.count(in)) continue;
      auto it = producer.find(in);
      if (it == producer.end())
        return bad("node '" + nodes[i].name() + "' (" + nodes[i].op_type() + ") reads '" + in +
                   "', which no node, input or initializer provides");
      ++indeg[static_cast<size_t>(i)];
      succ[static_cast<size_t>(it->second)].push_back(i);
    }
  }
  std::priority_queue<int, std::vector<int>, std::greater<>> ready;
  for (int i = 0; i < nodes.size(); ++i)
    if (indeg[static_cast<size_t>(i)] == 0) ready.push(i);
  std::vector<const onnx::NodeProto*> order;
  while (!ready.empty()) {
    int i = ready.top();
    ready.pop();
    order.push_back(&nodes[i]);
    for (int s : succ[static_cast<size_t>(i)])
      if (--indeg[static_cast<size_t>(s)] == 0) ready.push(s);
  }
  if (static_cast<int>(order.size()) != nodes.size()) {
    for (int i = 0; i < nodes.size(); ++i)
      if (indeg[static_cast<size_t>(i)] > 0)
        return bad("the graph has a cycle through node '" + nodes[i].name() + "' (" + nodes[i].op_type() + ")");
  }
  return order;
}

Expected<ValueRef> Importer::ref(const std::string& name) {
  auto it = values_.find(name);
  if (it == values_.end()) return bad("tensor '" + name + "' is not defined");
  if (it->second.ref) return *it->second.ref;
  if (!it->second.constant) return bad("tensor '" + name + "' has no value");
  ValueRef r = b_.weight(name, it->second.constant);
  it->second.ref = r;
  return r;
}

Expected<std::vector<ValueRef>> Importer::emit(const onnx::NodeProto& n, OpKind kind, std::vector<ValueRef> ins,
                                               ir::OpParams params, int num_outputs) {
  auto r = b_.try_op(kind, std::move(ins), std::move(params), n.name());
  if (!r) return bad_node(n, r.error().message);
  std::vector<std::string> names;
  for (int k = 0; k < num_outputs && k < static_cast<int>(r->size()); ++k) {
    const std::string name = k < n.output_size() ? n.output(k) : std::string();
    names.push_back(name);
    if (!name.empty()) values_[name] = Value{(*r)[static_cast<size_t>(k)], nullptr, b_.type((*r)[static_cast<size_t>(k)])};
  }
  // Record the ONNX names so an unchanged node exports under its original tensor names.
  b_.mutable_node(r->front().node).output_names = std::move(names);
  return r;
}

Status Importer::alias(const onnx::NodeProto& n, const std::string& src) {
  auto it = values_.find(src);
  if (it == values_.end()) return bad_node(n, "input '" + src + "' is not defined");
  values_[n.output(0)] = it->second;
  if (stats_) ++stats_->removed_nodes;
  return {};
}

std::vector<int64_t> spatial_default(size_t n, int64_t v) { return std::vector<int64_t>(n, v); }

// Explicit pads from auto_pad, as the ONNX spec defines SAME_UPPER / SAME_LOWER.
Expected<std::vector<int64_t>> resolve_pads(const onnx::NodeProto& n, const ir::Shape& in, const std::vector<int64_t>& kernel,
                                            const std::vector<int64_t>& strides, const std::vector<int64_t>& dil) {
  const size_t nsp = kernel.size();
  std::string ap = attr_string(n, "auto_pad", "NOTSET");
  if (ap == "NOTSET" || ap.empty()) {
    auto p = attr_ints(n, "pads").value_or(spatial_default(2 * nsp, 0));
    if (p.size() != 2 * nsp) return Error::bad_input("pads must have " + std::to_string(2 * nsp) + " entries");
    return p;
  }
  std::vector<int64_t> pads(2 * nsp, 0);
  if (ap == "VALID") return pads;
  if (ap != "SAME_UPPER" && ap != "SAME_LOWER") return Error::bad_input("unknown auto_pad '" + ap + "'");
  for (size_t i = 0; i < nsp; ++i) {
    const int64_t x = in[2 + i];
    const int64_t out = (x + strides[i] - 1) / strides[i];
    const int64_t total = std::max<int64_t>(0, (out - 1) * strides[i] + (kernel[i] - 1) * dil[i] + 1 - x);
    const int64_t small = total / 2, large = total - small;
    pads[i] = ap == "SAME_UPPER" ? small : large;
    pads[nsp + i] = ap == "SAME_UPPER" ? large : small;
  }
  return pads;
}

Status Importer::convert_node(const onnx::NodeProto& n) {
  if (stats_) ++stats_->onnx_nodes;
  const std::string& op = n.op_type();
  const bool std_domain = n.domain().empty() || n.domain() == "ai.onnx";
  // A node of a domain the model does not import has no version, so no meaning (onnx.checker and
  // onnxruntime refuse the model): bad input, not a failure found when the output is checked.
  if (!std_domain && std::none_of(model_.opset_import().begin(), model_.opset_import().end(),
                                  [&](const onnx::OperatorSetIdProto& o) { return o.domain() == n.domain(); }))
    return bad_node(n, "its domain '" + n.domain() + "' is not in the model's opset_import");
  if (std_domain && op == "Constant") {
    TensorPtr t;
    if (auto* a = find_attr(n, "value")) {
      auto v = tensor_from_proto(a->t(), base_dir_);
      if (!v) return bad_node(n, v.error().message);
      t = *v;
    } else if (auto* a = find_attr(n, "value_float")) {
      t = ir::Tensor::from_vector<float>(ir::DType::kFloat32, {}, {a->f()});
    } else if (auto* a = find_attr(n, "value_floats")) {
      std::vector<float> v(a->floats().begin(), a->floats().end());
      t = ir::Tensor::from_vector<float>(ir::DType::kFloat32, {static_cast<int64_t>(v.size())}, v);
    } else if (auto* a = find_attr(n, "value_int")) {
      t = ir::Tensor::from_vector<int64_t>(ir::DType::kInt64, {}, {a->i()});
    } else if (auto* a = find_attr(n, "value_ints")) {
      t = ir::Tensor::i64(std::vector<int64_t>(a->ints().begin(), a->ints().end()));
    } else {
      return Error::unsupported(label_ + ": node '" + n.name() + "' (Constant): only dense numeric values are supported");
    }
    if (n.output_size() != 1) return bad_node(n, "expects one output");
    values_[n.output(0)] = Value{std::nullopt, t, t->type()};
    if (stats_) ++stats_->folded_nodes;
    return {};
  }
  // In a dynamic model, the extent of an axis that varies with the input sizes is not a constant.
  bool fold = true;
  if (std_domain && dynamic() && (op == "Shape" || op == "Size") && n.input_size() > 0) {
    const auto t = type_of(n.input(0));
    const int64_t r = t ? t->rank() : 0;
    int64_t from = op == "Shape" ? attr_int(n, "start", 0) : 0, to = op == "Shape" ? attr_int(n, "end", r) : r;
    if (from < 0) from += r;
    if (to < 0) to += r;
    fold = !varies(n.input(0), from, to);
    if (!fold && op == "Shape") shape_of_[n.output(0)] = {n.input(0), std::max<int64_t>(from, 0)};
  }
  // Gather(Shape(x), i) where x's axis i does not vary (HF's head_dim = x.shape[-1] // 2 in a model
  // whose batch and sequence do): the same at every binding, so a constant.
  if (std_domain && dynamic() && op == "Gather" && fold_static_dims(n)) return {};
  // A transform of a large initializer that another node also reads (a tied embedding's
  // Transpose) is not folded here: that would hold and write the weight twice. ir::fold_constants
  // then folds it only where nothing else reads the weight.
  const bool duplicates = std_domain && op != "Shape" && op != "Size" && reads_shared_initializer(n);
  // A quantized model's Q/DQ ops are what the runtime builds its integer kernels from: a weight's
  // DequantizeLinear stays a node (ir::is_quantization_op).
  const bool quantization = ir::is_quantization_op(n.domain(), op);
  // Resolve constants first: shape chains and weight-only ONNX ops fold here.
  if (std_domain && fold && !duplicates && !quantization) {
    std::vector<TensorPtr> cins;
    std::vector<std::optional<TensorType>> types;
    for (int k = 0; k < n.input_size(); ++k) {
      cins.push_back(constant(n, k));
      types.push_back(n.input(k).empty() ? std::nullopt : type_of(n.input(k)));
    }
    auto folded = fold_node(n, cins, types, opset_);
    if (!folded) return bad_node(n, folded.error().message);
    if (folded->has_value()) {
      const auto& outs = **folded;
      for (size_t k = 0; k < outs.size() && k < static_cast<size_t>(n.output_size()); ++k)
        if (!n.output(static_cast<int>(k)).empty())
          values_[n.output(static_cast<int>(k))] = Value{std::nullopt, outs[k], outs[k]->type()};
      if (stats_) ++stats_->folded_nodes;
      return {};
    }
  }
  // Every other all-constant node folds through the reference executor, so constant chains of any
  // op it runs (a causal mask built by Trilu, Where and Expand) become values later nodes can read.
  if (std_domain && opts_.evaluator && !duplicates && !quantization) {
    auto folded = fold_through_evaluator(n);
    if (!folded) return folded.error();
    if (*folded) return {};
  }
  shadow_out_.clear();
  if (std_domain && dynamic()) shadow_out_ = shadow_values(n, !fold);
  Status st = [&]() -> Status {
    auto plain = convert_plain(n);
    if (!plain) return plain.error();
    if (*plain) return {};
    if (std_domain) {
      auto handled = convert_known(n);
      if (!handled) return handled.error();
      if (*handled) return {};
    }
    return convert_opaque(n);
  }();
  if (!st.ok()) return st;
  for (const auto& [name, t] : shadow_out_) {
    auto it = values_.find(name);
    if (it != values_.end() && !it->second.constant && it->second.type == t->type()) it->second.shadow = t;
  }
  return {};
}

bool Importer::fold_static_dims(const onnx::NodeProto& n) {
  if (n.input_size() != 2 || n.output_size() != 1 || attr_int(n, "axis", 0) != 0) return false;
  const auto src = shape_of_.find(n.input(0));
  auto in = values_.find(n.input(0));
  const TensorPtr idx = constant(n, 1);
  if (src == shape_of_.end() || in == values_.end() || !in->second.shadow || !idx || ir::is_float(idx->dtype()) || idx->shape().size() > 1)
    return false;
  const auto dims = in->second.shadow->as_int64();
  const auto len = static_cast<int64_t>(dims.size());
  std::vector<int64_t> out;
  for (int64_t i : idx->as_int64()) {
    if (i < 0) i += len;
    if (i < 0 || i >= len) return false;
    const int64_t axis = src->second.second + i;
    if (varies(src->second.first, axis, axis + 1)) return false;
    out.push_back(dims[static_cast<size_t>(i)]);
  }
  TensorPtr t = idx->shape().empty() ? ir::Tensor::from_vector<int64_t>(ir::DType::kInt64, {}, {out[0]}) : ir::Tensor::i64(out);
  values_[n.output(0)] = Value{std::nullopt, t, t->type()};
  if (stats_) ++stats_->folded_nodes;
  return true;
}

Expected<ir::OpaqueParams> Importer::opaque_params(const onnx::NodeProto& n) const {
  ir::OpaqueParams p;
  p.domain = n.domain();
  p.op_type = n.op_type();
  onnx::NodeProto attrs;
  *attrs.mutable_attribute() = n.attribute();
  p.attributes = attrs.SerializeAsString();
  p.since_version = b_.graph().meta().opset(n.domain());
  auto parsed = attributes_from_proto(n, base_dir_);
  if (!parsed) return bad_node(n, parsed.error().message);
  p.attrs = *parsed;
  for (int k = 0; k < n.input_size(); ++k)
    if (!n.input(k).empty()) p.input_slots.push_back(k);
  for (int k = 0; k < n.output_size(); ++k)
    if (!n.output(k).empty()) p.output_slots.push_back(k);
  return p;
}

// The outputs of node n (by used output slot) on the given present inputs, through the evaluator;
// nullopt when it cannot run the node or the result would grow the weights past the fold limit.
Expected<std::optional<std::vector<TensorPtr>>> Importer::evaluate_node(const onnx::NodeProto& n,
                                                                         const std::vector<TensorPtr>& ins) {
  using Out = std::optional<std::vector<TensorPtr>>;
  if (!opts_.evaluator || ins.empty()) return Out();  // sources (random generators among them) never fold
  size_t in_bytes = 0;
  for (const auto& t : ins) in_bytes += t->nbytes();
  auto p = opaque_params(n);
  if (!p) return p.error();
  ir::Node node;
  node.kind = OpKind::kOpaque;
  node.name = n.name();
  // Known output types let the executor store half-precision results in their dtype.
  for (int64_t slot : p->output_slots) {
    auto it = onnx_types_.find(n.output(static_cast<int>(slot)));
    if (it == onnx_types_.end()) {
      node.outputs.clear();
      break;
    }
    node.outputs.push_back(it->second);
  }
  const size_t used = p->output_slots.size();
  node.params = std::move(*p);
  if (!opts_.evaluator->can_evaluate(node)) return Out();
  // Where inference knows the result's size, a large one is not even computed (a Tile or Expand of a
  // constant to gigabytes would stay a node anyway).
  size_t typed_bytes = 0;
  for (const auto& t : node.outputs) typed_bytes += static_cast<size_t>(t.numel()) * ir::dtype_size(t.dtype);
  if (typed_bytes > std::max(in_bytes, ir::kMaxFoldGrowthBytes)) return Out();
  auto r = opts_.evaluator->evaluate(node, ins);
  if (!r) {  // the converters then report the node, or keep it opaque
    spdlog::debug("{}: not evaluating node '{}' ({}) on import: {}", label_, n.name(), n.op_type(), r.error().message);
    return Out();
  }
  size_t out_bytes = 0;
  for (const auto& t : *r) out_bytes += t->nbytes();
  if (r->size() != used || out_bytes > std::max(in_bytes, ir::kMaxFoldGrowthBytes)) return Out();
  return Out(std::move(*r));
}

Expected<bool> Importer::fold_through_evaluator(const onnx::NodeProto& n) {
  std::vector<TensorPtr> ins;
  for (int k = 0; k < n.input_size(); ++k) {
    if (n.input(k).empty()) continue;
    auto c = constant(n, k);
    if (!c) return false;
    ins.push_back(c);
  }
  auto r = evaluate_node(n, ins);
  if (!r) return r.error();
  if (!r->has_value()) return false;
  size_t k = 0;
  for (const auto& name : n.output()) {
    if (name.empty()) continue;
    const auto& t = (**r)[k++];
    values_[name] = Value{std::nullopt, t, t->type()};
  }
  if (stats_) ++stats_->folded_nodes;
  return true;
}

// Dynamic models: the value, at the representative sizes, of a node computed from shapes that vary.
// It is not folded (the written file computes it at run time) but gives the node's static type and
// lets the next node in the chain be typed in turn (a Range up to a sequence length, say).
std::unordered_map<std::string, TensorPtr> Importer::shadow_values(const onnx::NodeProto& n, bool varying_shape) {
  std::unordered_map<std::string, TensorPtr> out;
  std::vector<TensorPtr> slots, present;
  std::vector<std::optional<TensorType>> types;
  bool any_shadow = varying_shape;
  for (int k = 0; k < n.input_size(); ++k) {
    types.push_back(n.input(k).empty() ? std::nullopt : type_of(n.input(k)));
    if (n.input(k).empty()) {
      slots.push_back(nullptr);
      continue;
    }
    auto it = values_.find(n.input(k));
    TensorPtr v = it == values_.end() ? nullptr : it->second.constant ? it->second.constant : it->second.shadow;
    any_shadow = any_shadow || (v && it->second.shadow && !it->second.constant);
    if (!v && !varying_shape) return out;
    slots.push_back(v);
    if (v) present.push_back(v);
  }
  if (!any_shadow) return out;
  std::vector<TensorPtr> values;
  auto folded = fold_node(n, slots, types, opset_);
  if (folded && folded->has_value()) {
    values = **folded;
  } else if (!varying_shape) {
    auto r = evaluate_node(n, present);
    if (!r || !r->has_value()) return out;
    values = **r;
  }
  size_t k = 0;
  for (const auto& name : n.output()) {
    if (name.empty()) continue;
    if (k < values.size() && values[k] && values[k]->nbytes() <= ir::kMaxFoldGrowthBytes) out[name] = values[k];
    ++k;
  }
  return out;
}

Status Importer::convert_opaque(const onnx::NodeProto& n) {
  auto params = opaque_params(n);
  if (!params) return params.error();
  ir::OpaqueParams p = std::move(*params);
  std::vector<ValueRef> ins;
  for (int64_t k : p.input_slots) {
    auto r = ref(n.input(static_cast<int>(k)));
    if (!r) return r.error();
    ins.push_back(*r);
  }
  std::vector<TensorType> outs;
  std::vector<std::string> names;
  p.output_slots.clear();
  for (int k = 0; k < n.output_size(); ++k) {
    if (n.output(k).empty()) continue;
    auto it = onnx_types_.find(n.output(k));
    if (it == onnx_types_.end()) {
      if (auto sh = shadow_out_.find(n.output(k)); sh != shadow_out_.end()) onnx_types_[n.output(k)] = sh->second->type();
      else infer_node_types(n);
      it = onnx_types_.find(n.output(k));
    }
    if (it == onnx_types_.end())
      return Error::unsupported(label_ + ": cannot determine the static type of '" + n.output(k) + "', output of " +
                                n.op_type() + " node '" + n.name() + "' (an op rlflow keeps opaque)");
    outs.push_back(it->second);
    names.push_back(n.output(k));
    p.output_slots.push_back(k);
  }
  auto refs = b_.op_with_types(OpKind::kOpaque, std::move(ins), std::move(p), outs, n.name());
  if (!refs.empty()) b_.mutable_node(refs.front().node).output_names = names;
  for (size_t k = 0; k < refs.size(); ++k) values_[names[k]] = Value{refs[k], nullptr, outs[k]};
  if (stats_) ++stats_->opaque_nodes;
  spdlog::debug("{}: keeping {} node '{}' opaque", label_, n.op_type(), n.name());
  return {};
}

// A plain op (ir::OpInfo::plain): its row names the ONNX type and domain, its struct's fields are
// its attributes, and its record (ir/op_def.h) its inputs and the forms it models. One with an
// attribute that is not a field (a newer form than the IR models), a form its record does not
// model, or an opset past the record's stays opaque.
Expected<bool> Importer::convert_plain(const onnx::NodeProto& n) {
  static const std::map<std::pair<std::string, std::string>, OpKind> plain = [] {
    std::map<std::pair<std::string, std::string>, OpKind> m;
    for (int k = 0; k < ir::kNumOpKinds; ++k)
      if (const auto& info = ir::op_info(static_cast<OpKind>(k)); info.plain)
        m.emplace(std::pair{std::string(info.onnx_domain), std::string(info.onnx_type)}, info.kind);
    return m;
  }();
  const std::string domain = n.domain() == "ai.onnx" ? "" : n.domain();
  const auto it = plain.find({domain, n.op_type()});
  if (it == plain.end()) return false;
  const OpKind kind = it->second;
  const ir::OpInfo& info = ir::op_info(kind);
  int64_t opset = opset_;
  if (!domain.empty()) {
    opset = 0;
    for (const auto& o : model_.opset_import())
      if (o.domain() == domain) opset = o.version();
  }
  if (opset < info.since || (info.def && info.def->until && opset > info.def->until)) return false;
  if (n.domain().empty() || n.domain() == "ai.onnx")
    if (find_attr(n, "broadcast")) return false;  // pre-opset-7 broadcasting
  auto attrs = attributes_from_proto(n, base_dir_);
  if (!attrs) return bad_node(n, attrs.error().message);
  auto params = ir::plain_params(kind, **attrs);
  if (!params) {
    spdlog::debug("import: node '{}' ({}) stays opaque: {}", n.name(), n.op_type(), params.error().message);
    return false;
  }
  if (info.def && info.def->models)
    if (Status st = info.def->models(*params); !st.ok()) {
      spdlog::debug("import: node '{}' stays opaque: {}", n.name(), st.error().message);
      return false;
    }
  const ir::Arity arity = ir::plain_arity(kind);
  if (n.input_size() < arity.min || n.input_size() > arity.max) return bad_node(n, "wrong number of inputs");
  const int outputs = info.def ? info.def->outputs : 1;
  for (int k = outputs; k < n.output_size(); ++k)
    if (!n.output(k).empty()) return false;  // an output the IR does not model
  std::vector<ValueRef> ins;
  bool absent = false;  // optional inputs trail: one after an absent one keeps the node opaque
  for (int k = 0; k < n.input_size(); ++k) {
    if (!present(n, k)) {
      if (k < arity.min) return bad_node(n, "input " + std::to_string(k) + " is required");
      absent = true;
      continue;
    }
    if (absent) return false;
    auto r = ref(n.input(k));
    if (!r) return r.error();
    ins.push_back(*r);
  }
  auto out = emit(n, kind, std::move(ins), std::move(*params));
  if (!out) return out.error();
  return true;
}

Expected<bool> Importer::convert_known(const onnx::NodeProto& n) {
  const std::string& op = n.op_type();
  // Converters read typed parameters; a parameter given as a non-constant tensor makes the
  // node opaque rather than wrong.
  std::vector<ValueRef> ins;
  auto take = [&](int k) -> Status {
    auto r = ref(n.input(k));
    if (!r) return r.error();
    ins.push_back(*r);
    return {};
  };
  auto take_present = [&](int upto) -> Status {
    for (int k = 0; k < std::min(upto, n.input_size()); ++k)
      if (present(n, k)) RLFLOW_TRY_STATUS(take(k));
    return {};
  };
  auto in_type = [&](int k) { return type_of(n.input(k)); };
  auto rank_of = [&](int k) -> int64_t { auto t = in_type(k); return t ? t->rank() : -1; };
  auto norm_axis = [&](int64_t a, int64_t r) -> Expected<int64_t> {
    auto v = ir::normalize_axis(a, r);
    if (!v) return bad_node(n, v.error().message);
    return v;
  };
  auto done = [&](Expected<std::vector<ValueRef>> r) -> Expected<bool> {
    if (!r) return r.error();
    return true;
  };
  auto extra_outputs_used = [&](int keep) {
    for (int k = keep; k < n.output_size(); ++k)
      if (!n.output(k).empty()) return true;
    return false;
  };
  auto const_ints = [&](int k) -> std::optional<std::vector<int64_t>> {
    auto c = constant(n, k);
    if (!c || ir::is_float(c->dtype())) return std::nullopt;
    return c->as_int64();
  };

  // Pre-opset-7 broadcasting (broadcast/axis attributes) and non-spatial batch norm differ from
  // the semantics the IR models.
  if (find_attr(n, "broadcast") || (op == "BatchNormalization" && attr_int(n, "spatial", 1) == 0)) return false;

  static const std::unordered_map<std::string, OpKind> simple = {
      {"MatMul", OpKind::kMatMul}, {"Add", OpKind::kAdd}, {"Sub", OpKind::kSub}, {"Mul", OpKind::kMul},
      {"Div", OpKind::kDiv}, {"Pow", OpKind::kPow}, {"Sqrt", OpKind::kSqrt}, {"Relu", OpKind::kRelu},
      {"Sigmoid", OpKind::kSigmoid}, {"Tanh", OpKind::kTanh}, {"Erf", OpKind::kErf},
      {"GlobalAveragePool", OpKind::kGlobalAveragePool}};
  if (auto it = simple.find(op); it != simple.end()) {
    if (n.input_size() != (ir::is_elementwise_binary(it->second) || it->second == OpKind::kMatMul ? 2 : 1))
      return bad_node(n, "wrong number of inputs");
    RLFLOW_TRY_STATUS(take_present(2));
    return done(emit(n, it->second, ins, {}));
  }
  if (op == "Gelu") {
    const std::string approx = attr_string(n, "approximate", "none");
    if (approx != "none" && approx != "tanh") return bad_node(n, "unknown approximate='" + approx + "'");
    if (n.input_size() != 1) return bad_node(n, "wrong number of inputs");
    RLFLOW_TRY_STATUS(take(0));
    return done(emit(n, OpKind::kGelu, ins, ir::GeluParams{approx == "tanh"}));
  }
  if (op == "HardSigmoid" || op == "HardSwish") {
    if (n.input_size() != 1) return bad_node(n, "wrong number of inputs");
    RLFLOW_TRY_STATUS(take(0));
    if (op == "HardSwish") return done(emit(n, OpKind::kHardSwish, ins, {}));
    return done(emit(n, OpKind::kHardSigmoid, ins, ir::HardSigmoidParams{attr_float(n, "alpha", 0.2), attr_float(n, "beta", 0.5)}));
  }
  if (op == "Identity") {
    auto s = alias(n, n.input(0));
    if (!s.ok()) return s.error();
    return true;
  }
  if (op == "Dropout") {
    if (extra_outputs_used(1)) return false;
    if (opset_ >= 12 && present(n, 2)) {
      auto t = constant(n, 2);
      if (!t || t->numel() != 1 || t->as_int64()[0] != 0) return false;  // training mode (or malformed): kept opaque
    }
    auto s = alias(n, n.input(0));
    if (!s.ok()) return s.error();
    return true;
  }
  // Conv and BatchNormalization take floating-point tensors only (their schemas' T); an integer one
  // is a model no runtime runs.
  if (op == "Conv" || op == "BatchNormalization")
    for (int k = 0; k < n.input_size(); ++k)
      if (auto t = present(n, k) ? in_type(k) : std::nullopt; t && !ir::is_float(t->dtype))
        return bad_node(n, "input " + std::to_string(k) + " is " + std::string(ir::dtype_name(t->dtype)) + "; " + op + " takes floating-point tensors");
  if (op == "Conv") {
    auto x = in_type(0), w = in_type(1);
    if (!x || !w || x->rank() < 3 || w->rank() != x->rank()) return bad_node(n, "input and weight ranks disagree");
    const size_t nsp = static_cast<size_t>(x->rank() - 2);
    ir::ConvParams p;
    std::vector<int64_t> kernel(w->shape.begin() + 2, w->shape.end());
    if (auto ks = attr_ints(n, "kernel_shape"); ks && *ks != kernel) return bad_node(n, "kernel_shape disagrees with the weight");
    p.strides = attr_ints(n, "strides").value_or(spatial_default(nsp, 1));
    p.dilations = attr_ints(n, "dilations").value_or(spatial_default(nsp, 1));
    if (p.strides.size() != nsp || p.dilations.size() != nsp) return bad_node(n, "strides/dilations have the wrong length");
    auto pads = resolve_pads(n, x->shape, kernel, p.strides, p.dilations);
    if (!pads) return bad_node(n, pads.error().message);
    p.pads = *pads;
    p.group = attr_int(n, "group", 1);
    RLFLOW_TRY_STATUS(take_present(3));
    return done(emit(n, OpKind::kConv, ins, p));
  }
  if (op == "MaxPool" || op == "AveragePool") {
    if (extra_outputs_used(1)) return false;  // MaxPool indices
    auto x = in_type(0);
    if (!x || x->rank() < 3) return bad_node(n, "expects rank >= 3");
    const size_t nsp = static_cast<size_t>(x->rank() - 2);
    ir::PoolParams p;
    auto ks = attr_ints(n, "kernel_shape");
    if (!ks || ks->size() != nsp) return bad_node(n, "kernel_shape is required");
    p.kernel = *ks;
    p.strides = attr_ints(n, "strides").value_or(spatial_default(nsp, 1));
    auto dil = attr_ints(n, "dilations").value_or(spatial_default(nsp, 1));
    if (std::any_of(dil.begin(), dil.end(), [](int64_t d) { return d != 1; })) return false;
    if (p.strides.size() != nsp) return bad_node(n, "strides have the wrong length");
    auto pads = resolve_pads(n, x->shape, p.kernel, p.strides, dil);
    if (!pads) return bad_node(n, pads.error().message);
    p.pads = *pads;
    p.ceil_mode = attr_int(n, "ceil_mode", 0) != 0;
    p.count_include_pad = attr_int(n, "count_include_pad", 0) != 0;
    RLFLOW_TRY_STATUS(take(0));
    return done(emit(n, op == "MaxPool" ? OpKind::kMaxPool : OpKind::kAveragePool, ins, p));
  }
  if (op == "Gemm") {
    ir::GemmParams p;
    p.alpha = attr_float(n, "alpha", 1.0);
    p.beta = attr_float(n, "beta", 1.0);
    p.trans_a = attr_int(n, "transA", 0) != 0;
    p.trans_b = attr_int(n, "transB", 0) != 0;
    RLFLOW_TRY_STATUS(take_present(3));
    return done(emit(n, OpKind::kGemm, ins, p));
  }
  if (op == "BatchNormalization") {
    if (extra_outputs_used(1) || attr_int(n, "training_mode", 0) != 0) return false;
    ir::NormParams p;
    p.axis = 1;
    p.epsilon = attr_float(n, "epsilon", 1e-5);
    if (n.input_size() != 5) return bad_node(n, "expects 5 inputs");
    RLFLOW_TRY_STATUS(take_present(5));
    return done(emit(n, OpKind::kBatchNorm, ins, p));
  }
  if (op == "LayerNormalization") {
    if (extra_outputs_used(1)) return false;
    const int64_t r = rank_of(0);
    auto ax = norm_axis(attr_int(n, "axis", -1), r);
    if (!ax) return ax.error();
    ir::NormParams p{*ax, attr_float(n, "epsilon", 1e-5)};
    RLFLOW_TRY_STATUS(take_present(3));
    return done(emit(n, OpKind::kLayerNorm, ins, p));
  }
  if (op == "RMSNormalization") {
    if (extra_outputs_used(1)) return false;
    // stash_type is the type the statistics are computed in: float32 (1) is what the executor and
    // every runtime do for float inputs; another type would change the numbers.
    if (const int64_t stash = attr_int(n, "stash_type", 1); stash != 1)
      return Error::unsupported(label_ + ": node '" + n.name() + "' (RMSNormalization): stash_type " + std::to_string(stash) +
                                " is not supported (only 1, float32)");
    if (n.input_size() != 2) return bad_node(n, "expects 2 inputs (X, scale)");
    auto ax = norm_axis(attr_int(n, "axis", -1), rank_of(0));
    if (!ax) return ax.error();
    RLFLOW_TRY_STATUS(take_present(2));
    return done(emit(n, OpKind::kRMSNorm, ins, ir::NormParams{*ax, attr_float(n, "epsilon", 1e-5)}));
  }
  if (op == "Attention") {
    // Only the stateless form is modelled: no KV cache (past_key/past_value, present_* outputs), no
    // softcap, no exposed QK product, no nonpad_kv_seqlen (opset 24). Those change the function or
    // its outputs, so a node using them is refused rather than kept opaque.
    auto refuse = [&](const std::string& what) {
      return Error::unsupported(label_ + ": node '" + n.name() + "' (Attention): " + what + " is not supported");
    };
    if (n.input_size() < 3 || !present(n, 0) || !present(n, 1) || !present(n, 2))
      return bad_node(n, "expects inputs Q, K, V and an optional attn_mask");
    if (present(n, 4) || present(n, 5)) return refuse("a KV cache (past_key / past_value)");
    if (present(n, 6)) return refuse("nonpad_kv_seqlen");
    if (n.input_size() > 7) return bad_node(n, "too many inputs");
    if (extra_outputs_used(1)) return refuse("an output other than Y (present_key, present_value, qk_matmul_output)");
    if (attr_float(n, "softcap", 0.0) != 0.0) return refuse("softcap");
    if (attr_int(n, "qk_matmul_output_mode", 0) != 0) return refuse("qk_matmul_output_mode other than 0");
    const int64_t r = rank_of(0);
    if (r != 3 && r != 4) return refuse("Q of rank " + std::to_string(r) + " (only 3-D or 4-D with a known rank)");
    ir::AttentionParams p;
    p.is_causal = attr_int(n, "is_causal", 0) != 0;
    p.scale = attr_float(n, "scale", 0.0);
    p.q_num_heads = attr_int(n, "q_num_heads", 0);
    p.kv_num_heads = attr_int(n, "kv_num_heads", 0);
    if (find_attr(n, "scale") && p.scale == 0.0) return refuse("scale 0");
    if (present(n, 3)) {
      // A mask narrower than the keys (padded with -inf in onnx's reference) is not modelled.
      auto m = in_type(3), k = in_type(1);
      if (m && k && m->rank() >= 1 && k->rank() == r) {
        const int64_t len = k->shape[static_cast<size_t>(r == 4 ? 2 : 1)], last = m->shape.back();
        if (last != 1 && last != len) return refuse("an attn_mask narrower than the key sequence");
      }
    }
    RLFLOW_TRY_STATUS(take_present(4));
    return done(emit(n, OpKind::kAttention, ins, p));
  }
  if (op == "Softmax") {
    const int64_t r = rank_of(0);
    auto ax = norm_axis(attr_int(n, "axis", opset_ >= 13 ? -1 : 1), r);
    if (!ax) return ax.error();
    if (opset_ < 13 && *ax != r - 1) return false;  // old semantics flatten to 2-D first
    RLFLOW_TRY_STATUS(take(0));
    return done(emit(n, OpKind::kSoftmax, ins, ir::AxisParams{*ax}));
  }
  if (op == "ReduceMean") {
    // The IR's ReduceMean is a float mean; an integer one stays an ONNX op (its runtime's rounding).
    if (auto t = in_type(0); !t || !ir::is_float(t->dtype)) return false;
    const int64_t r = rank_of(0);
    std::vector<int64_t> axes;
    if (opset_ >= 18) {
      if (present(n, 1)) {
        auto a = const_ints(1);
        if (!a) return false;
        axes = *a;
      }
      if (axes.empty() && attr_int(n, "noop_with_empty_axes", 0) != 0) {
        auto s = alias(n, n.input(0));
        if (!s.ok()) return s.error();
        return true;
      }
    } else {
      axes = attr_ints(n, "axes").value_or(std::vector<int64_t>{});
    }
    for (auto& a : axes) {
      auto v = norm_axis(a, r);
      if (!v) return v.error();
      a = *v;
    }
    if (axes.empty())
      for (int64_t d = 0; d < r; ++d) axes.push_back(d);
    std::sort(axes.begin(), axes.end());
    axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
    RLFLOW_TRY_STATUS(take(0));
    return done(emit(n, OpKind::kReduceMean, ins, ir::AxesParams{axes, attr_int(n, "keepdims", 1) != 0}));
  }
  if (op == "Concat") {
    auto ax = norm_axis(attr_int(n, "axis", 0), rank_of(0));
    if (!ax) return ax.error();
    RLFLOW_TRY_STATUS(take_present(n.input_size()));
    return done(emit(n, OpKind::kConcat, ins, ir::AxisParams{*ax}));
  }
  if (op == "Split") {
    auto x = in_type(0);
    if (!x) return bad_node(n, "unknown input type");
    auto ax = norm_axis(attr_int(n, "axis", 0), x->rank());
    if (!ax) return ax.error();
    if (varies(n.input(0), *ax, *ax + 1)) return false;  // its sizes would bake in this input's extent
    std::vector<int64_t> sizes;
    if (opset_ >= 13 && present(n, 1)) {
      auto s = const_ints(1);
      if (!s) return false;
      sizes = *s;
    } else if (auto s = attr_ints(n, "split")) {
      sizes = *s;
    } else {
      const int64_t parts = opset_ >= 18 && find_attr(n, "num_outputs") ? attr_int(n, "num_outputs", 1) : n.output_size();
      const int64_t dim = x->shape[static_cast<size_t>(*ax)];
      const int64_t chunk = (dim + parts - 1) / parts;
      for (int64_t k = 0, left = dim; k < parts; ++k, left -= chunk) sizes.push_back(std::min(chunk, std::max<int64_t>(left, 0)));
    }
    if (static_cast<int>(sizes.size()) != n.output_size()) return bad_node(n, "number of outputs differs from split sizes");
    RLFLOW_TRY_STATUS(take(0));
    return done(emit(n, OpKind::kSplit, ins, ir::SplitParams{*ax, sizes}, static_cast<int>(sizes.size())));
  }
  if (op == "Transpose") {
    const int64_t r = rank_of(0);
    auto perm = attr_ints(n, "perm").value_or(std::vector<int64_t>{});
    if (perm.empty())
      for (int64_t d = r - 1; d >= 0; --d) perm.push_back(d);
    RLFLOW_TRY_STATUS(take(0));
    return done(emit(n, OpKind::kTranspose, ins, ir::TransposeParams{perm}));
  }
  if (op == "Reshape") {
    auto x = in_type(0);
    auto spec = const_ints(1);
    if (!x || !spec) return false;
    const bool allowzero = attr_int(n, "allowzero", 0) != 0;
    // A 0 or -1 resolved against a varying extent would bake in this input's size.
    const bool relative = std::any_of(spec->begin(), spec->end(), [&](int64_t v) { return v == -1 || (v == 0 && !allowzero); });
    if (relative && varies(n.input(0), 0, x->rank())) return false;
    ir::Shape s;
    int64_t known = 1, infer_at = -1;
    for (size_t d = 0; d < spec->size(); ++d) {
      int64_t v = (*spec)[d];
      if (v == 0 && !allowzero) {
        if (d >= x->shape.size()) return bad_node(n, "0 refers past the input's rank");
        v = x->shape[d];
      }
      if (v == -1) {
        if (infer_at >= 0) return bad_node(n, "more than one -1 in the target shape");
        infer_at = static_cast<int64_t>(d);
      } else if (v < 0) {
        return bad_node(n, "negative target dimension");
      } else if (__builtin_mul_overflow(known, v, &known)) {
        return bad_node(n, "target shape has more elements than int64 can count");
      }
      s.push_back(v);
    }
    if (infer_at >= 0) {
      if (known == 0 || x->numel() % known != 0) return bad_node(n, "cannot infer the -1 dimension");
      s[static_cast<size_t>(infer_at)] = x->numel() / known;
    }
    RLFLOW_TRY_STATUS(take(0));
    return done(emit(n, OpKind::kReshape, ins, ir::ReshapeParams{s}));
  }
  if (op == "Flatten") {
    const int64_t r = rank_of(0);
    int64_t a = attr_int(n, "axis", 1);
    if (a < 0) a += r;
    if (a < 0 || a > r) return bad_node(n, "axis out of range");
    RLFLOW_TRY_STATUS(take(0));
    return done(emit(n, OpKind::kFlatten, ins, ir::AxisParams{a}));
  }
  if (op == "Squeeze" || op == "Unsqueeze") {
    auto x = in_type(0);
    if (!x) return bad_node(n, "unknown input type");
    std::vector<int64_t> axes;
    if (opset_ >= 13) {
      if (present(n, 1)) {
        auto a = const_ints(1);
        if (!a) return false;
        axes = *a;
      }
    } else {
      axes = attr_ints(n, "axes").value_or(std::vector<int64_t>{});
    }
    const int64_t r = op == "Squeeze" ? x->rank() : x->rank() + static_cast<int64_t>(axes.size());
    if (op == "Squeeze" && axes.empty())
      for (int64_t d = 0; d < r; ++d)
        if (x->shape[static_cast<size_t>(d)] == 1) axes.push_back(d);
    for (auto& a : axes) {
      auto v = norm_axis(a, r);
      if (!v) return v.error();
      a = *v;
    }
    std::sort(axes.begin(), axes.end());
    if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) return bad_node(n, "repeated axis");
    RLFLOW_TRY_STATUS(take(0));
    return done(emit(n, op == "Squeeze" ? OpKind::kSqueeze : OpKind::kUnsqueeze, ins, ir::AxesParams{axes, true}));
  }
  if (op == "Clip") {
    ir::ClipParams p;
    if (opset_ < 11) {
      p.min = attr_float(n, "min", -std::numeric_limits<float>::max());
      p.max = attr_float(n, "max", std::numeric_limits<float>::max());
    } else {
      for (int k = 1; k <= 2; ++k) {
        if (!present(n, k)) continue;
        auto c = constant(n, k);
        if (!c || c->numel() != 1) return false;
        (k == 1 ? p.min : p.max) = c->as_double()[0];
      }
    }
    RLFLOW_TRY_STATUS(take(0));
    return done(emit(n, OpKind::kClip, ins, p));
  }
  if (op == "Cast") {
    auto dt = dtype_from_onnx(static_cast<int32_t>(attr_int(n, "to", 0)), "Cast target of node '" + n.name() + "'");
    if (!dt) return bad(dt.error().message);
    RLFLOW_TRY_STATUS(take(0));
    return done(emit(n, OpKind::kCast, ins, ir::CastParams{*dt}));
  }
  if (op == "Pad") {
    auto x = in_type(0);
    if (!x) return bad_node(n, "unknown input type");
    ir::PadParams p;
    const std::string mode = attr_string(n, "mode", "constant");
    if (mode == "constant") p.mode = ir::PadMode::kConstant;
    else if (mode == "reflect") p.mode = ir::PadMode::kReflect;
    else if (mode == "edge") p.mode = ir::PadMode::kEdge;
    else return false;
    if (opset_ < 11) {
      p.pads = attr_ints(n, "pads").value_or(std::vector<int64_t>{});
      p.value = attr_float(n, "value", 0.0);
    } else {
      auto pads = const_ints(1);
      if (!pads) return false;
      p.pads = *pads;
      if (present(n, 3)) {  // opset 18: pads for the listed axes only
        auto axes = const_ints(3);
        if (!axes || pads->size() != 2 * axes->size()) return false;
        const int64_t r = x->rank();
        p.pads.assign(static_cast<size_t>(2 * r), 0);
        for (size_t k = 0; k < axes->size(); ++k) {
          auto a = norm_axis((*axes)[k], r);
          if (!a) return a.error();
          p.pads[static_cast<size_t>(*a)] = (*pads)[k];
          p.pads[static_cast<size_t>(*a + r)] = (*pads)[k + axes->size()];
        }
      }
      if (present(n, 2)) {
        auto c = constant(n, 2);
        if (!c || c->numel() != 1) return false;
        p.value = c->as_double()[0];
      }
    }
    if (static_cast<int64_t>(p.pads.size()) != 2 * x->rank()) return bad_node(n, "pads must have 2*rank entries");
    RLFLOW_TRY_STATUS(take(0));
    return done(emit(n, OpKind::kPad, ins, p));
  }
  if (op == "Slice") {
    auto x = in_type(0);
    if (!x) return bad_node(n, "unknown input type");
    std::vector<int64_t> starts, ends, axes, steps;
    if (opset_ < 10) {
      starts = attr_ints(n, "starts").value_or(std::vector<int64_t>{});
      ends = attr_ints(n, "ends").value_or(std::vector<int64_t>{});
      axes = attr_ints(n, "axes").value_or(std::vector<int64_t>{});
    } else {
      auto s = const_ints(1), e = const_ints(2);
      if (!s || !e) return false;
      starts = *s;
      ends = *e;
      if (present(n, 3)) {
        auto a = const_ints(3);
        if (!a) return false;
        axes = *a;
      }
      if (present(n, 4)) {
        auto st = const_ints(4);
        if (!st) return false;
        steps = *st;
      }
    }
    if (axes.empty())
      for (size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<int64_t>(k));
    if (steps.empty()) steps.assign(starts.size(), 1);
    if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
      return bad_node(n, "starts/ends/axes/steps lengths differ");
    ir::SliceParams p;
    for (size_t k = 0; k < axes.size(); ++k) {
      auto a = norm_axis(axes[k], x->rank());
      if (!a) return a.error();
      if (varies(n.input(0), *a, *a + 1)) return false;  // clamped bounds would bake in this extent
      const int64_t dim = x->shape[static_cast<size_t>(*a)];
      if (steps[k] == 0) return bad_node(n, "step 0");
      const auto b = ir::onnx_slice_bounds(starts[k], ends[k], steps[k], dim);
      p.axes.push_back(*a);
      p.starts.push_back(b.start);
      p.ends.push_back(b.len == 0 ? b.start : b.end);
      p.steps.push_back(steps[k]);
    }
    RLFLOW_TRY_STATUS(take(0));
    return done(emit(n, OpKind::kSlice, ins, p));
  }
  if (op == "Gather") {
    auto ax = norm_axis(attr_int(n, "axis", 0), rank_of(0));
    if (!ax) return ax.error();
    // Negative constant indices are normalised so the executor and rules see one form.
    if (auto c = constant(n, 1); c && !ir::is_float(c->dtype())) {
      const int64_t dim = in_type(0)->shape[static_cast<size_t>(*ax)];
      auto idx = c->as_int64();
      bool changed = false;
      for (auto& v : idx) {
        if (v < -dim || v >= dim) return bad_node(n, "index " + std::to_string(v) + " out of range");
        if (v < 0) { v += dim; changed = true; }
      }
      if (changed) {
        auto t = ir::Tensor::from_vector<int64_t>(ir::DType::kInt64, c->shape(), idx);
        values_[n.input(1) + "__normalised"] = Value{std::nullopt, t, t->type()};
        RLFLOW_TRY_STATUS(take(0));
        auto r = ref(n.input(1) + "__normalised");
        if (!r) return r.error();
        ins.push_back(*r);
        return done(emit(n, OpKind::kGather, ins, ir::AxisParams{*ax}));
      }
    }
    RLFLOW_TRY_STATUS(take_present(2));
    return done(emit(n, OpKind::kGather, ins, ir::AxisParams{*ax}));
  }
  return false;
}

Status Importer::check_arity(const onnx::NodeProto& n) const {
  // Converters index inputs and outputs by position, and ONNX's own shape inference trusts nodes
  // (fuzzed Conv nodes crashed libonnx): every standard node is checked against its schema first
  // (arity, attribute names and types). The linked onnx library may predate the model's opset;
  // newer versions of an op only ever gained optional inputs, so then only the minimum is checked.
  if (!(n.domain().empty() || n.domain() == "ai.onnx")) return {};
  // ONNX's shape inference also divides by some attributes without checking them (a MaxPool with a
  // zero stride stopped rlflow with SIGFPE in convPoolShapeInference; found by scripts/checks/fuzz), and the
  // schema does not bound their values. These names mean an extent or a count in every ONNX op.
  static const std::set<std::string> positive = {"strides", "dilations", "kernel_shape", "blocksize", "group", "num_outputs"};
  for (const auto& a : n.attribute()) {
    if (!positive.count(a.name())) continue;
    bool ok = !(a.type() == onnx::AttributeProto::INT && a.i() <= 0);
    for (auto v : a.ints()) ok = ok && v > 0;
    if (!ok) return bad_node(n, "attribute '" + a.name() + "' must be positive");
  }
  static const int known_opset = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map().at("").second;
  const auto* schema = onnx::OpSchemaRegistry::Schema(n.op_type(), static_cast<int>(opset_), "");
  // An op the default domain does not define at this opset is no ONNX model any runtime loads (a
  // custom op belongs in its own domain), and onnx::checker would refuse the output.
  if (!schema && opset_ <= known_opset)
    return Error::unsupported(label_ + ": node '" + n.name() + "' has op type '" + n.op_type() +
                              "', which the ONNX default domain does not define at opset " + std::to_string(opset_) +
                              " (a custom op needs its own domain)");
  if (!schema) return {};
  if (opset_ <= known_opset) {
    try {
      schema->Verify(n);
    } catch (const std::exception& e) {
      std::string why = e.what();
      return bad_node(n, "does not match the " + n.op_type() + " schema: " + why.substr(0, why.find('\n')));
    }
    return {};
  }
  if (n.input_size() < schema->min_input() || n.output_size() < schema->min_output())
    return bad_node(n, "has " + std::to_string(n.input_size()) + " inputs and " + std::to_string(n.output_size()) + " outputs; " +
                           n.op_type() + " needs at least " + std::to_string(schema->min_input()) + " and " +
                           std::to_string(schema->min_output()));
  return {};
}

Expected<ir::Graph> Importer::run() {
  RLFLOW_TRY_STATUS(read_meta());
  RLFLOW_TRY_STATUS(read_initializers());
  RLFLOW_TRY_STATUS(read_inputs());
  if (stats_) stats_->dynamic_dims = dim_sizes_;  // known even when a later node fails
  auto order = sorted_nodes();
  if (!order) return order.error();
  for (const auto* n : *order) RLFLOW_TRY_STATUS(check_arity(*n));
  RLFLOW_TRY_STATUS(infer_onnx_types());
  if (dynamic()) infer_varying_axes();
  for (const auto* n : *order) RLFLOW_TRY_STATUS(convert_node(*n));
  std::unordered_set<std::string> out_names;
  for (const auto& o : model_.graph().output()) {
    if (!out_names.insert(o.name()).second) return bad("graph output '" + o.name() + "' is declared twice");
    auto r = ref(o.name());
    if (!r) return bad("graph output '" + o.name() + "' is not produced by any node");
    if (o.type().has_tensor_type() && o.type().tensor_type().elem_type() != 0) {
      auto dt = dtype_from_onnx(o.type().tensor_type().elem_type(), "graph output '" + o.name() + "'");
      if (!dt) return bad(dt.error().message);
      if (*dt != b_.type(*r).dtype) return bad("graph output '" + o.name() + "' is declared " +
                                               std::string(ir::dtype_name(*dt)) + " but computed as " + b_.type(*r).str());
    }
    b_.output(*r, o.name());
    // A dynamic model's outputs keep their declared symbolic dims (unknown ones where undeclared).
    if (dynamic()) {
      const auto rank = b_.type(*r).rank();
      std::vector<std::string> sym(static_cast<size_t>(rank), "?");
      if (o.type().tensor_type().has_shape() && o.type().tensor_type().shape().dim_size() == rank)
        for (int a = 0; a < rank; ++a) {
          const auto& d = o.type().tensor_type().shape().dim(a);
          sym[static_cast<size_t>(a)] = d.has_dim_value() || opts_.fixed_dims.count(d.dim_param()) ? std::string()
                                        : d.dim_param().empty()                                ? std::string("?")
                                                                                               : d.dim_param();
        }
      if (std::any_of(sym.begin(), sym.end(), [](const std::string& x) { return !x.empty(); })) symbolic_[o.name()] = sym;
    }
  }
  if (stats_) stats_->dynamic_dims = dim_sizes_;
  ir::Graph g = ir::remove_dead_nodes(std::move(b_).build());
  g.meta().symbolic_dims = symbolic_;
  if (opts_.evaluator) {
    auto folded = ir::fold_constants(g, *opts_.evaluator);
    if (!folded) return folded.error().with_context(label_);
    g = std::move(*folded);
  }
  auto v = ir::validate(g);
  if (!v.ok()) return v.error().with_context(label_);
  return g;
}

}  // namespace

namespace {
Expected<ir::Graph> import_parsed(onnx::ModelProto& model, const std::string& label, const std::string& base_dir,
                                  const ImportOptions& opts, ImportStats* stats) {
  ImportStats local;
  Importer imp(model, label, base_dir, opts, stats ? stats : &local);
  return imp.run();
}
const char* kNotOnnx = ": not an ONNX model (protobuf parsing failed: truncated, or not protobuf at all)";
}  // namespace

Expected<ir::Graph> import_model(const std::string& bytes, const std::string& label, const std::string& base_dir,
                                 const ImportOptions& opts, ImportStats* stats) {
  if (bytes.empty()) return Error::bad_input(label + ": the file is empty");
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes)) return Error::bad_input(label + kNotOnnx);
  return import_parsed(model, label, base_dir, opts, stats);
}

Expected<ir::Graph> import_model_file(const std::string& path, const ImportOptions& opts, ImportStats* stats) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) return Error::bad_input(path + ": no such file");
  if (fs::is_directory(path, ec)) return Error::bad_input(path + ": is a directory, not an ONNX file");
  RLFLOW_TRY_STATUS(check_input_file(path));
  std::ifstream f(path, std::ios::binary);
  if (!f) return Error::bad_input(path + ": cannot open for reading");
  if (fs::file_size(path, ec) == 0) return Error::bad_input(path + ": the file is empty");
  onnx::ModelProto model;
  // Parsing straight from the stream avoids holding the file's bytes and the message at once.
  if (!model.ParseFromIstream(&f)) return Error::bad_input(path + kNotOnnx);
  auto dir = fs::path(path).parent_path().string();
  return import_parsed(model, path, dir.empty() ? "." : dir, opts, stats);
}

namespace {

void collect_external(const onnx::GraphProto& g, const std::filesystem::path& dir, std::set<std::string>* out) {
  auto add = [&](const onnx::TensorProto& t) {
    if (t.data_location() != onnx::TensorProto::EXTERNAL) return;
    for (const auto& kv : t.external_data())
      if (kv.key() == "location" && !kv.value().empty()) out->insert((dir / kv.value()).string());
  };
  for (const auto& t : g.initializer()) add(t);
  for (const auto& n : g.node())
    for (const auto& a : n.attribute()) {
      if (a.has_t()) add(a.t());
      for (const auto& t : a.tensors()) add(t);
      if (a.has_g()) collect_external(a.g(), dir, out);
      for (const auto& sg : a.graphs()) collect_external(sg, dir, out);
    }
}

}  // namespace

std::vector<std::string> model_files(const std::string& path) {
  std::vector<std::string> files{path};
  if (!check_input_file(path).ok()) return files;  // never opens a FIFO: import refuses it next
  std::ifstream f(path, std::ios::binary);
  onnx::ModelProto model;
  if (!f || !model.ParseFromIstream(&f)) return files;
  std::set<std::string> ext;
  const auto dir = std::filesystem::path(path).parent_path();
  collect_external(model.graph(), dir.empty() ? std::filesystem::path(".") : dir, &ext);
  files.insert(files.end(), ext.begin(), ext.end());
  return files;
}

}  // namespace rlflow::onnxio
