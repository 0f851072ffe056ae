// float16 and bfloat16 end to end: conversions, the reference executor (float32 compute, every
// half-typed node output rounded to 16 bits), import and export, and verification tolerances.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "onnx/onnx_lib.h"
#include "rlflow/exec/compare.h"
#include "rlflow/exec/executor.h"
#include "rlflow/ir/builder.h"
#include "rlflow/onnx/model_io.h"

using namespace rlflow;
using namespace rlflow::ir;

namespace {

uint16_t torch_half_bits(float f) {
  const at::Half h(f);
  return h.x;
}

uint16_t torch_bf16_bits(float f) {
  const at::BFloat16 b(f);
  return b.x;
}

// Conv (with bias) + Relu in `dt`, weights drawn from a seed.
Graph half_conv_relu(DType dt) {
  GraphBuilder b;
  auto x = b.input("x", {dt, {1, 3, 8, 8}});
  auto w = b.weight("w", random_tensor({4, 3, 3, 3}, 1, dt));
  auto bias = b.weight("b", random_tensor({4}, 2, dt));
  ConvParams p;
  p.strides = {1, 1};
  p.pads = {1, 1, 1, 1};
  p.dilations = {1, 1};
  auto c = b.op(OpKind::kConv, {x, w, bias}, p);
  b.output(b.relu(c), "y");
  return std::move(b).build();
}

// x @ W + b, then Softmax: ops whose ONNX types admit bfloat16 at opset 13 (Conv does not).
Graph half_dense_softmax(DType dt) {
  GraphBuilder b;
  auto x = b.input("x", {dt, {2, 8}});
  auto w = b.weight("w", random_tensor({8, 5}, 1, dt));
  auto bias = b.weight("b", random_tensor({5}, 2, dt));
  auto y = b.op(OpKind::kAdd, {b.op(OpKind::kMatMul, {x, w}), bias});
  b.output(b.op(OpKind::kSoftmax, {y}, AxisParams{1}), "y");
  return std::move(b).build();
}

}  // namespace

TEST(HalfPrecision, ConversionsMatchATenForEveryHalfAndRandomFloats) {
  // Every float16 bit pattern survives half -> float -> half, and decodes as ATen decodes it.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = half_to_float(static_cast<uint16_t>(h));
    at::Half ref;
    ref.x = static_cast<uint16_t>(h);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(static_cast<float>(ref))) << h;
      continue;
    }
    ASSERT_EQ(f, static_cast<float>(ref)) << h;
    ASSERT_EQ(float_to_half(f), h) << h;
    ASSERT_EQ(bfloat16_to_float(static_cast<uint16_t>(h)), static_cast<float>(c10::BFloat16(static_cast<uint16_t>(h), c10::BFloat16::from_bits())));
  }
  // Rounding of arbitrary floats (ties, subnormals, overflow) agrees with ATen bit for bit.
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  int checked = 0;
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = bits(rng);
    if (i % 4 == 0) u = (u & 0x807fffffu) | ((100u + u % 50u) << 23);  // the half range, subnormals included
    float f;
    std::memcpy(&f, &u, 4);
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_half(f), torch_half_bits(f)) << f;
    ASSERT_EQ(float_to_bfloat16(f), torch_bf16_bits(f)) << f;
    ++checked;
  }
  EXPECT_GT(checked, 100000);
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);  // rounds to infinity
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);  // the largest half
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isnan(bfloat16_to_float(float_to_bfloat16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(HalfPrecision, ExecutorComputesWideAndRoundsEveryNodeOutput) {
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    const Graph g = half_conv_relu(dt);
    exec::Executor ex;
    auto in = exec::random_inputs(g, 3);
    ASSERT_EQ(in[0]->dtype(), dt);
    auto out = ex.run(g, in);
    ASSERT_TRUE(out.ok()) << out.error().message;
    ASSERT_EQ((*out)[0]->dtype(), dt);
    // The same computation spelled in ATen: float32 conv of the half values, rounded to half.
    const auto st = dt == DType::kFloat16 ? at::kHalf : at::kBFloat16;
    auto aten = [&](const TensorPtr& t) {
      return at::from_blob(const_cast<std::byte*>(t->raw()), t->shape(), at::TensorOptions().dtype(st)).to(at::kFloat);
    };
    const auto& w = g.node(g.node(g.outputs()[0].value.node).inputs[0].node).inputs;
    at::Tensor conv = at::conv2d(aten(in[0]), aten(g.node(w[1].node).value), aten(g.node(w[2].node).value), {1, 1}, {1, 1});
    at::Tensor want = at::relu(conv.to(st).to(at::kFloat)).to(st).to(at::kFloat);
    at::Tensor got = aten((*out)[0]);
    EXPECT_TRUE(at::equal(got, want)) << dtype_name(dt) << ": max diff " << (got - want).abs().max().item<float>();
  }
}

TEST(HalfPrecision, CompareWidensToleranceToTheOutputPrecision) {
  // A float16 graph against itself with its Relu computed before the rounding of the conv: the
  // results differ by a rounding, which float32 tolerances would call a mismatch.
  const Graph a = half_conv_relu(DType::kFloat16);
  Graph b = a;
  exec::CompareOptions co;
  auto same = exec::compare_graphs(a, b, co);
  ASSERT_TRUE(same.ok());
  EXPECT_TRUE(same->ok);
  EXPECT_EQ(same->max_abs_diff, 0.0);
  EXPECT_GE(same->outputs[0].rtol, 16 * 0x1p-10);
  EXPECT_GE(same->outputs[0].atol, 16 * 0x1p-10);
  // The float32 version keeps the requested tolerance.
  auto f32 = exec::compare_graphs(half_conv_relu(DType::kFloat32), half_conv_relu(DType::kFloat32), co);
  ASSERT_TRUE(f32.ok());
  EXPECT_EQ(f32->outputs[0].rtol, co.rtol);
  EXPECT_EQ(f32->outputs[0].atol, co.atol);
}

TEST(HalfPrecision, ModelsRoundTripKeepingTheirDtypes) {
  exec::Executor ex;
  onnxio::ImportOptions io;
  io.evaluator = &ex;
  onnxio::ExportOptions eo;
  eo.evaluator = &ex;
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    const Graph g = dt == DType::kFloat16 ? half_conv_relu(dt) : half_dense_softmax(dt);
    auto exported = onnxio::export_model(g, eo, "half.onnx");
    ASSERT_TRUE(exported.ok()) << exported.error().message;
    const std::string& bytes = exported->model_bytes;
    onnx::ModelProto m;
    ASSERT_TRUE(m.ParseFromString(bytes));
    const int want = dt == DType::kFloat16 ? onnx::TensorProto::FLOAT16 : onnx::TensorProto::BFLOAT16;
    EXPECT_EQ(m.graph().input(0).type().tensor_type().elem_type(), want);
    EXPECT_EQ(m.graph().output(0).type().tensor_type().elem_type(), want);
    for (const auto& t : m.graph().initializer()) EXPECT_EQ(t.data_type(), want) << t.name();
    auto back = onnxio::import_model(bytes, "half.onnx", ".", io);
    ASSERT_TRUE(back.ok()) << back.error().message;
    exec::CompareOptions co;
    auto cmp = exec::compare_graphs(g, *back, co);
    ASSERT_TRUE(cmp.ok()) << cmp.error().message;
    EXPECT_TRUE(cmp->ok) << cmp->message;
    EXPECT_EQ(cmp->max_abs_diff, 0.0) << dtype_name(dt);
  }
}

TEST(HalfPrecision, HalfConstantsAreReadAsNumbers) {
  // Clip with float16 bounds as inputs (opset 13): the bounds are read from the half tensors.
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  auto value = [](onnx::ValueInfoProto* v, const char* name) {
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT16);
    tt->mutable_shape()->add_dim()->set_dim_value(5);
  };
  value(g->add_input(), "x");
  value(g->add_output(), "y");
  auto scalar = [&](const char* name, float v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT16);
    const uint16_t h = float_to_half(v);
    t->set_raw_data(std::string(reinterpret_cast<const char*>(&h), 2));
  };
  scalar("lo", -0.5f);
  scalar("hi", 0.75f);
  auto* n = g->add_node();
  n->set_op_type("Clip");
  n->add_input("x");
  n->add_input("lo");
  n->add_input("hi");
  n->add_output("y");
  exec::Executor ex;
  onnxio::ImportOptions io;
  io.evaluator = &ex;
  auto graph = onnxio::import_model(m.SerializeAsString(), "clip16.onnx", ".", io);
  ASSERT_TRUE(graph.ok()) << graph.error().message;
  auto x = Tensor::from_doubles(DType::kFloat16, {5}, {-2.0, -0.25, 0.0, 0.5, 3.0});
  auto y = ex.run(*graph, {x});
  ASSERT_TRUE(y.ok()) << y.error().message;
  ASSERT_EQ((*y)[0]->dtype(), DType::kFloat16);
  EXPECT_EQ((*y)[0]->as_double(), (std::vector<double>{-0.5, -0.25, 0.0, 0.5, 0.75}));
}
