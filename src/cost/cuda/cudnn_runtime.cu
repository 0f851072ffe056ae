// The cudnn backend's device side: each op runs as a real kernel (cuDNN for convolution, pooling,
// softmax, activation and batch-norm; cuBLAS for MatMul/Gemm; kernels.cu for the rest) and is
// timed with CUDA events. Written against the cuDNN 9 legacy-descriptor API (the *_v7 and Find*Ex
// entry points, not the removed v7-era calls).
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "gpu_api.h"
#include "kernels.h"

// CMake hands RLFLOW_WARNINGS to C++ sources only; nvcc's host compiler gets this one here: a
// switch over an enum that misses one of its values does not compile.
#pragma GCC diagnostic error "-Wswitch"

namespace rlflow::cost::gpu {

namespace {

#define RL_CUDA(expr)                                                                              \
  do {                                                                                             \
    const cudaError_t e_ = (expr);                                                                 \
    if (e_ != cudaSuccess) return Error::internal(std::string(#expr) + ": " + cudaGetErrorString(e_)); \
  } while (0)
#define RL_CUDNN(expr)                                                                                    \
  do {                                                                                                    \
    const cudnnStatus_t e_ = (expr);                                                                      \
    if (e_ != CUDNN_STATUS_SUCCESS) return Error::internal(std::string(#expr) + ": " + cudnnGetErrorString(e_)); \
  } while (0)
#define RL_CUBLAS(expr)                                                                                        \
  do {                                                                                                         \
    const cublasStatus_t e_ = (expr);                                                                          \
    if (e_ != CUBLAS_STATUS_SUCCESS) return Error::internal(std::string(#expr) + ": " + cublasGetStatusString(e_)); \
  } while (0)
#define RL_TRY(expr)                  \
  do {                                \
    auto s_ = (expr);                 \
    if (!s_.ok()) return s_.error();  \
  } while (0)

// ---- owning wrappers: everything allocated is released in a destructor ----

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&&) = delete;
  Status alloc(size_t n) {
    reset();
    // Never zero bytes: every operand gets a distinct valid pointer.
    RL_CUDA(cudaMalloc(&p_, std::max<size_t>(n, 256)));
    n_ = n;
    return {};
  }
  void reset() {
    if (p_) cudaFree(p_);
    p_ = nullptr;
    n_ = 0;
  }
  void* get() const { return p_; }
  size_t size() const { return n_; }

 private:
  void* p_ = nullptr;
  size_t n_ = 0;
};

template <class T, cudnnStatus_t (*Create)(T*), cudnnStatus_t (*Destroy)(T)>
class Desc {
 public:
  Desc() = default;
  ~Desc() {
    if (d_) Destroy(d_);
  }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  Status create() {
    if (!d_) RL_CUDNN(Create(&d_));
    return {};
  }
  T get() const { return d_; }

 private:
  T d_ = nullptr;
};

using TensorD = Desc<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using FilterD = Desc<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor>;
using ConvD = Desc<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor, cudnnDestroyConvolutionDescriptor>;
using PoolD = Desc<cudnnPoolingDescriptor_t, cudnnCreatePoolingDescriptor, cudnnDestroyPoolingDescriptor>;
using ActD = Desc<cudnnActivationDescriptor_t, cudnnCreateActivationDescriptor, cudnnDestroyActivationDescriptor>;
using ReduceD = Desc<cudnnReduceTensorDescriptor_t, cudnnCreateReduceTensorDescriptor, cudnnDestroyReduceTensorDescriptor>;

Expected<std::vector<int>> to_int(const std::vector<int64_t>& v, const std::string& what) {
  std::vector<int> out;
  out.reserve(v.size());
  for (auto x : v) {
    if (x < 0 || x > INT_MAX) return Error::unsupported(what + ": dimension " + std::to_string(x) + " does not fit cuDNN's int");
    out.push_back(static_cast<int>(x));
  }
  return out;
}

// cuDNN tensors have 4 to 8 dims: shorter shapes get trailing 1s, which changes no layout.
// The cuDNN/cuBLAS element type of a float tensor.
cudnnDataType_t cudnn_type(const TensorDesc& t) {
  if (t.half == TensorDesc::Half::kFloat16) return CUDNN_DATA_HALF;
  if (t.half == TensorDesc::Half::kBFloat16) return CUDNN_DATA_BFLOAT16;
  return CUDNN_DATA_FLOAT;
}
cudaDataType_t cublas_type(const TensorDesc& t) {
  if (t.half == TensorDesc::Half::kFloat16) return CUDA_R_16F;
  if (t.half == TensorDesc::Half::kBFloat16) return CUDA_R_16BF;
  return CUDA_R_32F;
}

Status set_tensor(TensorD& t, std::vector<int64_t> dims, const std::string& what, cudnnDataType_t type = CUDNN_DATA_FLOAT) {
  RL_TRY(t.create());
  while (dims.size() < 4) dims.push_back(1);
  if (dims.size() > 8) return Error::unsupported(what + ": rank " + std::to_string(dims.size()) + " > 8");
  auto d = to_int(dims, what);
  if (!d) return d.error();
  std::vector<int> strides(d->size(), 1);
  for (size_t i = d->size(); i-- > 1;) strides[i - 1] = strides[i] * (*d)[i];
  RL_CUDNN(cudnnSetTensorNdDescriptor(t.get(), type, static_cast<int>(d->size()), d->data(), strides.data()));
  return {};
}

Status set_activation(ActD& a, Act act) {
  RL_TRY(a.create());
  cudnnActivationMode_t mode = CUDNN_ACTIVATION_IDENTITY;
  switch (act) {
    case Act::kRelu: mode = CUDNN_ACTIVATION_RELU; break;
    case Act::kSigmoid: mode = CUDNN_ACTIVATION_SIGMOID; break;
    case Act::kTanh: mode = CUDNN_ACTIVATION_TANH; break;
    case Act::kNone: break;
  }
  RL_CUDNN(cudnnSetActivationDescriptor(a.get(), mode, CUDNN_NOT_PROPAGATE_NAN, 0.0));
  return {};
}

// Product of v[from, to), clamped to v's extent.
int64_t prod(const std::vector<int64_t>& v, size_t from, size_t to) {
  int64_t p = 1;
  const size_t end = to < v.size() ? to : v.size();
  for (auto it = v.begin() + static_cast<long>(std::min(from, end)); it != v.begin() + static_cast<long>(end); ++it) p *= *it;
  return p;
}
int64_t prod(const std::vector<int64_t>& v, size_t from = 0) { return prod(v, from, v.size()); }

struct Context {
  cudaStream_t stream = nullptr;
  cudnnHandle_t cudnn = nullptr;
  cublasHandle_t cublas = nullptr;
  void* workspace = nullptr;  // the one preallocated workspace, shared by every kernel
  size_t workspace_bytes = 0;
  bool allow_tf32 = true;
};

using In = std::vector<const void*>;
using Out = std::vector<void*>;

const float kOne = 1.0f, kZero = 0.0f;

class Kernel {
 public:
  explicit Kernel(OpDesc d) : d_(std::move(d)) {}
  virtual ~Kernel() = default;
  // Bytes output i needs: cuDNN may compute a slightly larger extent than ONNX (ceil-mode pooling,
  // asymmetric pads), so buffers are sized by the larger of the two.
  virtual size_t output_bytes(size_t i) const { return d_.outputs[i].bytes(); }
  virtual bool is_view() const { return false; }
  // Called once with the real buffers before the first run: algorithm search, constant setup.
  virtual Status prepare(Context&, const In&, const Out&) { return {}; }
  virtual Status run(Context& c, const In& in, const Out& out) = 0;

 protected:
  OpDesc d_;
};

// Median milliseconds of `call` on the context's stream over `repeats` runs after one untimed run
// (which also tells whether the call works at all).
struct EventPair {
  cudaEvent_t a = nullptr, b = nullptr;
  ~EventPair() {
    if (a) cudaEventDestroy(a);
    if (b) cudaEventDestroy(b);
  }
};

template <class Call>
Expected<float> time_calls(Context& c, Call&& call, int repeats) {
  RL_TRY(call());
  EventPair ev;
  RL_CUDA(cudaEventCreate(&ev.a));
  RL_CUDA(cudaEventCreate(&ev.b));
  std::vector<float> times;
  for (int i = 0; i < std::max(1, repeats); ++i) {
    RL_CUDA(cudaEventRecord(ev.a, c.stream));
    RL_TRY(call());
    RL_CUDA(cudaEventRecord(ev.b, c.stream));
    RL_CUDA(cudaEventSynchronize(ev.b));
    float ms = 0;
    RL_CUDA(cudaEventElapsedTime(&ms, ev.a, ev.b));
    times.push_back(ms);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// ---- convolution: cudnnConvolutionForward, or cudnnConvolutionBiasActivationForward when a ReLU
// is fused (cuDNN fuses only ReLU and identity; sigmoid/tanh run as a second activation call) ----
class ConvKernel : public Kernel {
 public:
  using Kernel::Kernel;

  Status init(Context& c) {
    if (d_.inputs.size() < 2) return Error::bad_input(d_.label + ": Conv needs x and w");
    std::vector<int64_t> x = d_.inputs[0].shape, w = d_.inputs[1].shape;
    const size_t nsp = d_.strides.size();
    if (x.size() != nsp + 2 || w.size() != nsp + 2 || d_.pads.size() < nsp || d_.dilations.size() != nsp)
      return Error::bad_input(d_.label + ": inconsistent Conv ranks");
    // cuDNN pads symmetrically: the begin pads are used (asymmetric pads are rare and change the
    // output extent by one row or column at most).
    std::vector<int64_t> pad(d_.pads.begin(), d_.pads.begin() + static_cast<long>(nsp)), str = d_.strides, dil = d_.dilations;
    if (nsp == 1) {  // 1-D convolutions run as 2-D with a unit second spatial dim
      x.push_back(1);
      w.push_back(1);
      pad.push_back(0);
      str.push_back(1);
      dil.push_back(1);
    }
    const int nb = static_cast<int>(x.size());
    // Half convolutions: NCHW half data, as ONNX lays it out, float32 accumulation
    // (cuDNN's pseudo-half configuration) on tensor cores. cuDNN may transpose to NHWC inside
    // the algorithm it picks; that transposition is part of the timed call.
    const cudnnDataType_t io = cudnn_type(d_.inputs[0]);
    elem_ = d_.inputs[0].elem_bytes;
    RL_TRY(set_tensor(x_, x, d_.label, io));
    auto wd = to_int(w, d_.label);
    if (!wd) return wd.error();
    RL_TRY(w_.create());
    RL_CUDNN(cudnnSetFilterNdDescriptor(w_.get(), io, CUDNN_TENSOR_NCHW, nb, wd->data()));
    auto pd = to_int(pad, d_.label), sd = to_int(str, d_.label), dd = to_int(dil, d_.label);
    if (!pd || !sd || !dd) return Error::unsupported(d_.label + ": convolution attributes do not fit int");
    RL_TRY(conv_.create());
    RL_CUDNN(cudnnSetConvolutionNdDescriptor(conv_.get(), nb - 2, pd->data(), sd->data(), dd->data(), CUDNN_CROSS_CORRELATION,
                                             CUDNN_DATA_FLOAT));
    RL_CUDNN(cudnnSetConvolutionGroupCount(conv_.get(), static_cast<int>(d_.group)));
    // DEFAULT_MATH lets fp32 convolutions use TF32 tensor cores; FMA_MATH forbids it. Half data
    // always may use tensor cores.
    const bool half = io != CUDNN_DATA_FLOAT;
    RL_CUDNN(cudnnSetConvolutionMathType(conv_.get(), half ? CUDNN_TENSOR_OP_MATH : c.allow_tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
    std::vector<int> yd(static_cast<size_t>(nb));
    RL_CUDNN(cudnnGetConvolutionNdForwardOutputDim(conv_.get(), x_.get(), w_.get(), nb, yd.data()));
    y_dims_.assign(yd.begin(), yd.end());
    RL_TRY(set_tensor(y_, y_dims_, d_.label, io));
    has_bias_ = d_.inputs.size() > 2;
    fused_ = d_.act == Act::kRelu;
    if (has_bias_ || fused_) {
      std::vector<int64_t> b(x.size(), 1);
      b[1] = w[0];
      RL_TRY(set_tensor(b_, b, d_.label, io));
    }
    if (d_.act != Act::kNone) RL_TRY(set_activation(act_, d_.act));
    return {};
  }

  size_t output_bytes(size_t i) const override {
    return std::max(Kernel::output_bytes(i), static_cast<size_t>(prod(y_dims_)) * static_cast<size_t>(elem_));
  }

  Status prepare(Context& c, const In& in, const Out& out) override {
    if (fused_ && !has_bias_) {
      // The fused call always adds a bias; a zero one keeps the op's meaning.
      RL_TRY(zero_bias_.alloc(static_cast<size_t>(d_.inputs[1].shape[0]) * static_cast<size_t>(elem_)));
      RL_CUDA(cudaMemsetAsync(zero_bias_.get(), 0, zero_bias_.size(), c.stream));
    }
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int returned = 0;
    RL_CUDNN(cudnnFindConvolutionForwardAlgorithmEx(c.cudnn, x_.get(), in[0], w_.get(), in[1], conv_.get(), y_.get(), out[0],
                                                    CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, perf, c.workspace,
                                                    c.workspace_bytes));
    // Results come fastest first; take the fastest that succeeded within the workspace. The
    // search timed plain convolutions, and the fused call (conv + bias + ReLU in one kernel) runs
    // other code for the same algorithm and supports fewer of them: with a fused ReLU every
    // candidate is timed in the fused call itself, and the fastest that runs is kept.
    if (fused_) {
      float best = -1;
      cudnnConvolutionFwdAlgo_t best_algo = algo_;
      for (int i = 0; i < returned; ++i) {
        if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > c.workspace_bytes) continue;
        algo_ = perf[i].algo;
        auto ms = time_calls(c, [&] { return run(c, in, out); }, 3);
        if (!ms) continue;  // this algorithm has no fused form for this configuration
        if (best < 0 || *ms < best) best = *ms, best_algo = perf[i].algo;
      }
      cudaGetLastError();
      algo_ = best_algo;
      if (best >= 0) return {};
    }
    for (int i = 0; i < returned && !fused_; ++i) {
      if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > c.workspace_bytes) continue;
      algo_ = perf[i].algo;
      return {};
    }
    if (fused_) {
      // No algorithm runs fused (some half configurations): convolution, bias and activation
      // run as separate calls, as a runtime without the fused kernel would.
      fused_ = false;
      for (int i = 0; i < returned; ++i)
        if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= c.workspace_bytes) {
          algo_ = perf[i].algo;
          return {};
        }
    }
    return Error::unsupported(d_.label + ": no cuDNN convolution algorithm fits the " +
                              std::to_string(c.workspace_bytes >> 20) + " MiB workspace");
  }

  Status run(Context& c, const In& in, const Out& out) override {
    if (fused_) {
      // y = relu(conv(x, w) + 0 * z + bias); z aliases y with alpha2 = 0.
      RL_CUDNN(cudnnConvolutionBiasActivationForward(c.cudnn, &kOne, x_.get(), in[0], w_.get(), in[1], conv_.get(), algo_,
                                                     c.workspace, c.workspace_bytes, &kZero, y_.get(), out[0], b_.get(),
                                                     has_bias_ ? in[2] : zero_bias_.get(), act_.get(), y_.get(), out[0]));
      return {};
    }
    RL_CUDNN(cudnnConvolutionForward(c.cudnn, &kOne, x_.get(), in[0], w_.get(), in[1], conv_.get(), algo_, c.workspace,
                                     c.workspace_bytes, &kZero, y_.get(), out[0]));
    if (has_bias_) RL_CUDNN(cudnnAddTensor(c.cudnn, &kOne, b_.get(), in[2], &kOne, y_.get(), out[0]));
    if (d_.act != Act::kNone)
      RL_CUDNN(cudnnActivationForward(c.cudnn, act_.get(), &kOne, y_.get(), out[0], &kZero, y_.get(), out[0]));
    return {};
  }

 private:
  TensorD x_, y_, b_;
  FilterD w_;
  ConvD conv_;
  ActD act_;
  std::vector<int64_t> y_dims_;
  DeviceBuffer zero_bias_;
  cudnnConvolutionFwdAlgo_t algo_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  bool has_bias_ = false, fused_ = false;
  int elem_ = 4;
};

// ---- MatMul (numpy broadcasting over batch dims) and Gemm: cuBLAS, row-major through the
// transposition identity C^T = B^T A^T ----
Status check_int(int64_t v, const std::string& what) {
  if (v < 0 || v > INT_MAX) return Error::unsupported(what + ": GEMM dimension " + std::to_string(v) + " does not fit cuBLAS's int");
  return {};
}

class MatMulKernel : public Kernel {
 public:
  using Kernel::Kernel;
  Status init(Context&) {
    if (d_.inputs.size() < 2) return Error::bad_input(d_.label + ": MatMul needs two inputs");
    std::vector<int64_t> a = d_.inputs[0].shape, b = d_.inputs[1].shape;
    if (a.empty() || b.empty()) return Error::bad_input(d_.label + ": MatMul of a scalar");
    if (a.size() == 1) a.insert(a.begin(), 1);
    if (b.size() == 1) b.push_back(1);
    m_ = a[a.size() - 2];
    k_ = a.back();
    n_ = b.back();
    const int64_t batch_a = prod(a, 0, a.size() - 2), batch_b = prod(b, 0, b.size() - 2);
    batch_ = std::max(batch_a, batch_b);
    const auto& out = d_.outputs[0].shape;
    if (out.size() > 2) batch_ = std::max(batch_, prod(out, 0, out.size() - 2));
    if (batch_b == 1) {
      // x @ W: A's batch rows stack into one tall GEMM.
      m_ *= batch_a;
      batch_ = 1;
    }
    // An operand without every batch (fully broadcast, or a rare mixed broadcast) is re-read with
    // stride 0: the same FLOPs, never a read past its buffer.
    stride_a_ = batch_a == batch_ ? m_ * k_ : 0;
    stride_b_ = batch_b == batch_ ? k_ * n_ : 0;
    RL_TRY(check_int(m_, d_.label));
    RL_TRY(check_int(n_, d_.label));
    RL_TRY(check_int(k_, d_.label));
    RL_TRY(check_int(batch_, d_.label));
    return {};
  }
  Status run(Context& c, const In& in, const Out& out) override {
    const int m = static_cast<int>(m_), n = static_cast<int>(n_), k = static_cast<int>(k_);
    if (d_.inputs[0].half != TensorDesc::Half::kNone) {
      // Half operands and result, float32 accumulation on tensor cores.
      const cudaDataType_t t = cublas_type(d_.inputs[0]);
      RL_CUBLAS(cublasGemmStridedBatchedEx(c.cublas, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &kOne, in[1], t, n, stride_b_, in[0], t, k,
                                           stride_a_, &kZero, out[0], t, n, m_ * n_, static_cast<int>(batch_),
                                           CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      return {};
    }
    const float* A = static_cast<const float*>(in[0]);
    const float* B = static_cast<const float*>(in[1]);
    float* C = static_cast<float*>(out[0]);
    if (batch_ == 1) {
      RL_CUBLAS(cublasSgemm(c.cublas, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &kOne, B, n, A, k, &kZero, C, n));
    } else {
      RL_CUBLAS(cublasSgemmStridedBatched(c.cublas, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &kOne, B, n, stride_b_, A, k, stride_a_,
                                          &kZero, C, n, m_ * n_, static_cast<int>(batch_)));
    }
    return {};
  }

 private:
  int64_t m_ = 0, n_ = 0, k_ = 0, batch_ = 1, stride_a_ = 0, stride_b_ = 0;
};

class GemmKernel : public Kernel {
 public:
  using Kernel::Kernel;
  Status init(Context&) {
    if (d_.inputs.size() < 2 || d_.inputs[0].shape.size() != 2 || d_.inputs[1].shape.size() != 2)
      return Error::bad_input(d_.label + ": Gemm needs two matrices");
    const auto& a = d_.inputs[0].shape;
    const auto& b = d_.inputs[1].shape;
    m_ = d_.trans_a ? a[1] : a[0];
    k_ = d_.trans_a ? a[0] : a[1];
    n_ = d_.trans_b ? b[0] : b[1];
    RL_TRY(check_int(m_, d_.label));
    RL_TRY(check_int(n_, d_.label));
    RL_TRY(check_int(k_, d_.label));
    if (d_.inputs.size() > 2 && d_.beta != 0) {
      // C broadcasts to [M, N]; it is copied into Y first and cuBLAS accumulates onto it (beta).
      const auto& cs = d_.inputs[2].shape;
      bias_ = true;
      bias_map_.rank = 2;
      bias_map_.size[0] = m_;
      bias_map_.size[1] = n_;
      const int64_t cm = cs.size() >= 2 ? cs[cs.size() - 2] : 1, cn = cs.empty() ? 1 : cs.back();
      bias_map_.stride_a[0] = cm == 1 ? 0 : cn;
      bias_map_.stride_a[1] = cn == 1 ? 0 : 1;
    }
    return {};
  }
  Status run(Context& c, const In& in, const Out& out) override {
    if (bias_) RL_TRY(strided_copy(in[2], out[0], d_.outputs[0].elem_bytes, 0, bias_map_, c.stream));
    const float alpha = static_cast<float>(d_.alpha), beta = bias_ ? static_cast<float>(d_.beta) : 0.0f;
    const int m = static_cast<int>(m_), n = static_cast<int>(n_), k = static_cast<int>(k_);
    // Row-major X is column-major X^T: Y^T (n x m) = op(B)^T (n x k) * op(A)^T (k x m).
    const cublasOperation_t op_b = d_.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_a = d_.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const int ldb = d_.trans_b ? k : n, lda = d_.trans_a ? m : k;
    if (d_.inputs[0].half != TensorDesc::Half::kNone) {
      const cudaDataType_t t = cublas_type(d_.inputs[0]);
      RL_CUBLAS(cublasGemmEx(c.cublas, op_b, op_a, n, m, k, &alpha, in[1], t, ldb, in[0], t, lda, &beta, out[0], t, n,
                             CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      return {};
    }
    RL_CUBLAS(cublasSgemm(c.cublas, op_b, op_a, n, m, k, &alpha, static_cast<const float*>(in[1]), ldb,
                          static_cast<const float*>(in[0]), lda, &beta, static_cast<float*>(out[0]), n));
    return {};
  }

 private:
  int64_t m_ = 0, n_ = 0, k_ = 0;
  bool bias_ = false;
  IndexMap bias_map_;
};

// ---- pooling (max, average, global average) ----
class PoolKernel : public Kernel {
 public:
  using Kernel::Kernel;
  Status init(Context&) {
    std::vector<int64_t> x = d_.inputs[0].shape;
    if (x.size() < 3) return Error::bad_input(d_.label + ": pooling needs N, C and spatial dims");
    std::vector<int64_t> window, pad, stride;
    cudnnPoolingMode_t mode = CUDNN_POOLING_MAX;
    if (d_.kind == Kind::kGlobalAvgPool) {
      window.assign(x.begin() + 2, x.end());
      pad.assign(window.size(), 0);
      stride = window;
      mode = CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING;
    } else {
      const size_t nsp = d_.kernel.size();
      window = d_.kernel;
      stride = d_.strides;
      pad.assign(d_.pads.begin(), d_.pads.begin() + static_cast<long>(std::min(nsp, d_.pads.size())));
      pad.resize(nsp, 0);
      if (d_.kind == Kind::kAvgPool)
        mode = d_.count_include_pad ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
    }
    if (window.size() == 1) {  // 1-D pooling as 2-D
      x.push_back(1);
      window.push_back(1);
      pad.push_back(0);
      stride.push_back(1);
    }
    RL_TRY(set_tensor(x_, x, d_.label));
    auto wd = to_int(window, d_.label), pd = to_int(pad, d_.label), sd = to_int(stride, d_.label);
    if (!wd || !pd || !sd) return Error::unsupported(d_.label + ": pooling attributes do not fit int");
    RL_TRY(pool_.create());
    RL_CUDNN(cudnnSetPoolingNdDescriptor(pool_.get(), mode, CUDNN_NOT_PROPAGATE_NAN, static_cast<int>(wd->size()), wd->data(),
                                         pd->data(), sd->data()));
    const int nb = static_cast<int>(std::max<size_t>(x.size(), 4));
    std::vector<int> yd(static_cast<size_t>(nb));
    RL_CUDNN(cudnnGetPoolingNdForwardOutputDim(pool_.get(), x_.get(), nb, yd.data()));
    y_dims_.assign(yd.begin(), yd.end());
    RL_TRY(set_tensor(y_, y_dims_, d_.label));
    return {};
  }
  size_t output_bytes(size_t i) const override { return std::max(Kernel::output_bytes(i), static_cast<size_t>(prod(y_dims_)) * 4); }
  Status run(Context& c, const In& in, const Out& out) override {
    RL_CUDNN(cudnnPoolingForward(c.cudnn, pool_.get(), &kOne, x_.get(), in[0], &kZero, y_.get(), out[0]));
    return {};
  }

 private:
  TensorD x_, y_;
  PoolD pool_;
  std::vector<int64_t> y_dims_;
};

// ---- softmax over one axis: the tensor is viewed as [outer, axis, inner, 1] and cuDNN's channel
// mode normalises over C, exactly ONNX's (opset 13) softmax ----
class SoftmaxKernel : public Kernel {
 public:
  using Kernel::Kernel;
  Status init(Context&) {
    const auto& s = d_.inputs[0].shape;
    const size_t axis = static_cast<size_t>(d_.axis);
    if (axis >= s.size()) return Error::bad_input(d_.label + ": softmax axis out of range");
    return set_tensor(t_, {prod(s, 0, axis), s[axis], prod(s, axis + 1), 1}, d_.label);
  }
  Status run(Context& c, const In& in, const Out& out) override {
    RL_CUDNN(cudnnSoftmaxForward(c.cudnn, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_CHANNEL, &kOne, t_.get(), in[0], &kZero,
                                 t_.get(), out[0]));
    return {};
  }

 private:
  TensorD t_;
};

class ActivationKernel : public Kernel {
 public:
  using Kernel::Kernel;
  Status init(Context&) {
    RL_TRY(set_tensor(t_, {1, 1, 1, d_.inputs[0].numel()}, d_.label));
    return set_activation(act_, d_.kind == Kind::kRelu ? Act::kRelu : d_.kind == Kind::kSigmoid ? Act::kSigmoid : Act::kTanh);
  }
  Status run(Context& c, const In& in, const Out& out) override {
    RL_CUDNN(cudnnActivationForward(c.cudnn, act_.get(), &kOne, t_.get(), in[0], &kZero, t_.get(), out[0]));
    return {};
  }

 private:
  TensorD t_;
  ActD act_;
};

class BatchNormKernel : public Kernel {
 public:
  using Kernel::Kernel;
  Status init(Context&) {
    if (d_.inputs.size() < 5) return Error::bad_input(d_.label + ": BatchNorm needs x, scale, bias, mean, var");
    RL_TRY(set_tensor(x_, d_.inputs[0].shape, d_.label));
    RL_TRY(bn_.create());
    RL_CUDNN(cudnnDeriveBNTensorDescriptor(bn_.get(), x_.get(), CUDNN_BATCHNORM_SPATIAL));
    return {};
  }
  Status run(Context& c, const In& in, const Out& out) override {
    RL_CUDNN(cudnnBatchNormalizationForwardInference(c.cudnn, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, x_.get(), in[0], x_.get(),
                                                     out[0], bn_.get(), in[1], in[2], in[3], in[4],
                                                     std::max(d_.epsilon, CUDNN_BN_MIN_EPSILON)));
    return {};
  }

 private:
  TensorD x_, bn_;
};

// ---- ReduceMean: cudnnReduceTensor (AVG) with reduced dims kept as 1 ----
class ReduceKernel : public Kernel {
 public:
  using Kernel::Kernel;
  Status init(Context& c) {
    const auto& s = d_.inputs[0].shape;
    std::vector<int64_t> y = s;
    for (auto a : d_.axes)
      if (a >= 0 && static_cast<size_t>(a) < y.size()) y[static_cast<size_t>(a)] = 1;
    RL_TRY(set_tensor(a_, s, d_.label));
    RL_TRY(set_tensor(c_, y, d_.label));
    RL_TRY(reduce_.create());
    RL_CUDNN(cudnnSetReduceTensorDescriptor(reduce_.get(), CUDNN_REDUCE_TENSOR_AVG, CUDNN_DATA_FLOAT, CUDNN_NOT_PROPAGATE_NAN,
                                            CUDNN_REDUCE_TENSOR_NO_INDICES, CUDNN_32BIT_INDICES));
    RL_CUDNN(cudnnGetReductionWorkspaceSize(c.cudnn, reduce_.get(), a_.get(), c_.get(), &ws_));
    if (ws_ > c.workspace_bytes) return Error::unsupported(d_.label + ": reduction workspace exceeds the preallocated one");
    return {};
  }
  Status run(Context& c, const In& in, const Out& out) override {
    RL_CUDNN(cudnnReduceTensor(c.cudnn, reduce_.get(), nullptr, 0, c.workspace, ws_, &kOne, a_.get(), in[0], &kZero, c_.get(),
                               out[0]));
    return {};
  }

 private:
  TensorD a_, c_;
  ReduceD reduce_;
  size_t ws_ = 0;
};

// ---- the small kernels of kernels.cu ----

// Non-float operands of elementwise and layout ops (integer shape arithmetic that did not fold) are
// timed as a conversion copy of the smaller of input and output: the right order of traffic,
// never a read or write past either buffer.
Status byte_traffic(const OpDesc& d, const In& in, const Out& out, cudaStream_t s) {
  const int64_t n = std::min(d.inputs[0].numel(), d.outputs[0].numel());
  return convert_bytes(in[0], d.inputs[0].elem_bytes, out[0], d.outputs[0].elem_bytes, n, s);
}

// Right-aligned numpy broadcasting of input `shape` against the output: its stride per output dim.
void broadcast_strides(const std::vector<int64_t>& out, const std::vector<int64_t>& in, int64_t* strides) {
  const auto ps = packed_strides(in);
  const size_t off = out.size() - std::min(out.size(), in.size());
  for (size_t d = 0; d < out.size(); ++d) {
    strides[d] = 0;
    if (d < off) continue;
    const size_t k = d - off;
    strides[d] = in[k] == 1 ? 0 : ps[k];
  }
}

class BinaryKernel : public Kernel {
 public:
  using Kernel::Kernel;
  Status init(Context&) {
    const auto& o = d_.outputs[0].shape;
    if (o.size() > static_cast<size_t>(kMaxDims)) return Error::unsupported(d_.label + ": rank > 8");
    float_ = d_.inputs[0].is_f32 && d_.inputs[1].is_f32 && d_.outputs[0].is_f32;
    map_.rank = static_cast<int>(o.size());
    for (size_t d = 0; d < o.size(); ++d) map_.size[d] = o[d];
    broadcast_strides(o, d_.inputs[0].shape, map_.stride_a);
    broadcast_strides(o, d_.inputs[1].shape, map_.stride_b);
    return {};
  }
  Status run(Context& c, const In& in, const Out& out) override {
    if (!float_) return byte_traffic(d_, in, out, c.stream);
    BinOp op = BinOp::kAdd;
    switch (d_.kind) {
      case Kind::kSub: op = BinOp::kSub; break;
      case Kind::kMul: op = BinOp::kMul; break;
      case Kind::kDiv: op = BinOp::kDiv; break;
      case Kind::kPow: op = BinOp::kPow; break;
      case Kind::kAdd: break;  // op's initial value
      // make_kernel sends no other kind here
      case Kind::kConv: case Kind::kMatMul: case Kind::kGemm: case Kind::kMaxPool: case Kind::kAvgPool:
      case Kind::kGlobalAvgPool: case Kind::kSoftmax: case Kind::kBatchNorm: case Kind::kLayerNorm:
      case Kind::kReduceMean: case Kind::kRelu: case Kind::kSigmoid: case Kind::kTanh: case Kind::kSqrt:
      case Kind::kErf: case Kind::kClip: case Kind::kScale: case Kind::kGelu: case Kind::kGeluTanh:
      case Kind::kHardSigmoid: case Kind::kHardSwish: case Kind::kTranspose: case Kind::kSlice:
      case Kind::kPad: case Kind::kGather: case Kind::kConcat: case Kind::kSplit: case Kind::kCast:
      case Kind::kFill: case Kind::kView:
        break;
    }
    return binary(op, static_cast<const float*>(in[0]), static_cast<const float*>(in[1]), static_cast<float*>(out[0]), map_,
                  c.stream);
  }

 private:
  IndexMap map_;
  bool float_ = true;
};

class UnaryKernel : public Kernel {
 public:
  using Kernel::Kernel;
  Status run(Context& c, const In& in, const Out& out) override {
    const int64_t n = d_.outputs[0].numel();
    if (!d_.inputs[0].is_f32) return byte_traffic(d_, in, out, c.stream);
    UnOp op = UnOp::kSqrt;
    float p0 = 0, p1 = 0;
    switch (d_.kind) {
      case Kind::kErf: op = UnOp::kErf; break;
      case Kind::kGelu: op = UnOp::kGelu; break;
      case Kind::kGeluTanh: op = UnOp::kGeluTanh; break;
      case Kind::kHardSigmoid: op = UnOp::kHardSigmoid, p0 = static_cast<float>(d_.lo), p1 = static_cast<float>(d_.hi); break;
      case Kind::kHardSwish: op = UnOp::kHardSwish; break;
      case Kind::kClip: op = UnOp::kClip, p0 = static_cast<float>(d_.lo), p1 = static_cast<float>(d_.hi); break;
      case Kind::kScale: op = UnOp::kScale, p0 = static_cast<float>(d_.value); break;
      case Kind::kSqrt: break;  // op's initial value
      // make_kernel sends no other kind here
      case Kind::kConv: case Kind::kMatMul: case Kind::kGemm: case Kind::kMaxPool: case Kind::kAvgPool:
      case Kind::kGlobalAvgPool: case Kind::kSoftmax: case Kind::kBatchNorm: case Kind::kLayerNorm:
      case Kind::kReduceMean: case Kind::kRelu: case Kind::kSigmoid: case Kind::kTanh: case Kind::kAdd:
      case Kind::kSub: case Kind::kMul: case Kind::kDiv: case Kind::kPow: case Kind::kTranspose:
      case Kind::kSlice: case Kind::kPad: case Kind::kGather: case Kind::kConcat: case Kind::kSplit:
      case Kind::kCast: case Kind::kFill: case Kind::kView:
        break;
    }
    return unary(op, static_cast<const float*>(in[0]), static_cast<float*>(out[0]), n, p0, p1, c.stream);
  }
};

// Transpose and Slice are one strided gather each; Cast moves the bytes of a conversion.
class StridedKernel : public Kernel {
 public:
  using Kernel::Kernel;
  Status init(Context&) {
    const auto& in = d_.inputs[0].shape;
    const auto& o = d_.outputs[0].shape;
    if (o.size() > static_cast<size_t>(kMaxDims) || in.size() != o.size()) return Error::unsupported(d_.label + ": rank");
    const auto ps = packed_strides(in);
    map_.rank = static_cast<int>(o.size());
    for (size_t d = 0; d < o.size(); ++d) {
      map_.size[d] = o[d];
      if (d_.kind == Kind::kTranspose) {
        map_.stride_a[d] = ps[static_cast<size_t>(d_.perm[d])];
      } else {  // slice
        map_.stride_a[d] = ps[d] * d_.steps[d];
        offset_ += d_.starts[d] * ps[d];
      }
    }
    return {};
  }
  Status run(Context& c, const In& in, const Out& out) override {
    return strided_copy(in[0], out[0], d_.inputs[0].elem_bytes, offset_, map_, c.stream);
  }

 private:
  IndexMap map_;
  int64_t offset_ = 0;
};

class CastKernel : public Kernel {
 public:
  using Kernel::Kernel;
  Status run(Context& c, const In& in, const Out& out) override {
    return byte_traffic(d_, in, out, c.stream);
  }
};

class PadKernel : public Kernel {
 public:
  using Kernel::Kernel;
  Status run(Context& c, const In& in, const Out& out) override {
    const auto& i = d_.inputs[0].shape;
    const auto& o = d_.outputs[0].shape;
    if (!d_.inputs[0].is_f32) return byte_traffic(d_, in, out, c.stream);
    const PadKind mode = d_.pad_mode == PadMode::kReflect ? PadKind::kReflect : d_.pad_mode == PadMode::kEdge ? PadKind::kEdge : PadKind::kConstant;
    return pad(static_cast<const float*>(in[0]), static_cast<float*>(out[0]), static_cast<int>(o.size()), i.data(), o.data(),
               d_.pad_begin.data(), mode, static_cast<float>(d_.value), c.stream);
  }
};

class GatherKernel : public Kernel {
 public:
  using Kernel::Kernel;
  Status run(Context& c, const In& in, const Out& out) override {
    const auto& s = d_.inputs[0].shape;
    const size_t axis = static_cast<size_t>(d_.axis);
    if (axis >= s.size()) return Error::bad_input(d_.label + ": gather axis out of range");
    if (!d_.inputs[0].is_f32) return byte_traffic(d_, in, out, c.stream);
    return gather(static_cast<const float*>(in[0]), in[1], d_.inputs[1].is_int64, static_cast<float*>(out[0]), prod(s, 0, axis),
                  s[axis], d_.inputs[1].numel(), prod(s, axis + 1), c.stream);
  }
};

// Concat and Split: one 2-D device-to-device copy per part (outer rows x contiguous chunk).
class ConcatSplitKernel : public Kernel {
 public:
  using Kernel::Kernel;
  Status run(Context& c, const In& in, const Out& out) override {
    const bool concat = d_.kind == Kind::kConcat;
    const auto& whole = concat ? d_.outputs[0] : d_.inputs[0];
    const auto& parts = concat ? d_.inputs : d_.outputs;
    const size_t axis = static_cast<size_t>(d_.axis);
    if (axis >= whole.shape.size()) return Error::bad_input(d_.label + ": axis out of range");
    const size_t esz = static_cast<size_t>(whole.elem_bytes);
    const int64_t outer = prod(whole.shape, 0, axis), inner = prod(whole.shape, axis + 1);
    const size_t row = static_cast<size_t>(whole.shape[axis] * inner) * esz;
    size_t offset = 0;
    for (size_t k = 0; k < parts.size(); ++k) {
      const size_t chunk = static_cast<size_t>(parts[k].shape[axis] * inner) * esz;
      if (chunk > 0 && outer > 0) {
        char* base = static_cast<char*>(concat ? out[0] : const_cast<void*>(in[0])) + offset;
        if (concat)
          RL_CUDA(cudaMemcpy2DAsync(base, row, in[k], chunk, chunk, static_cast<size_t>(outer), cudaMemcpyDeviceToDevice, c.stream));
        else
          RL_CUDA(cudaMemcpy2DAsync(out[k], chunk, base, row, chunk, static_cast<size_t>(outer), cudaMemcpyDeviceToDevice, c.stream));
      }
      offset += chunk;
    }
    return {};
  }
};

class LayerNormKernel : public Kernel {
 public:
  using Kernel::Kernel;
  Status run(Context& c, const In& in, const Out& out) override {
    const auto& s = d_.inputs[0].shape;
    const size_t axis = static_cast<size_t>(d_.axis);
    if (axis > s.size() || d_.inputs.size() < 2) return Error::bad_input(d_.label + ": LayerNorm");
    const bool bias = d_.inputs.size() > 2;
    return layer_norm(static_cast<const float*>(in[0]), static_cast<const float*>(in[1]), d_.inputs[1].numel(),
                      bias ? static_cast<const float*>(in[2]) : nullptr, bias ? d_.inputs[2].numel() : 0,
                      static_cast<float*>(out[0]), prod(s, 0, axis), prod(s, axis), static_cast<float>(d_.epsilon), c.stream);
  }
};

class FillKernel : public Kernel {
 public:
  using Kernel::Kernel;
  Status run(Context& c, const In&, const Out& out) override {
    if (!d_.outputs[0].is_f32) {
      RL_CUDA(cudaMemsetAsync(out[0], 0, d_.outputs[0].bytes(), c.stream));
      return {};
    }
    return fill_value(static_cast<float*>(out[0]), d_.outputs[0].numel(), static_cast<float>(d_.value), c.stream);
  }
};

class ViewKernel : public Kernel {
 public:
  using Kernel::Kernel;
  bool is_view() const override { return true; }
  Status run(Context&, const In&, const Out&) override { return {}; }
};

template <class K>
Expected<std::unique_ptr<Kernel>> with_init(Context& c, const OpDesc& d) {
  auto k = std::make_unique<K>(d);
  RL_TRY(k->init(c));
  return std::unique_ptr<Kernel>(std::move(k));
}

template <class K>
Expected<std::unique_ptr<Kernel>> plain(const OpDesc& d) {
  return std::unique_ptr<Kernel>(std::make_unique<K>(d));
}

Expected<std::unique_ptr<Kernel>> make_kernel(Context& c, const OpDesc& d) {
  if (d.inputs.empty() && d.kind != Kind::kFill) return Error::bad_input(d.label + ": op without inputs");
  if (d.outputs.empty()) return Error::bad_input(d.label + ": op without outputs");
  const bool tensor_core_op = d.kind == Kind::kConv || d.kind == Kind::kMatMul || d.kind == Kind::kGemm;
  bool half = false;
  for (const auto& t : d.inputs) {
    half = half || t.half != TensorDesc::Half::kNone;
    if (tensor_core_op && !t.is_f32 && (t.half == TensorDesc::Half::kNone || t.half != d.inputs[0].half))
      return Error::unsupported(d.label + ": the cudnn backend runs convolutions and GEMMs in float32, float16 or bfloat16, one type per op");
  }
  // Half precision: convolutions and GEMMs run for real (cuDNN, cuBLAS); every other half op is
  // timed as one memory pass over its bytes, the bound a bandwidth-limited kernel has. Moves
  // (Transpose, Slice, Concat, Split, Gather, Cast) already work on raw bytes.
  const bool moves_bytes = d.kind == Kind::kTranspose || d.kind == Kind::kSlice || d.kind == Kind::kConcat ||
                           d.kind == Kind::kSplit || d.kind == Kind::kCast || d.kind == Kind::kView || d.kind == Kind::kFill;
  if (half && !tensor_core_op && !moves_bytes && d.kind != Kind::kGather) return plain<CastKernel>(d);
  switch (d.kind) {
    case Kind::kConv: return with_init<ConvKernel>(c, d);
    case Kind::kMatMul: return with_init<MatMulKernel>(c, d);
    case Kind::kGemm: return with_init<GemmKernel>(c, d);
    case Kind::kMaxPool:
    case Kind::kAvgPool:
    case Kind::kGlobalAvgPool: return with_init<PoolKernel>(c, d);
    case Kind::kSoftmax: return with_init<SoftmaxKernel>(c, d);
    case Kind::kBatchNorm: return with_init<BatchNormKernel>(c, d);
    case Kind::kReduceMean: return with_init<ReduceKernel>(c, d);
    case Kind::kRelu:
    case Kind::kSigmoid:
    case Kind::kTanh:
      if (!d.inputs[0].is_f32) return plain<CastKernel>(d);
      return with_init<ActivationKernel>(c, d);
    case Kind::kAdd:
    case Kind::kSub:
    case Kind::kMul:
    case Kind::kDiv:
    case Kind::kPow: return with_init<BinaryKernel>(c, d);
    case Kind::kSqrt:
    case Kind::kErf:
    case Kind::kGelu:
    case Kind::kGeluTanh:
    case Kind::kHardSigmoid:
    case Kind::kHardSwish:
    case Kind::kClip:
    case Kind::kScale: return plain<UnaryKernel>(d);
    case Kind::kTranspose:
    case Kind::kSlice: return with_init<StridedKernel>(c, d);
    case Kind::kPad: return plain<PadKernel>(d);
    case Kind::kGather: return plain<GatherKernel>(d);
    case Kind::kConcat:
    case Kind::kSplit: return plain<ConcatSplitKernel>(d);
    case Kind::kCast: return plain<CastKernel>(d);
    case Kind::kLayerNorm: return plain<LayerNormKernel>(d);
    case Kind::kFill: return plain<FillKernel>(d);
    case Kind::kView: return plain<ViewKernel>(d);
  }
  return Error::unsupported(d.label + ": no CUDA kernel");
}

// Operands get data: floats uniform in [0.5, 1.5) (no NaNs from sqrt, pow or division); other
// types zeros, which are valid gather indices.
Status fill_operand(void* p, const TensorDesc& t, uint64_t seed, cudaStream_t s) {
  if (t.is_f32) return fill_uniform(static_cast<float*>(p), t.numel(), seed, 0.5f, 1.5f, s);
  RL_CUDA(cudaMemsetAsync(p, 0, t.bytes(), s));
  return {};
}

double median(std::vector<float> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (static_cast<double>(v[n / 2 - 1]) + v[n / 2]);
}

// Every step's kernel with its buffers, run eagerly or replayed from a captured CUDA graph.
class CudnnProgram : public PreparedProgram {
 public:
  explicit CudnnProgram(Context& c) : c_(c) {}
  ~CudnnProgram() override {
    if (c_.stream) cudaStreamSynchronize(c_.stream);
    if (exec_) cudaGraphExecDestroy(exec_);
    if (graph_) cudaGraphDestroy(graph_);
    if (start_) cudaEventDestroy(start_);
    if (stop_) cudaEventDestroy(stop_);
  }

  Status build(const Program& p, int warmup) {
    std::vector<size_t> need(p.values.size());
    for (size_t v = 0; v < p.values.size(); ++v) need[v] = p.values[v].bytes();
    for (const auto& step : p.steps) {
      auto k = make_kernel(c_, step.op);
      if (!k) return k.error();
      for (size_t i = 0; i < step.out.size(); ++i)
        need[static_cast<size_t>(step.out[i])] = std::max(need[static_cast<size_t>(step.out[i])], (*k)->output_bytes(i));
      kernels_.push_back(std::move(*k));
      labels_.push_back(step.op.label);
    }
    // One buffer per value (no reuse: the graphs measured here fit easily); a view's output
    // aliases its input.
    buffers_ = std::vector<DeviceBuffer>(p.values.size());
    std::vector<void*> ptr(p.values.size(), nullptr);
    std::vector<bool> alias(p.values.size(), false);
    for (size_t s = 0; s < p.steps.size(); ++s)
      if (kernels_[s]->is_view() && !p.steps[s].in.empty())
        for (int o : p.steps[s].out) alias[static_cast<size_t>(o)] = true;
    for (size_t v = 0; v < p.values.size(); ++v) {
      if (alias[v]) continue;
      RL_TRY(buffers_[v].alloc(need[v]));
      ptr[v] = buffers_[v].get();
    }
    // Steps are in execution order, so a view of a view resolves to the first buffer.
    for (size_t s = 0; s < p.steps.size(); ++s)
      if (kernels_[s]->is_view() && !p.steps[s].in.empty())
        for (int o : p.steps[s].out) ptr[static_cast<size_t>(o)] = ptr[static_cast<size_t>(p.steps[s].in[0])];
    for (int v : p.sources) RL_TRY(fill_operand(ptr[static_cast<size_t>(v)], p.values[static_cast<size_t>(v)], 0x5eed + v, c_.stream));
    ins_.resize(p.steps.size());
    outs_.resize(p.steps.size());
    for (size_t s = 0; s < p.steps.size(); ++s) {
      for (int v : p.steps[s].in) ins_[s].push_back(ptr[static_cast<size_t>(v)]);
      for (int v : p.steps[s].out) outs_[s].push_back(ptr[static_cast<size_t>(v)]);
      RL_TRY(kernels_[s]->prepare(c_, ins_[s], outs_[s]));
    }
    RL_CUDA(cudaEventCreate(&start_));
    RL_CUDA(cudaEventCreate(&stop_));
    // Algorithms are chosen and every lazy allocation happens in the warm-up runs, before capture.
    for (int i = 0; i < std::max(1, warmup); ++i) RL_TRY(run_eager());
    RL_CUDA(cudaStreamSynchronize(c_.stream));
    capture();
    return {};
  }

  Expected<double> time(int repeats, int inner) override {
    inner = std::max(1, inner);
    std::vector<float> times;
    for (int i = 0; i < std::max(1, repeats); ++i) {
      RL_CUDA(cudaEventRecord(start_, c_.stream));
      for (int k = 0; k < inner; ++k) RL_TRY(run_once());
      RL_CUDA(cudaEventRecord(stop_, c_.stream));
      RL_CUDA(cudaEventSynchronize(stop_));
      float ms = 0;
      RL_CUDA(cudaEventElapsedTime(&ms, start_, stop_));
      times.push_back(ms / static_cast<float>(inner));
    }
    return median(std::move(times));
  }

  std::string method() const override {
    return exec_ ? "CUDA graph replay" : "eager kernel launches (CUDA graph capture failed: " + capture_error_ + ")";
  }

 private:
  Status run_eager() {
    for (size_t s = 0; s < kernels_.size(); ++s) {
      auto st = kernels_[s]->run(c_, ins_[s], outs_[s]);
      if (!st.ok()) return st.error().with_context(labels_[s]);
    }
    return {};
  }
  Status run_once() {
    if (!exec_) return run_eager();
    RL_CUDA(cudaGraphLaunch(exec_, c_.stream));
    return {};
  }
  // A kernel that synchronises or allocates inside run() cannot be captured: the program then
  // runs eagerly, and method() says why.
  void capture() {
    if (cudaStreamBeginCapture(c_.stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
      capture_error_ = cudaGetErrorString(cudaGetLastError());
      return;
    }
    const Status ran = run_eager();
    cudaGraph_t g = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(c_.stream, &g);
    if (!ran.ok() || ended != cudaSuccess || !g) {
      capture_error_ = !ran.ok() ? ran.error().message : cudaGetErrorString(ended);
      if (g) cudaGraphDestroy(g);
      cudaGetLastError();
      return;
    }
    graph_ = g;
    const cudaError_t inst = cudaGraphInstantiate(&exec_, graph_, 0);
    if (inst != cudaSuccess) {
      capture_error_ = cudaGetErrorString(inst);
      exec_ = nullptr;
      cudaGetLastError();
      return;
    }
    // The first launch uploads the graph: keep it out of the timings.
    if (cudaGraphLaunch(exec_, c_.stream) != cudaSuccess || cudaStreamSynchronize(c_.stream) != cudaSuccess) {
      capture_error_ = "the captured graph does not launch";
      cudaGraphExecDestroy(exec_);
      exec_ = nullptr;
      cudaGetLastError();
    }
  }

  Context& c_;
  std::vector<std::unique_ptr<Kernel>> kernels_;
  std::vector<std::string> labels_;
  std::vector<DeviceBuffer> buffers_;
  std::vector<In> ins_;
  std::vector<Out> outs_;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  std::string capture_error_;
};

class CudnnRuntime : public Runtime {
 public:
  explicit CudnnRuntime(const RuntimeOptions& o) : opts_(o) {}

  ~CudnnRuntime() override {
    if (c_.stream) cudaStreamSynchronize(c_.stream);
    workspace_.reset();
    cublas_workspace_.reset();
    if (start_) cudaEventDestroy(start_);
    if (stop_) cudaEventDestroy(stop_);
    if (c_.cublas) cublasDestroy(c_.cublas);
    if (c_.cudnn) cudnnDestroy(c_.cudnn);
    if (c_.stream) cudaStreamDestroy(c_.stream);
  }

  Status init() {
    int count = 0;
    RL_CUDA(cudaGetDeviceCount(&count));
    if (opts_.device < 0 || opts_.device >= count)
      return Error::unsupported("CUDA device " + std::to_string(opts_.device) + " does not exist (" + std::to_string(count) + " found)");
    RL_CUDA(cudaSetDevice(opts_.device));
    cudaDeviceProp prop{};
    RL_CUDA(cudaGetDeviceProperties(&prop, opts_.device));
    name_ = prop.name;
    sm_ = std::to_string(prop.major) + std::to_string(prop.minor);
    RL_CUDA(cudaStreamCreateWithFlags(&c_.stream, cudaStreamNonBlocking));
    RL_CUDNN(cudnnCreate(&c_.cudnn));
    RL_CUDNN(cudnnSetStream(c_.cudnn, c_.stream));
    RL_CUBLAS(cublasCreate(&c_.cublas));
    RL_CUBLAS(cublasSetStream(c_.cublas, c_.stream));
    RL_CUBLAS(cublasSetMathMode(c_.cublas, opts_.allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    RL_CUDA(cudaEventCreate(&start_));
    RL_CUDA(cudaEventCreate(&stop_));
    RL_TRY(workspace_.alloc(opts_.workspace_bytes));
    c_.workspace = workspace_.get();
    c_.workspace_bytes = opts_.workspace_bytes;
    // cuBLAS may not allocate while a CUDA graph is being captured: it gets its workspace up front.
    RL_TRY(cublas_workspace_.alloc(size_t{32} << 20));
    RL_CUBLAS(cublasSetWorkspace(c_.cublas, cublas_workspace_.get(), cublas_workspace_.size()));
    c_.allow_tf32 = opts_.allow_tf32;
    int cublas_version = 0;
    RL_CUBLAS(cublasGetVersion(c_.cublas, &cublas_version));
    // "/graph": per-op times are GPU time inside a captured graph (no host launch per kernel), not
    // comparable with the eager per-call times of older cache entries.
    fingerprint_ = "cudnn/" + name_ + "/sm" + sm_ + "/cudnn" + std::to_string(cudnnGetVersion()) + "/cublas" +
                   std::to_string(cublas_version) + (opts_.allow_tf32 ? "/tf32" : "/fp32") + "/graph";
    return {};
  }

  Expected<double> time_op(const OpDesc& op) override {
    if (op.kind == Kind::kView) return 0.0;  // no kernel runs
    auto k = make_kernel(c_, op);
    if (!k) return k.error();
    Kernel& kernel = **k;
    std::vector<DeviceBuffer> ins(op.inputs.size()), outs(op.outputs.size());
    In in;
    Out out;
    for (size_t i = 0; i < ins.size(); ++i) {
      RL_TRY(ins[i].alloc(op.inputs[i].bytes()));
      RL_TRY(fill_operand(ins[i].get(), op.inputs[i], 0x5eed + i, c_.stream));
      in.push_back(ins[i].get());
    }
    for (size_t i = 0; i < outs.size(); ++i) {
      RL_TRY(outs[i].alloc(kernel.output_bytes(i)));
      out.push_back(outs[i].get());
    }
    RL_TRY(kernel.prepare(c_, in, out));
    for (int i = 0; i < opts_.warmup; ++i) RL_TRY(kernel.run(c_, in, out));
    RL_CUDA(cudaStreamSynchronize(c_.stream));
    // GPU time without host overhead: kInner calls captured back to back in one CUDA graph, each
    // sample one replay divided by kInner, as a graph runtime runs the op. An op whose kernel
    // cannot be captured is timed eagerly, call by call.
    if (auto graphed = time_captured(kernel, in, out); graphed) return *graphed;
    cudaGetLastError();
    std::vector<float> times;
    for (int i = 0; i < std::max(1, opts_.repeats); ++i) {
      RL_CUDA(cudaEventRecord(start_, c_.stream));
      RL_TRY(kernel.run(c_, in, out));
      RL_CUDA(cudaEventRecord(stop_, c_.stream));
      RL_CUDA(cudaEventSynchronize(stop_));
      float ms = 0;
      RL_CUDA(cudaEventElapsedTime(&ms, start_, stop_));
      times.push_back(ms);
    }
    return median(std::move(times));
  }

  Expected<std::unique_ptr<PreparedProgram>> prepare_program(const Program& p, int warmup) override;

  Expected<double> time_captured(Kernel& kernel, const In& in, const Out& out) {
    constexpr int kInner = 10;
    RL_CUDA(cudaStreamBeginCapture(c_.stream, cudaStreamCaptureModeThreadLocal));
    bool ran = true;
    for (int i = 0; i < kInner && ran; ++i) ran = kernel.run(c_, in, out).ok();
    cudaGraph_t g = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(c_.stream, &g);
    if (!ran || ended != cudaSuccess || !g) {
      if (g) cudaGraphDestroy(g);
      return Error::internal("capture failed");
    }
    cudaGraphExec_t exec = nullptr;
    const cudaError_t inst = cudaGraphInstantiate(&exec, g, 0);
    cudaGraphDestroy(g);
    if (inst != cudaSuccess) return Error::internal("instantiation failed");
    std::vector<float> times;
    bool replayed = true;
    const int samples = std::max(1, opts_.repeats / kInner);
    for (int i = -1; i < samples && replayed; ++i) {  // i = -1: the upload run, untimed
      float ms = 0;
      replayed = cudaEventRecord(start_, c_.stream) == cudaSuccess && cudaGraphLaunch(exec, c_.stream) == cudaSuccess &&
                 cudaEventRecord(stop_, c_.stream) == cudaSuccess && cudaEventSynchronize(stop_) == cudaSuccess &&
                 cudaEventElapsedTime(&ms, start_, stop_) == cudaSuccess;
      if (replayed && i >= 0) times.push_back(ms / kInner);
    }
    cudaGraphExecDestroy(exec);
    if (!replayed) return Error::internal("replay failed");
    return median(std::move(times));
  }

  std::string fingerprint() const override { return fingerprint_; }
  std::string device_name() const override { return name_; }

 private:
  RuntimeOptions opts_;
  Context c_;
  DeviceBuffer workspace_, cublas_workspace_;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  std::string name_, sm_, fingerprint_;
};

}  // namespace

Expected<std::unique_ptr<PreparedProgram>> CudnnRuntime::prepare_program(const Program& p, int warmup) {
  auto prog = std::make_unique<CudnnProgram>(c_);
  auto st = prog->build(p, warmup);
  if (!st.ok()) {
    cudaGetLastError();
    return st.error();
  }
  return std::unique_ptr<PreparedProgram>(std::move(prog));
}

Expected<std::unique_ptr<Runtime>> create_runtime(const RuntimeOptions& opts) {
  auto rt = std::make_unique<CudnnRuntime>(opts);
  auto st = rt->init();
  if (!st.ok()) {
    cudaGetLastError();  // leave no sticky error behind for the next caller
    return st.error().with_context("cudnn backend");
  }
  return std::unique_ptr<Runtime>(std::move(rt));
}

const CudnnModule& cudnn_module_table() {
  static const CudnnModule table{CudnnModule::kAbi, &create_runtime};
  return table;
}

}  // namespace rlflow::cost::gpu

// The entry point util/module.h looks up in librlflow_cudnn.so.
extern "C" __attribute__((visibility("default"))) const rlflow::cost::gpu::CudnnModule* rlflow_cudnn_module() {
  return &rlflow::cost::gpu::cudnn_module_table();
}
