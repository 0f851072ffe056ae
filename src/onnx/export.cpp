#include "onnx_lib.h"
#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <unistd.h>
#include <onnx/shape_inference/implementation.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <set>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "proto_io.h"
#include "rlflow/ir/op_def.h"
#include "rlflow/onnx/model_io.h"
#include "rlflow/util/file_io.h"

namespace rlflow::onnxio {

using ir::Node;
using ir::NodeId;
using ir::OpKind;
using ir::TensorPtr;
using ir::ValueRef;

namespace {

// Highest default-domain opset and IR version the linked ONNX library can check (onnx 1.19.1, from
// scripts/setup/build_onnx: opset 24, IR 12). Newer files are exported unchecked rather than refused.
int64_t max_known_opset() { return onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map().at("").second; }
int64_t max_known_ir_version() { return onnx::Version::IR_VERSION; }

// Weights written after the rest of the model (streamed) instead of being copied into it.
using BulkList = std::vector<std::pair<std::string, ir::TensorPtr>>;
constexpr size_t kBulkBytes = 1024;  // float weights only: shape-like integer tensors stay inline

class Exporter {
 public:
  // With `bulk`, large weights become header-only initializers (name, type, dims, empty data) and
  // are listed in *bulk for the caller to stream; small ones stay inline.
  Exporter(const ir::Graph& g, onnx::ModelProto* m, BulkList* bulk = nullptr) : g_(g), m_(m), gp_(m->mutable_graph()), bulk_(bulk) {}
  // The same graph at other bindings of a dynamic model's symbols, node for node: shape operands
  // are then written so that they hold at every binding (see reshape_at_every_size).
  void set_other_bindings(std::vector<ir::Graph> others) { others_ = std::move(others); }
  Status run();

 private:
  std::string fresh(const std::string& base) {
    std::string name = base;
    for (int k = 1; used_.count(name); ++k) name = base + "_" + std::to_string(k);
    used_.insert(name);
    return name;
  }
  const std::string& name_of(ValueRef v) const { return names_[static_cast<size_t>(v.node)][static_cast<size_t>(v.index)]; }
  void assign_names();
  onnx::NodeProto* add_node(const std::string& op, const Node& src, std::vector<std::string> ins, std::vector<std::string> outs);
  std::string add_initializer(const TensorPtr& t, const std::string& base);
  std::string ints_initializer(const std::vector<int64_t>& v, const std::string& base) {
    return add_initializer(ir::Tensor::i64(v), base);
  }
  std::string scalar_like(double v, ir::DType dt, const std::string& base);
  // `op` with an int list that is an attribute (`attr`) below opset `input_from` and its last input
  // from it on (ReduceMean's axes from 18; Squeeze, Unsqueeze's axes and Split's split from 13).
  onnx::NodeProto* add_with_ints(const std::string& op, const Node& src, std::vector<std::string> ins, std::vector<std::string> outs,
                                 const std::string& attr, const std::vector<int64_t>& v, int64_t input_from) {
    if (opset_ >= input_from) ins.push_back(ints_initializer(v, outs[0] + "_" + attr));
    auto* c = add_node(op, src, std::move(ins), std::move(outs));
    if (opset_ < input_from) set_ints(c, attr, v);
    return c;
  }
  // sqrt(mean(v^2 over the axes from `axis` on) + eps) as PyTorch writes it, Pow(v, 2) included
  // (onnxruntime's LayerNorm and SimplifiedLayerNorm fusions look for that form; Pow's exponent type
  // admits bfloat16 only from opset 15, so it is float32 there). The LayerNorm and RMSNorm chains
  // below their ops' opsets share it. Returns the result's name.
  std::string root_mean_square(const std::string& v, const ir::NormParams& p, const ir::TensorType& t, const std::string& out) {
    std::vector<int64_t> axes;
    for (int64_t d = p.axis; d < t.rank(); ++d) axes.push_back(d);
    const Node anon;
    const std::string sq = fresh(out + "_sq"), ms = fresh(out + "_ms"), mse = fresh(out + "_mseps"), rms = fresh(out + "_rms");
    add_node("Pow", anon, {v, scalar_like(2.0, t.dtype == ir::DType::kBFloat16 ? ir::DType::kFloat32 : t.dtype, out + "_two")}, {sq});
    add_with_ints("ReduceMean", anon, {sq}, {ms}, "axes", axes, 18);
    add_node("Add", anon, {ms, scalar_like(p.epsilon, t.dtype, out + "_eps")}, {mse});
    add_node("Sqrt", anon, {mse}, {rms});
    return rms;
  }
  Status emit(NodeId id);
  // A Reshape of a dynamic model whose target shape holds at every binding: an axis of the same
  // size at every binding is written as that size, one that copies the input's axis as 0, one
  // varying axis as -1, and any other varying axis is read at run time (Shape) from the first value
  // that has that size at every binding. Refused when no such value exists.
  Status reshape_at_every_size(const Node& n, NodeId id, std::vector<std::string> ins, const std::vector<std::string>& outs);
  void set_ints(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (auto x : v) a->add_ints(x);
  }
  void set_int(onnx::NodeProto* n, const std::string& name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  void set_float(onnx::NodeProto* n, const std::string& name, double v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(static_cast<float>(v));
  }
  void set_string(onnx::NodeProto* n, const std::string& name, const std::string& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
  }
  // A graph input or output: a dynamic model's symbolic dims are written back as declared.
  void value_info(onnx::ValueInfoProto* vi, const std::string& name, const ir::TensorType& t) {
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(dtype_to_onnx(t.dtype));
    auto* s = tt->mutable_shape();
    auto sym = g_.meta().symbolic_dims.find(name);
    const bool keep = sym != g_.meta().symbolic_dims.end() && sym->second.size() == t.shape.size();
    for (size_t a = 0; a < t.shape.size(); ++a) {
      auto* d = s->add_dim();
      const std::string param = keep ? sym->second[a] : std::string();
      if (param.empty()) d->set_dim_value(t.shape[a]);
      else if (param != "?") d->set_dim_param(param);
    }
  }

  const ir::Graph& g_;
  std::vector<ir::Graph> others_;
  onnx::ModelProto* m_;
  onnx::GraphProto* gp_;
  BulkList* bulk_;
  std::unordered_set<std::string> used_;        // tensor names
  std::unordered_set<std::string> used_nodes_;  // node names
  std::vector<std::vector<std::string>> names_;
  std::vector<std::pair<ValueRef, std::string>> identity_outputs_;  // outputs that need an Identity
  std::vector<bool> duplicate_weight_;  // a weight with the same type and bytes as an earlier one
  int64_t opset_ = 0;
};

void Exporter::assign_names() {
  names_.resize(g_.size());
  for (size_t i = 0; i < g_.size(); ++i) names_[i].resize(g_.node(static_cast<NodeId>(i)).outputs.size());
  // Graph outputs keep their names exactly: claim them first.
  std::set<ValueRef> claimed;
  for (const auto& o : g_.outputs()) used_.insert(o.name);
  for (const auto& o : g_.outputs()) {
    const auto& n = g_.node(o.value.node);
    const bool producer_is_op = n.kind != OpKind::kInput && n.kind != OpKind::kWeight;
    // A graph input listed as an output under its own name is written as both, with no node
    // between (an Identity would assign the name a second time, which SSA forbids).
    if (n.kind == OpKind::kInput && n.name == o.name) continue;
    if (producer_is_op && claimed.insert(o.value).second) names_[static_cast<size_t>(o.value.node)][static_cast<size_t>(o.value.index)] = o.name;
    else identity_outputs_.emplace_back(o.value, o.name);
  }
  for (auto id : g_.inputs()) {
    auto& nm = names_[static_cast<size_t>(id)][0];
    if (nm.empty()) nm = g_.node(id).name;
    used_.insert(nm);
  }
  // Equal weights are written once and read under one name: a weight an export shares between
  // layers arrives here as several nodes (one per rewritten reader, or per folded Transpose of it).
  duplicate_weight_.assign(g_.size(), false);
  std::vector<size_t> original(g_.size());
  std::unordered_map<uint64_t, std::vector<size_t>> weights_by_hash;
  for (size_t i = 0; i < g_.size(); ++i) {
    const auto& n = g_.node(static_cast<NodeId>(i));
    if (n.kind != OpKind::kWeight || !n.value) continue;
    auto& same_hash = weights_by_hash[n.value->content_hash()];
    for (size_t j : same_hash) {
      const auto& first = g_.node(static_cast<NodeId>(j)).value;
      if (first->type() == n.value->type() && first->same_content(*n.value)) {
        duplicate_weight_[i] = true;
        original[i] = j;
        break;
      }
    }
    if (!duplicate_weight_[i]) same_hash.push_back(i);
  }
  for (size_t i = 0; i < g_.size(); ++i) {
    const auto& n = g_.node(static_cast<NodeId>(i));
    if (duplicate_weight_[i]) names_[i][0] = names_[original[i]][0];  // named already: original[i] < i
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      auto& nm = names_[i][k];
      if (!nm.empty()) continue;
      std::string want = k < n.output_names.size() ? n.output_names[k] : std::string();
      if (want.empty() && (n.kind == OpKind::kWeight)) want = n.name;
      if (want.empty()) want = std::string(ir::op_name(n.kind)) + "_" + std::to_string(i) + (k ? "_" + std::to_string(k) : "");
      nm = fresh(want);
    }
  }
}

onnx::NodeProto* Exporter::add_node(const std::string& op, const Node& src, std::vector<std::string> ins,
                                    std::vector<std::string> outs) {
  auto* n = gp_->add_node();
  n->set_op_type(op);
  // Node names live in their own namespace: a node may share its name with a tensor.
  std::string nm = src.name.empty() ? op + "_" + outs.front() : src.name;
  for (int k = 1; !used_nodes_.insert(nm).second; ++k) nm = (src.name.empty() ? op + "_" + outs.front() : src.name) + "_" + std::to_string(k);
  n->set_name(nm);
  for (auto& s : ins) n->add_input(s);
  for (auto& s : outs) n->add_output(s);
  return n;
}

std::string Exporter::add_initializer(const TensorPtr& t, const std::string& base) {
  std::string name = fresh(base);
  tensor_to_proto(*t, name, gp_->add_initializer());
  return name;
}

std::string Exporter::scalar_like(double v, ir::DType dt, const std::string& base) {
  const bool keep = ir::is_float(dt) || dt == ir::DType::kInt64 || dt == ir::DType::kInt32;
  return add_initializer(ir::Tensor::from_doubles(keep ? dt : ir::DType::kFloat32, {}, {v}), base);
}

Status Exporter::emit(NodeId id) {
  const Node& n = g_.node(id);
  std::vector<std::string> ins;
  for (const auto& v : n.inputs) ins.push_back(name_of(v));
  std::vector<std::string> outs = names_[static_cast<size_t>(id)];
  const std::string& out = outs.front();
  auto plain = [&](const std::string& op) { return add_node(op, n, ins, outs); };
  auto norm_op = [&](const std::string& op, const ir::NormParams& p) -> Status {
    auto* c = plain(op);
    set_int(c, "axis", p.axis);
    set_float(c, "epsilon", p.epsilon);
    return {};
  };
  if (const auto& info = ir::op_info(n.kind); info.plain && !(info.def && info.def->lowered_below_since && opset_ < info.since)) {
    // the ONNX op of the same name, its fields as attributes (below `since`, a lowering: the switch)
    const std::string domain(info.onnx_domain);
    int64_t opset = domain.empty() ? opset_ : 0;
    if (!domain.empty()) {  // another domain: its opset import, added at the op's first opset where the model has none
      for (const auto& o : m_->opset_import())
        if (o.domain() == domain) opset = o.version();
      if (opset == 0) {
        auto* o = m_->add_opset_import();
        o->set_domain(domain);
        o->set_version(opset = info.since);
      }
    }
    if (opset < info.since || (info.def && info.def->until && opset > info.def->until))
      return Error::unsupported(std::string(info.onnx_type) + " is modelled at opsets " + std::to_string(info.since) +
                                (info.def && info.def->until ? " to " + std::to_string(info.def->until) : " on") +
                                ", the output is opset " + std::to_string(opset));
    auto* c = plain(std::string(info.onnx_type));
    if (!domain.empty()) c->set_domain(domain);
    // Each field as its attribute, where it differs from the struct's default (ONNX's default for
    // that attribute): a default that float32 cannot hold (0.01) then reimports as it was.
    const ir::Attributes attrs = ir::plain_attributes(n.params), defaults = ir::plain_attributes(ir::default_params(n.kind));
    for (const auto& [name, v] : attrs.all()) {
      if (auto d = defaults.all().find(name); d != defaults.all().end() && d->second == v) continue;
      if (const auto* i = std::get_if<int64_t>(&v)) set_int(c, name, *i);
      else if (const auto* f = std::get_if<double>(&v)) set_float(c, name, *f);
      else if (const auto* is = std::get_if<std::vector<int64_t>>(&v)) set_ints(c, name, *is);
      else return Error::internal(std::string(info.onnx_type) + ": attribute '" + name + "' of a type plain ops do not write");
    }
    return {};
  }
  switch (n.kind) {
    case OpKind::kInput:
      value_info(gp_->add_input(), out, n.outputs[0]);
      return {};
    case OpKind::kWeight:
      if (duplicate_weight_[static_cast<size_t>(id)]) return {};
      if (bulk_ && ir::is_float(n.value->dtype()) && n.value->nbytes() >= kBulkBytes) {
        auto* t = gp_->add_initializer();
        t->set_name(out);
        t->set_data_type(dtype_to_onnx(n.value->dtype()));
        for (auto d : n.value->shape()) t->add_dims(d);
        // One byte of data until the weights are streamed: the checker wants a value field,
        // and reads the contents of no tensor this large.
        t->set_raw_data(std::string(1, '\0'));
        bulk_->emplace_back(out, n.value);
        return {};
      }
      tensor_to_proto(*n.value, out, gp_->add_initializer());
      return {};
    case OpKind::kConstant:
      tensor_to_proto(*ir::materialize_constant(std::get<ir::ConstantParams>(n.params)), out, gp_->add_initializer());
      return {};
    case OpKind::kMatMul: plain("MatMul"); return {};
    case OpKind::kAdd: plain("Add"); return {};
    case OpKind::kSub: plain("Sub"); return {};
    case OpKind::kMul: plain("Mul"); return {};
    case OpKind::kDiv: plain("Div"); return {};
    case OpKind::kPow: plain("Pow"); return {};
    case OpKind::kSqrt: plain("Sqrt"); return {};
    case OpKind::kRelu: plain("Relu"); return {};
    case OpKind::kSigmoid: plain("Sigmoid"); return {};
    case OpKind::kTanh: plain("Tanh"); return {};
    case OpKind::kErf: plain("Erf"); return {};
    case OpKind::kGelu: {
      const bool tanh = std::get<ir::GeluParams>(n.params).tanh;
      if (opset_ >= 20) {
        auto* c = plain("Gelu");
        if (tanh) set_string(c, "approximate", "tanh");
        return {};
      }
      // Older opsets: the decomposed form PyTorch's exporter writes, which runtimes fuse back.
      Node anon;
      const auto dt = n.outputs[0].dtype;
      const std::string t = fresh(out + "_arg"), phi = fresh(out + "_phi"), s = fresh(out + "_onephi"), xs = fresh(out + "_xs");
      if (tanh) {
        const std::string x2 = fresh(out + "_x2"), x3 = fresh(out + "_x3"), k = fresh(out + "_cubic"), inner = fresh(out + "_inner");
        add_node("Mul", anon, {ins[0], ins[0]}, {x2});
        add_node("Mul", anon, {x2, ins[0]}, {x3});
        add_node("Mul", anon, {x3, scalar_like(0.044715, dt, out + "_kappa")}, {k});
        add_node("Add", anon, {ins[0], k}, {inner});
        add_node("Mul", anon, {inner, scalar_like(0.7978845608028654, dt, out + "_beta")}, {t});
        add_node("Tanh", anon, {t}, {phi});
      } else {
        add_node("Div", anon, {ins[0], scalar_like(1.4142135623730951, dt, out + "_sqrt2")}, {t});
        add_node("Erf", anon, {t}, {phi});
      }
      add_node("Add", anon, {phi, scalar_like(1.0, dt, out + "_one")}, {s});
      add_node("Mul", anon, {ins[0], s}, {xs});
      add_node("Mul", anon, {xs, scalar_like(0.5, dt, out + "_half")}, {out});
      return {};
    }
    case OpKind::kHardSigmoid: {
      const auto& p = std::get<ir::HardSigmoidParams>(n.params);
      auto* c = plain("HardSigmoid");
      if (p.alpha != 0.2) set_float(c, "alpha", p.alpha);
      if (p.beta != 0.5) set_float(c, "beta", p.beta);
      return {};
    }
    case OpKind::kHardSwish: {
      if (opset_ >= 14) {
        plain("HardSwish");
        return {};
      }
      // HardSwish is opset 14; before it, x * HardSigmoid(x) with alpha 1/6 (what PyTorch writes).
      Node anon;
      const std::string gate = fresh(out + "_gate");
      auto* c = add_node("HardSigmoid", anon, {ins[0]}, {gate});
      set_float(c, "alpha", 1.0 / 6.0);
      add_node("Mul", anon, {ins[0], gate}, {out});
      return {};
    }
    case OpKind::kGlobalAveragePool: plain("GlobalAveragePool"); return {};
    case OpKind::kConv: {
      const auto& p = std::get<ir::ConvParams>(n.params);
      // A fused activation is exported as its own node after the convolution.
      std::vector<std::string> conv_out = outs;
      if (p.act != ir::Activation::kNone) conv_out = {fresh(out + "_preact")};
      auto* c = add_node("Conv", n, ins, conv_out);
      const auto& w = g_.type(n.inputs[1]).shape;
      set_ints(c, "kernel_shape", std::vector<int64_t>(w.begin() + 2, w.end()));
      set_ints(c, "strides", p.strides);
      set_ints(c, "pads", p.pads);
      set_ints(c, "dilations", p.dilations);
      set_int(c, "group", p.group);
      if (p.act != ir::Activation::kNone) {
        const char* op = p.act == ir::Activation::kRelu ? "Relu" : p.act == ir::Activation::kSigmoid ? "Sigmoid" : "Tanh";
        Node act;
        add_node(op, act, conv_out, outs);
      }
      return {};
    }
    case OpKind::kMaxPool:
    case OpKind::kAveragePool: {
      const auto& p = std::get<ir::PoolParams>(n.params);
      auto* c = plain(n.kind == OpKind::kMaxPool ? "MaxPool" : "AveragePool");
      set_ints(c, "kernel_shape", p.kernel);
      set_ints(c, "strides", p.strides);
      set_ints(c, "pads", p.pads);
      if (p.ceil_mode) set_int(c, "ceil_mode", 1);
      if (n.kind == OpKind::kAveragePool && p.count_include_pad) set_int(c, "count_include_pad", 1);
      return {};
    }
    case OpKind::kGemm: {
      const auto& p = std::get<ir::GemmParams>(n.params);
      auto* c = plain("Gemm");
      if (p.alpha != 1.0) set_float(c, "alpha", p.alpha);
      if (p.beta != 1.0) set_float(c, "beta", p.beta);
      if (p.trans_a) set_int(c, "transA", 1);
      if (p.trans_b) set_int(c, "transB", 1);
      return {};
    }
    case OpKind::kClip: {
      const auto& p = std::get<ir::ClipParams>(n.params);
      const auto dt = n.outputs[0].dtype;
      if (opset_ < 11) {
        auto* c = plain("Clip");
        if (std::isfinite(p.min)) set_float(c, "min", p.min);
        if (std::isfinite(p.max)) set_float(c, "max", p.max);
      } else {
        ins.push_back(std::isfinite(p.min) ? scalar_like(p.min, dt, out + "_min") : std::string());
        if (std::isfinite(p.max)) ins.push_back(scalar_like(p.max, dt, out + "_max"));
        plain("Clip");
      }
      return {};
    }
    case OpKind::kSoftmax: {
      const auto& p = std::get<ir::AxisParams>(n.params);
      if (opset_ < 13 && p.axis != n.outputs[0].rank() - 1)
        return Error::internal("Softmax over a non-last axis cannot be written at opset " + std::to_string(opset_));
      set_int(plain("Softmax"), "axis", p.axis);
      return {};
    }
    case OpKind::kLayerNorm: {
      const auto& p = std::get<ir::NormParams>(n.params);
      if (opset_ >= 17) return norm_op("LayerNormalization", p);
      // Older opsets: the decomposed form that exporters emit, (x - mean(x)) / rms(x - mean(x)).
      std::vector<int64_t> axes;
      for (int64_t d = p.axis; d < n.outputs[0].rank(); ++d) axes.push_back(d);
      Node anon;
      const std::string mean = fresh(out + "_mean"), d = fresh(out + "_centered");
      add_with_ints("ReduceMean", anon, {ins[0]}, {mean}, "axes", axes, 18);
      add_node("Sub", anon, {ins[0], mean}, {d});
      const std::string sd = root_mean_square(d, p, n.outputs[0], out);
      const std::string normed = ins.size() > 1 ? fresh(out + "_normed") : out;
      add_node("Div", anon, {d, sd}, {normed});
      if (ins.size() == 2) add_node("Mul", anon, {normed, ins[1]}, {out});
      if (ins.size() == 3) {
        const std::string scaled = fresh(out + "_scaled");
        add_node("Mul", anon, {normed, ins[1]}, {scaled});
        add_node("Add", anon, {scaled, ins[2]}, {out});
      }
      return {};
    }
    case OpKind::kRMSNorm: {
      const auto& p = std::get<ir::NormParams>(n.params);
      if (opset_ >= 23) return norm_op("RMSNormalization", p);
      // Older opsets: x / rms(x) * scale, the chain PyTorch writes (and ir::recognise_composites
      // reads back); onnxruntime fuses it into SimplifiedLayerNormalization.
      Node anon;
      const std::string rms = root_mean_square(ins[0], p, n.outputs[0], out), normed = fresh(out + "_normed");
      add_node("Div", anon, {ins[0], rms}, {normed});
      add_node("Mul", anon, {normed, ins[1]}, {out});
      return {};
    }
    case OpKind::kAttention: {
      const auto& p = std::get<ir::AttentionParams>(n.params);
      if (opset_ >= 23) {
        auto* c = plain("Attention");
        if (p.is_causal) set_int(c, "is_causal", 1);
        if (p.scale != 0.0) set_float(c, "scale", p.scale);
        if (p.q_num_heads != 0) set_int(c, "q_num_heads", p.q_num_heads);
        if (p.kv_num_heads != 0) set_int(c, "kv_num_heads", p.kv_num_heads);
        return {};
      }
      // Older opsets: the eager chain on the 4-D layout, Softmax(Q K^T * scale [+ mask]) V, with the
      // kv heads repeated by Unsqueeze/Expand/Reshape for GQA and the causal mask as a constant. The
      // 3-D form would need its head split and merge written around it: not written yet.
      const ir::TensorType &qt = g_.type(n.inputs[0]), &kt = g_.type(n.inputs[1]);
      if (qt.rank() != 4)
        return Error::unsupported("node '" + n.name + "': Attention with 3-D inputs cannot be written below opset 23");
      const auto dt = qt.dtype;
      const int64_t hq = qt.shape[1], hkv = kt.shape[1], seq = qt.shape[2], len = kt.shape[2];
      Node anon;
      auto unary = [&](const char* op, const std::string& a, const std::string& name) {
        const std::string o = fresh(out + name);
        return std::make_pair(add_node(op, anon, {a}, {o}), o);
      };
      auto binary = [&](const char* op, const std::string& a, const std::string& b, const std::string& name) {
        const std::string o = fresh(out + name);
        add_node(op, anon, {a, b}, {o});
        return o;
      };
      // (B, Hkv, L, D) -> (B, Hkv, r, L, D) -> (B, Hq, L, D): head h reads kv head h / r, as ONNX's GQA.
      auto repeat_heads = [&](const std::string& src, const ir::TensorType& t, const std::string& name) {
        if (hq == hkv) return src;
        const std::string u = fresh(out + name + "_unsq");
        add_with_ints("Unsqueeze", anon, {src}, {u}, "axes", {2}, 13);
        const int64_t b = t.shape[0], l = t.shape[2], d = t.shape[3];
        const std::string e = binary("Expand", u, ints_initializer({b, hkv, hq / hkv, l, d}, out + name + "_shape5"), name + "_exp");
        return binary("Reshape", e, ints_initializer({b, hq, l, d}, out + name + "_shape4"), name + "_rep");
      };
      const std::string k = repeat_heads(ins[1], kt, "_k"), v = repeat_heads(ins[2], g_.type(n.inputs[2]), "_v");
      auto [tr, kT] = unary("Transpose", k, "_kT");
      set_ints(tr, "perm", {0, 1, 3, 2});
      const double scale = p.scale != 0.0 ? p.scale : 1.0 / std::sqrt(static_cast<double>(qt.shape[3]));
      std::string s = binary("Mul", binary("MatMul", ins[0], kT, "_qk"), scalar_like(scale, dt, out + "_scale"), "_scores");
      const double inf = std::numeric_limits<double>::infinity();
      if (ins.size() > 3) {
        if (g_.type(n.inputs[3]).dtype == ir::DType::kBool) {
          const std::string o = fresh(out + "_masked");
          add_node("Where", anon, {ins[3], s, scalar_like(-inf, dt, out + "_neginf")}, {o});
          s = o;
        } else {
          s = binary("Add", s, ins[3], "_masked");
        }
      }
      if (p.is_causal) {
        std::vector<double> bias(static_cast<size_t>(seq * len), 0.0);
        for (int64_t i = 0; i < seq; ++i)
          for (int64_t j = i + 1; j < len; ++j) bias[static_cast<size_t>(i * len + j)] = -inf;
        s = binary("Add", s, add_initializer(ir::Tensor::from_doubles(dt, {seq, len}, bias), out + "_causal"), "_causal_scores");
      }
      auto [sm, probs] = unary("Softmax", s, "_probs");
      set_int(sm, "axis", 3);
      add_node("MatMul", anon, {probs, v}, {out});
      return {};
    }
    case OpKind::kRotaryEmbedding: {  // from opset 23 a plain op (its record, src/ir/ops/rotary.cpp)
      const auto& p = std::get<ir::RotaryParams>(n.params);
      // Older opsets: the rotate_half form HF writes, on X's (B, H, S, D) layout. The interleaved
      // and the 3-D forms would need strided slices or reshapes around it: not written yet.
      const ir::TensorType& xt = g_.type(n.inputs[0]);
      if (p.interleaved || xt.rank() != 4)
        return Error::unsupported("node '" + n.name + "': RotaryEmbedding " + (p.interleaved ? "interleaved" : "with a 3-D input") +
                                  " cannot be written below opset 23");
      const int64_t d = xt.shape[3], rot = p.rotary_embedding_dim == 0 ? d : p.rotary_embedding_dim, half = rot / 2;
      Node anon;
      auto slice = [&](const std::string& src, int64_t b, int64_t e, const std::string& name) {
        const std::string o = fresh(out + name);
        if (opset_ < 10) {
          auto* c = add_node("Slice", anon, {src}, {o});
          set_ints(c, "starts", {b});
          set_ints(c, "ends", {e});
          set_ints(c, "axes", {3});
        } else {
          add_node("Slice", anon, {src, ints_initializer({b}, o + "_starts"), ints_initializer({e}, o + "_ends"), ints_initializer({3}, o + "_axes")},
                   {o});
        }
        return o;
      };
      // A cache becomes (B, 1, S, rot/2): gathered by position_ids when given, then a heads axis.
      auto cache = [&](const std::string& src, const std::string& name) {
        std::string c = src;
        if (ins.size() > 3) {
          c = fresh(out + name + "_rows");
          set_int(add_node("Gather", anon, {src, ins[3]}, {c}), "axis", 0);
        }
        const std::string o = fresh(out + name);
        add_with_ints("Unsqueeze", anon, {c}, {o}, "axes", {1}, 13);
        return o;
      };
      auto binary = [&](const char* op, const std::string& a, const std::string& b, const std::string& name) {
        const std::string o = fresh(out + name);
        add_node(op, anon, {a, b}, {o});
        return o;
      };
      const std::string cos = cache(ins[1], "_cos"), sin = cache(ins[2], "_sin");
      const std::string x1 = slice(ins[0], 0, half, "_x1"), x2 = slice(ins[0], half, rot, "_x2");
      const std::string re = binary("Sub", binary("Mul", x1, cos, "_x1cos"), binary("Mul", x2, sin, "_x2sin"), "_re");
      const std::string im = binary("Add", binary("Mul", x1, sin, "_x1sin"), binary("Mul", x2, cos, "_x2cos"), "_im");
      std::vector<std::string> parts{re, im};
      if (rot < d) parts.push_back(slice(ins[0], rot, d, "_pass"));
      set_int(add_node("Concat", anon, parts, {out}), "axis", 3);
      return {};
    }
    case OpKind::kBatchNorm: {
      set_float(plain("BatchNormalization"), "epsilon", std::get<ir::NormParams>(n.params).epsilon);
      return {};
    }
    case OpKind::kReduceMean: {
      const auto& p = std::get<ir::AxesParams>(n.params);
      set_int(add_with_ints("ReduceMean", n, ins, outs, "axes", p.axes, 18), "keepdims", p.keepdims ? 1 : 0);
      return {};
    }
    case OpKind::kConcat: set_int(plain("Concat"), "axis", std::get<ir::AxisParams>(n.params).axis); return {};
    case OpKind::kFlatten: set_int(plain("Flatten"), "axis", std::get<ir::AxisParams>(n.params).axis); return {};
    case OpKind::kGather: set_int(plain("Gather"), "axis", std::get<ir::AxisParams>(n.params).axis); return {};
    case OpKind::kSplit: {
      const auto& p = std::get<ir::SplitParams>(n.params);
      set_int(add_with_ints("Split", n, ins, outs, "split", p.sizes, 13), "axis", p.axis);
      return {};
    }
    case OpKind::kTranspose: set_ints(plain("Transpose"), "perm", std::get<ir::TransposeParams>(n.params).perm); return {};
    case OpKind::kReshape: {
      ir::Shape spec = std::get<ir::ReshapeParams>(n.params).shape;
      // In a dynamic model (where import keeps every Reshape that depends on a varying extent as an
      // ONNX op, so these come from rewrites), write the shape relative to the input: 0 copies an
      // input dim, -1 takes what is left. Same result at these sizes; the second-size verification
      // decides whether it holds at others, and a candidate that does not is never written.
      if (g_.meta().dynamic() && std::find(spec.begin(), spec.end(), 0) == spec.end() && !others_.empty())
        return reshape_at_every_size(n, id, ins, outs);
      if (g_.meta().dynamic() && std::find(spec.begin(), spec.end(), 0) == spec.end()) {
        const auto& in = g_.type(n.inputs[0]).shape;
        int64_t left = -1;
        for (size_t d = 0; d < spec.size(); ++d) {
          if (d < in.size() && spec[d] == in[d]) spec[d] = 0;
          else if (left < 0) left = static_cast<int64_t>(d);
        }
        if (left >= 0) spec[static_cast<size_t>(left)] = -1;
      }
      ins.push_back(ints_initializer(spec, out + "_shape"));
      plain("Reshape");
      return {};
    }
    case OpKind::kSqueeze:
    case OpKind::kUnsqueeze: {
      const auto& p = std::get<ir::AxesParams>(n.params);
      add_with_ints(n.kind == OpKind::kSqueeze ? "Squeeze" : "Unsqueeze", n, ins, outs, "axes", p.axes, 13);
      return {};
    }
    case OpKind::kPad: {
      const auto& p = std::get<ir::PadParams>(n.params);
      const char* mode = p.mode == ir::PadMode::kConstant ? "constant" : p.mode == ir::PadMode::kReflect ? "reflect" : "edge";
      if (opset_ < 11) {
        auto* c = plain("Pad");
        set_string(c, "mode", mode);
        set_ints(c, "pads", p.pads);
        if (p.value != 0.0) set_float(c, "value", p.value);
      } else {
        ins.push_back(ints_initializer(p.pads, out + "_pads"));
        if (p.mode == ir::PadMode::kConstant && p.value != 0.0) ins.push_back(scalar_like(p.value, n.outputs[0].dtype, out + "_value"));
        set_string(plain("Pad"), "mode", mode);
      }
      return {};
    }
    case OpKind::kSlice: {
      const auto& p = std::get<ir::SliceParams>(n.params);
      // Normalised ends of -1 with a negative step mean "through index 0": INT64_MIN says that in ONNX.
      std::vector<int64_t> ends = p.ends;
      for (size_t k = 0; k < ends.size(); ++k)
        if (p.steps[k] < 0 && ends[k] < 0) ends[k] = std::numeric_limits<int64_t>::min();
      if (opset_ < 10) {
        auto* c = plain("Slice");
        set_ints(c, "starts", p.starts);
        set_ints(c, "ends", ends);
        set_ints(c, "axes", p.axes);
        return {};
      }
      ins.push_back(ints_initializer(p.starts, out + "_starts"));
      ins.push_back(ints_initializer(ends, out + "_ends"));
      ins.push_back(ints_initializer(p.axes, out + "_axes"));
      ins.push_back(ints_initializer(p.steps, out + "_steps"));
      plain("Slice");
      return {};
    }
    case OpKind::kCast: set_int(plain("Cast"), "to", dtype_to_onnx(std::get<ir::CastParams>(n.params).to)); return {};
    case OpKind::kScalarMul:
      ins.push_back(scalar_like(std::get<ir::ScalarParams>(n.params).value, n.outputs[0].dtype, out + "_scalar"));
      plain("Mul");
      return {};
    case OpKind::kEnlarge: {
      const auto& in = g_.type(n.inputs[0]).shape;
      const auto& k = std::get<ir::EnlargeParams>(n.params).kernel;
      const size_t r = in.size();
      std::vector<int64_t> pads(2 * r, 0);
      for (size_t i = 0; i < k.size(); ++i) {
        pads[2 + i] = (k[i] - in[2 + i]) / 2;
        pads[r + 2 + i] = (k[i] - in[2 + i]) / 2;
      }
      if (opset_ < 11) set_ints(plain("Pad"), "pads", pads);
      else {
        ins.push_back(ints_initializer(pads, out + "_pads"));
        plain("Pad");
      }
      return {};
    }
    case OpKind::kOpaque: {
      const auto& p = std::get<ir::OpaqueParams>(n.params);
      std::vector<std::string> full_in, full_out;
      for (size_t k = 0; k < ins.size(); ++k) {
        const auto slot = static_cast<size_t>(k < p.input_slots.size() ? p.input_slots[k] : static_cast<int64_t>(k));
        if (full_in.size() <= slot) full_in.resize(slot + 1);
        full_in[slot] = ins[k];
      }
      for (size_t k = 0; k < outs.size(); ++k) {
        const auto slot = static_cast<size_t>(k < p.output_slots.size() ? p.output_slots[k] : static_cast<int64_t>(k));
        if (full_out.size() <= slot) full_out.resize(slot + 1);
        full_out[slot] = outs[k];
        // Types for readers that cannot infer them; in a dynamic model, where these sizes are only
        // representative, ONNX inference types the standard ops instead.
        const bool std_domain = p.domain.empty() || p.domain == "ai.onnx";
        if (!(g_.meta().dynamic() && std_domain)) value_info(gp_->add_value_info(), outs[k], n.outputs[k]);
      }
      auto* c = add_node(p.op_type, n, full_in, full_out);
      c->set_domain(p.domain);
      onnx::NodeProto attrs;
      if (!attrs.ParseFromString(p.attributes)) return Error::internal("corrupt attributes on opaque node " + p.op_type);
      *c->mutable_attribute() = attrs.attribute();
      return {};
    }
    default:  // plain ops: written above, from the op table
      break;
  }
  return Error::internal("no ONNX form for op " + std::string(ir::op_name(n.kind)));
}

Status Exporter::reshape_at_every_size(const Node& n, NodeId id, std::vector<std::string> ins, const std::vector<std::string>& outs) {
  std::vector<const ir::Graph*> all{&g_};
  for (const auto& o : others_) all.push_back(&o);
  const size_t rank = n.outputs[0].shape.size();
  auto out_dim = [&](const ir::Graph* g, size_t d) { return g->node(id).outputs[0].shape[d]; };
  auto same_everywhere = [&](auto&& f) {
    for (const auto* g : all)
      if (!f(g)) return false;
    return true;
  };
  // A value read at run time for an axis: the first graph input, then node output, with that size.
  auto find_source = [&](size_t d) -> std::optional<std::pair<ValueRef, int64_t>> {
    for (int pass = 0; pass < 2; ++pass)
      for (NodeId i = 0; i < id; ++i) {
        const Node& c = g_.node(i);
        if ((pass == 0) != (c.kind == OpKind::kInput) || c.kind == OpKind::kWeight || c.kind == OpKind::kConstant) continue;
        for (int32_t k = 0; k < static_cast<int32_t>(c.outputs.size()); ++k)
          for (int64_t a = 0; a < c.outputs[static_cast<size_t>(k)].rank(); ++a)
            if (same_everywhere([&](const ir::Graph* g) {
                  return g->type({i, k}).shape[static_cast<size_t>(a)] == out_dim(g, d);
                }))
              return std::pair{ValueRef{i, k}, a};
      }
    return std::nullopt;
  };
  std::vector<int64_t> spec(rank);
  std::vector<std::optional<std::pair<ValueRef, int64_t>>> source(rank);
  std::vector<size_t> varying, unsourced;
  for (size_t d = 0; d < rank; ++d) {
    spec[d] = out_dim(&g_, d);
    if (same_everywhere([&](const ir::Graph* g) { return out_dim(g, d) == spec[d]; })) continue;
    if (same_everywhere([&](const ir::Graph* g) {
          const auto& in = g->type(g->node(id).inputs[0]).shape;
          return d < in.size() && in[d] == out_dim(g, d);
        })) {
      spec[d] = 0;
      continue;
    }
    varying.push_back(d);
    source[d] = find_source(d);
    if (!source[d]) unsourced.push_back(d);
  }
  if (unsourced.size() > 1)
    return Error::unsupported("Reshape '" + n.name + "' (" + outs[0] + "): axes " + std::to_string(unsourced[0]) + " and " +
                              std::to_string(unsourced[1]) + " of its result vary with the input sizes and no earlier value has their sizes");
  if (!varying.empty()) {
    const size_t infer = unsourced.empty() ? varying.front() : unsourced.front();
    spec[infer] = -1;
    source[infer].reset();
  }
  const bool runtime = std::any_of(source.begin(), source.end(), [](const auto& x) { return x.has_value(); });
  if (!runtime) {
    ins.push_back(ints_initializer(spec, outs[0] + "_shape"));
    add_node("Reshape", n, ins, outs);
    return {};
  }
  // Concat of literal runs and run-time extents.
  std::vector<std::string> pieces;
  std::vector<int64_t> run;
  const Node anon;
  auto flush = [&] {
    if (run.empty()) return;
    pieces.push_back(ints_initializer(run, outs[0] + "_dims"));
    run.clear();
  };
  for (size_t d = 0; d < rank; ++d) {
    if (!source[d]) {
      run.push_back(spec[d]);
      continue;
    }
    flush();
    const auto [v, axis] = *source[d];
    const std::string piece = fresh(outs[0] + "_dim" + std::to_string(d));
    if (opset_ >= 15) {
      auto* sh = add_node("Shape", anon, {name_of(v)}, {piece});
      set_int(sh, "start", axis);
      set_int(sh, "end", axis + 1);
    } else {
      const std::string whole = fresh(outs[0] + "_of" + std::to_string(d));
      add_node("Shape", anon, {name_of(v)}, {whole});
      set_int(add_node("Gather", anon, {whole, ints_initializer({axis}, outs[0] + "_axis" + std::to_string(d))}, {piece}), "axis", 0);
    }
    pieces.push_back(piece);
  }
  flush();
  const std::string shape = fresh(outs[0] + "_shape");
  set_int(add_node("Concat", anon, pieces, {shape}), "axis", 0);
  ins.push_back(shape);
  add_node("Reshape", n, ins, outs);
  return {};
}

Status Exporter::run() {
  const auto& meta = g_.meta();
  // Other bindings help only node for node; a graph that differs at them is written as before,
  // at its representative sizes (and size_dependent_constants then names what differs).
  std::string differs;
  auto same_structure = [&](const ir::Graph& o) {
    if (o.size() != g_.size()) {
      differs = std::to_string(o.size()) + " nodes against " + std::to_string(g_.size());
      return false;
    }
    for (size_t i = 0; i < g_.size(); ++i) {
      const auto& a = g_.node(static_cast<NodeId>(i));
      const auto& b = o.node(static_cast<NodeId>(i));
      bool same = a.kind == b.kind && a.inputs == b.inputs && a.outputs.size() == b.outputs.size();
      for (size_t k = 0; same && k < a.outputs.size(); ++k) same = a.outputs[k].rank() == b.outputs[k].rank();
      if (!same) {
        differs = "at node " + ir::node_label(g_, static_cast<NodeId>(i));
        return false;
      }
    }
    return true;
  };
  if (!std::all_of(others_.begin(), others_.end(), same_structure)) {
    spdlog::debug("export: the graph differs at another binding ({}); shape operands are written at its own sizes", differs);
    others_.clear();
  }
  opset_ = meta.opset("");
  // The input's IR version, but at least 4: IR <= 3 requires every initializer to be a graph input
  // too, which the exporter does not write (so every IR 3 model failed the checker).
  m_->set_ir_version(std::max<int64_t>(meta.ir_version, 4));
  for (const auto& [d, v] : meta.opsets) {
    auto* o = m_->add_opset_import();
    o->set_domain(d);
    o->set_version(v);
  }
  m_->set_producer_name(meta.producer_name.empty() ? "rlflow" : meta.producer_name);
  m_->set_producer_version(meta.producer_version);
  m_->set_domain(meta.domain);
  m_->set_model_version(meta.model_version);
  m_->set_doc_string(meta.doc_string);
  for (const auto& [k, v] : meta.metadata) {
    auto* p = m_->add_metadata_props();
    p->set_key(k);
    p->set_value(v);
  }
  gp_->set_name(meta.graph_name.empty() ? "rlflow" : meta.graph_name);
  for (const auto& f : meta.functions)
    if (!m_->add_functions()->ParseFromString(f)) return Error::internal("a model-local function does not parse");
  assign_names();
  for (size_t i = 0; i < g_.size(); ++i) RLFLOW_TRY_STATUS(emit(static_cast<NodeId>(i)));
  for (const auto& [v, name] : identity_outputs_) {
    Node anon;
    add_node("Identity", anon, {name_of(v)}, {name});
  }
  for (const auto& o : g_.outputs()) value_info(gp_->add_output(), o.name, g_.type(o.value));
  return {};
}

Status check_model(onnx::ModelProto& m) {
  if (m.graph().initializer_size() > 0 && m.ByteSizeLong() > (size_t{2} << 30) - 1) return {};  // checked via file later
  int64_t opset = 0;
  for (const auto& o : m.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = o.version();
  if (opset > max_known_opset() || m.ir_version() > max_known_ir_version()) {
    spdlog::debug("skipping onnx::checker: opset {} / IR {} is newer than the linked ONNX library knows ({} / {})", opset,
                  m.ir_version(), max_known_opset(), max_known_ir_version());
    return {};
  }
  try {
    // Checked at the model's own IR version (the input's, at least 4; see Exporter::run).
    onnx::checker::check_model(m);
    // The "full" check: strict type and shape inference. It runs in place (no copy of the
    // weights) and the value_info it adds is dropped again.
    const int keep = m.graph().value_info_size();
    onnx::ShapeInferenceOptions o{true, 1, false};
    onnx::shape_inference::InferShapes(m, onnx::OpSchemaRegistry::Instance(), o);
    auto* vi = m.mutable_graph()->mutable_value_info();
    vi->DeleteSubrange(keep, vi->size() - keep);
  } catch (const std::exception& e) {
    return Error::internal(std::string("the exported model fails onnx::checker: ") + e.what());
  }
  return {};
}

}  // namespace

namespace {

// The ModelProto for a graph. With `bulk`, large weights are left out of it (see Exporter).
Status build_model(const ir::Graph& graph, const ExportOptions& opts, onnx::ModelProto* m, BulkList* bulk) {
  ir::Graph g = graph;
  if (opts.evaluator) {
    auto folded = ir::fold_constants(g, *opts.evaluator);
    if (!folded) return folded.error();
    g = std::move(*folded);
  } else {
    g = ir::remove_dead_nodes(std::move(g));
  }
  Exporter ex(g, m, bulk);
  if (g.meta().dynamic() && !opts.bindings.empty()) {
    std::vector<ir::Graph> others;
    for (const auto* b : opts.bindings) {
      ir::Graph o = *b;
      if (opts.evaluator) {
        auto folded = ir::fold_constants(o, *opts.evaluator);
        if (!folded) return folded.error();
        o = std::move(*folded);
      } else {
        o = ir::remove_dead_nodes(std::move(o));
      }
      others.push_back(std::move(o));
    }
    ex.set_other_bindings(std::move(others));
  }
  RLFLOW_TRY_STATUS(ex.run());
  if (opts.check) RLFLOW_TRY_STATUS(check_model(*m));
  return {};
}

void add_external_ref(onnx::TensorProto* t, const std::string& location, size_t offset, size_t length) {
  t->clear_raw_data();
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  for (const auto& [k, v] : {std::pair<std::string, std::string>{"location", location}, {"offset", std::to_string(offset)},
                             {"length", std::to_string(length)}}) {
    auto* kv = t->add_external_data();
    kv->set_key(k);
    kv->set_value(v);
  }
}

// Writes the model with its large weights streamed one at a time after the rest of the graph,
// so peak memory is the graph plus one tensor rather than a second copy of every weight. Protobuf
// accepts fields in any order, so GraphProto.initializer entries may follow the other fields.
bool write_streamed(int fd, onnx::ModelProto& m, const BulkList& bulk) {
  namespace pio = google::protobuf::io;
  constexpr uint32_t kModelGraphTag = (7u << 3) | 2u, kGraphInitializerTag = (5u << 3) | 2u, kTensorRawDataTag = (9u << 3) | 2u;
  onnx::GraphProto graph;
  graph.Swap(m.mutable_graph());
  m.clear_graph();
  auto& inits = *graph.mutable_initializer();
  std::unordered_map<std::string, int> bulk_index;
  for (size_t k = 0; k < bulk.size(); ++k) bulk_index[bulk[k].first] = static_cast<int>(k);
  // Header-only copies of the bulk initializers, removed from the graph body.
  std::vector<onnx::TensorProto> headers(bulk.size());
  for (int i = inits.size() - 1; i >= 0; --i) {
    auto it = bulk_index.find(inits[i].name());
    if (it == bulk_index.end()) continue;
    headers[static_cast<size_t>(it->second)] = inits[i];
    headers[static_cast<size_t>(it->second)].clear_raw_data();
    inits.DeleteSubrange(i, 1);
  }
  std::vector<size_t> sizes(bulk.size());
  size_t graph_len = graph.ByteSizeLong();
  for (size_t k = 0; k < bulk.size(); ++k) {
    const size_t n = bulk[k].second->nbytes();
    sizes[k] = headers[k].ByteSizeLong() + pio::CodedOutputStream::VarintSize32(kTensorRawDataTag) +
               pio::CodedOutputStream::VarintSize64(n) + n;
    graph_len += pio::CodedOutputStream::VarintSize32(kGraphInitializerTag) + pio::CodedOutputStream::VarintSize64(sizes[k]) + sizes[k];
  }
  pio::FileOutputStream fos(fd);
  {
    pio::CodedOutputStream out(&fos);
    if (!m.SerializeToCodedStream(&out)) return false;
    out.WriteTag(kModelGraphTag);
    out.WriteVarint64(graph_len);
    if (!graph.SerializeToCodedStream(&out)) return false;
    for (size_t k = 0; k < bulk.size(); ++k) {
      out.WriteTag(kGraphInitializerTag);
      out.WriteVarint64(sizes[k]);
      if (!headers[k].SerializeToCodedStream(&out)) return false;
      out.WriteTag(kTensorRawDataTag);
      out.WriteVarint64(bulk[k].second->nbytes());
      out.WriteRaw(bulk[k].second->raw(), static_cast<int>(bulk[k].second->nbytes()));
      if (out.HadError()) return false;
    }
    if (out.HadError()) return false;
  }
  return fos.Flush();
}

}  // namespace

Expected<std::vector<std::string>> size_dependent_constants(const ir::Graph& g, const ir::Graph& at_other, const ExportOptions& opts) {
  ExportOptions oa = opts, ob = opts;
  oa.check = ob.check = false;
  oa.bindings.insert(oa.bindings.begin(), &at_other);
  ob.bindings.insert(ob.bindings.begin(), &g);
  onnx::ModelProto ma, mb;
  BulkList bulk_a, bulk_b;
  RLFLOW_TRY_STATUS(build_model(g, oa, &ma, &bulk_a));
  RLFLOW_TRY_STATUS(build_model(at_other, ob, &mb, &bulk_b));
  const auto& ga = ma.graph();
  const auto& gb = mb.graph();
  std::vector<std::string> out;
  if (ga.node_size() != gb.node_size() || ga.initializer_size() != gb.initializer_size()) {
    out.push_back("the graph is written with " + std::to_string(ga.node_size()) + " nodes at one binding and " +
                  std::to_string(gb.node_size()) + " at the other");
    return out;
  }
  std::unordered_map<std::string, std::string> init_b;
  for (const auto& t : gb.initializer()) init_b[t.name()] = t.SerializeAsString();
  std::unordered_set<std::string> differs;
  for (const auto& t : ga.initializer()) {
    auto it = init_b.find(t.name());
    if (it == init_b.end() || it->second != t.SerializeAsString()) differs.insert(t.name());
  }
  for (int i = 0; i < ga.node_size(); ++i) {
    const auto& a = ga.node(i);
    const auto& b = gb.node(i);
    std::string why;
    if (a.op_type() != b.op_type() || a.input_size() != b.input_size()) {
      why = "is written differently";
    } else {
      for (int k = 0; k < a.attribute_size() && why.empty(); ++k)
        if (k >= b.attribute_size() || a.attribute(k).SerializeAsString() != b.attribute(k).SerializeAsString())
          why = "has attribute " + a.attribute(k).name() + " that depends on the sizes";
      for (int k = 0; k < a.input_size() && why.empty(); ++k)
        if (a.input(k) != b.input(k) || differs.count(a.input(k))) why = "reads " + a.input(k) + ", a constant that depends on the sizes";
    }
    if (!why.empty()) out.push_back(a.op_type() + " '" + a.name() + "' " + why);
  }
  return out;
}

Expected<ExportedModel> export_model(const ir::Graph& g, const ExportOptions& opts, const std::string& path_hint) {
  onnx::ModelProto m;
  ExportedModel out;
  BulkList bulk;
  RLFLOW_TRY_STATUS(build_model(g, opts, &m, &bulk));
  int64_t bulk_bytes = 0;
  for (const auto& [name, t] : bulk) bulk_bytes += static_cast<int64_t>(t->nbytes());
  const bool external = bulk_bytes > opts.external_data_threshold;
  if (external) out.external_name = std::filesystem::path(path_hint).filename().string() + ".data";
  std::unordered_map<std::string, ir::TensorPtr> by_name(bulk.begin(), bulk.end());
  for (auto& t : *m.mutable_graph()->mutable_initializer()) {
    auto it = by_name.find(t.name());
    if (it == by_name.end()) continue;
    if (external) {
      add_external_ref(&t, out.external_name, out.external_data.size(), it->second->nbytes());
      out.external_data.append(reinterpret_cast<const char*>(it->second->raw()), it->second->nbytes());
    } else {
      t.set_raw_data(it->second->raw(), it->second->nbytes());
    }
  }
  if (!m.SerializeToString(&out.model_bytes)) return Error::internal("protobuf serialisation failed");
  return out;
}

Status write_model_file(const ir::Graph& g, const std::string& path, const ExportOptions& opts, const std::string& protect,
                        const std::function<Status(const std::string&)>& check_written) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!protect.empty() && fs::exists(path, ec) && fs::equivalent(path, protect, ec))
    return Error{ErrorCode::kUsage, "refusing to overwrite the input model " + protect};
  auto m = std::make_unique<onnx::ModelProto>();
  BulkList bulk;
  RLFLOW_TRY_STATUS(build_model(g, opts, m.get(), &bulk));
  int64_t bulk_bytes = 0;
  for (const auto& [name, t] : bulk) bulk_bytes += static_cast<int64_t>(t->nbytes());
  if (bulk_bytes > opts.external_data_threshold) {
    // Above protobuf's 2 GB limit: weights go to "<file>.data", written tensor by tensor. The model
    // and its weights are staged together in a folder beside the output and checked there; only
    // then do they move into place, the old model first moved aside, so an interruption or a
    // refused candidate never leaves a model beside weights that are not its own (issue 41: the
    // old model beside the new weights loaded in onnxruntime and gave wrong numbers).
    const std::string model_name = fs::path(path).filename().string();
    const std::string data_name = model_name + ".data";
    const fs::path dir = fs::path(path).has_parent_path() ? fs::path(path).parent_path() : fs::path(".");
    // The stage and every name in it are registered before they exist, so an interrupting signal
    // at any point removes them (util/file_io.h: TempPath).
    auto stage_dir = make_temp_folder((dir / ("." + model_name + ".stage.XXXXXX")).string());
    if (!stage_dir) return stage_dir.error();
    const fs::path stage((*stage_dir)->path());
    const fs::path data_path = dir / data_name, old_model = stage / ("old." + model_name);
    const TempPath staged_data((stage / data_name).string()), staged_model((stage / model_name).string()),
        moved_aside(old_model.string());
    std::unordered_map<std::string, std::pair<size_t, size_t>> where;
    RLFLOW_TRY_STATUS(write_file_atomic((stage / data_name).string(), [&](int fd) {
      size_t offset = 0;
      for (const auto& [name, t] : bulk) {
        size_t done = 0;
        while (done < t->nbytes()) {
          ssize_t w = ::write(fd, reinterpret_cast<const char*>(t->raw()) + done, t->nbytes() - done);
          if (w < 0 && errno == EINTR) continue;
          if (w < 0) return false;
          done += static_cast<size_t>(w);
        }
        where[name] = {offset, t->nbytes()};
        offset += t->nbytes();
      }
      return true;
    }));
    for (auto& t : *m->mutable_graph()->mutable_initializer()) {
      auto it = where.find(t.name());
      if (it != where.end()) add_external_ref(&t, data_name, it->second.first, it->second.second);
    }
    bulk.clear();
    RLFLOW_TRY_STATUS(write_file_atomic(
        (stage / model_name).string(),
        [&](int fd) {
          const bool ok = write_streamed(fd, *m, bulk);
          m.reset();
          return ok;
        },
        check_written));
    // The old model goes first: from here until the new one is in place there is no model at the
    // path, never one that reads the new weights. A signal waits until the three renames are done.
    DeferInterrupts defer;
    const bool had_model = fs::exists(path, ec);
    if (had_model && std::rename(path.c_str(), old_model.c_str()) != 0)
      return Error::bad_input("cannot move the previous " + path + " aside (" + std::strerror(errno) + ")");
    if (std::rename((stage / data_name).c_str(), data_path.c_str()) != 0 ||
        std::rename((stage / model_name).c_str(), path.c_str()) != 0) {
      const std::string why = std::strerror(errno);
      if (had_model) std::rename(old_model.c_str(), path.c_str());
      return Error::bad_input("cannot move the output into place at " + path + " (" + why + ")");
    }
    return {};
  }
  return write_file_atomic(
      path,
      [&](int fd) {
        const bool ok = write_streamed(fd, *m, bulk);
        m.reset();
        return ok;
      },
      check_written);
}

namespace {

bool same_formals(const std::vector<onnx::OpSchema::FormalParameter>& a, const std::vector<onnx::OpSchema::FormalParameter>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].GetName() != b[i].GetName() || a[i].GetOption() != b[i].GetOption() || a[i].GetTypeStr() != b[i].GetTypeStr() ||
        a[i].GetIsHomogeneous() != b[i].GetIsHomogeneous() || a[i].GetMinArity() != b[i].GetMinArity())
      return false;
  return true;
}

// Attributes a newer version added whose default keeps every older node's meaning: Cast's saturate
// (19) acts only on float8 targets, which older versions did not allow.
bool added_attribute_keeps_meaning(const std::string& op, const std::string& attr) {
  // Cast's saturate only concerns float8 targets; absent, Shape's start and end (15) take the whole
  // shape, Reshape's allowzero (14) is 0 (a 0 copies the input's dim) and Split's num_outputs (18)
  // leaves the split to the outputs, all as before.
  return ((op == "Cast" || op == "CastLike") && attr == "saturate") || (op == "Shape" && (attr == "start" || attr == "end")) ||
         (op == "Reshape" && attr == "allowzero") || (op == "Split" && attr == "num_outputs");
}

// Whether schema `b`, a newer version of `a`'s op, runs every node `a` describes the same way, as
// far as the schemas show it: the same inputs and outputs (names, arity, type parameters), the same
// attributes (type, required, default; an added one only where it keeps the meaning), and each
// type constraint allowing at least what it allowed. The version bumps this passes are type-list
// extensions (float8 at 19, int4 at 21, float4 at 23); a changed default, a moved or added input or
// attribute, or a narrowed type is refused. The written file is verified against the input either way.
bool schema_extends(const onnx::OpSchema& a, const onnx::OpSchema& b) {
  if (!same_formals(a.inputs(), b.inputs()) || !same_formals(a.outputs(), b.outputs())) return false;
  for (const auto& [name, attr] : b.attributes()) {
    const auto it = a.attributes().find(name);
    if (it == a.attributes().end()) {
      if (attr.required || !added_attribute_keeps_meaning(a.Name(), name)) return false;
      continue;
    }
    if (it->second.type != attr.type || it->second.required != attr.required ||
        it->second.default_value.SerializeAsString() != attr.default_value.SerializeAsString())
      return false;
  }
  for (const auto& [name, attr] : a.attributes())
    if (!b.attributes().count(name)) return false;
  for (const auto& ta : a.typeConstraintParams()) {
    const auto& tb = b.typeConstraintParams();
    const auto it = std::find_if(tb.begin(), tb.end(), [&](const auto& t) { return t.type_param_str == ta.type_param_str; });
    if (it == tb.end()) return false;
    for (const auto& type : ta.allowed_type_strs)
      if (std::find(it->allowed_type_strs.begin(), it->allowed_type_strs.end(), type) == it->allowed_type_strs.end()) return false;
  }
  return true;
}

}  // namespace

Status check_output_opset(const ir::Graph& g, int64_t to) {
  const int64_t from = g.meta().opset("");
  if (to == from) return {};
  if (to < from)
    return Error{ErrorCode::kUsage, "--opset " + std::to_string(to) + " is below the model's opset " + std::to_string(from) +
                                        " (rlflow writes a model at its own opset or a newer one)"};
  if (to > max_known_opset())
    return Error{ErrorCode::kUsage, "--opset " + std::to_string(to) + " is newer than the linked onnx library knows (" +
                                        std::to_string(max_known_opset()) + ")"};
  for (size_t i = 0; i < g.size(); ++i) {
    const auto& n = g.node(static_cast<ir::NodeId>(i));
    if (n.kind != ir::OpKind::kOpaque) continue;
    const auto& p = std::get<ir::OpaqueParams>(n.params);
    if (!(p.domain.empty() || p.domain == "ai.onnx")) continue;  // other domains keep their own opset
    const auto* a = onnx::OpSchemaRegistry::Schema(p.op_type, static_cast<int>(from), "");
    const auto* b = onnx::OpSchemaRegistry::Schema(p.op_type, static_cast<int>(to), "");
    if (!a || !b || (a->SinceVersion() != b->SinceVersion() && !schema_extends(*a, *b)))
      return Error::unsupported("--opset " + std::to_string(to) + ": " + p.op_type + " (" + ir::node_label(g, static_cast<ir::NodeId>(i)) +
                                ") changes between opset " + std::to_string(from) + " and " + std::to_string(to) +
                                ", and rlflow keeps it verbatim (it does not convert ops it does not model)");
  }
  return {};
}

Status set_output_opset(ir::Graph* g, int64_t to) {
  if (to == g->meta().opset("")) return {};
  RLFLOW_TRY_STATUS(check_output_opset(*g, to));
  // The IR version each opset needs (onnx's version table).
  static const std::pair<int64_t, int64_t> kIr[] = {{15, 8}, {19, 9}, {21, 10}, {23, 11}, {25, 12}};
  int64_t ir = g->meta().ir_version;
  for (const auto& [opset, version] : kIr)
    if (to >= opset) ir = std::max(ir, version);
  g->meta().ir_version = ir;
  for (auto& [domain, version] : g->meta().opsets)
    if (domain.empty() || domain == "ai.onnx") version = to;
  return {};
}

}  // namespace rlflow::onnxio
