// Small CUDA kernels for the ops cuDNN/cuBLAS do not cover. They exist to be timed, so they do the
// memory traffic and arithmetic of the op with straightforward grid-stride loops; nothing here is
// tuned beyond coalescing index spaces.
#include <algorithm>
#include <string>

#include "kernels.h"

// CMake hands RLFLOW_WARNINGS to C++ sources only; nvcc's host compiler gets this one here: a
// switch over an enum that misses one of its values does not compile.
#pragma GCC diagnostic error "-Wswitch"

namespace rlflow::cost::gpu {

namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(b, int64_t{1} << 16)));
}

__device__ __forceinline__ uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

__global__ void fill_uniform_kernel(float* p, int64_t n, uint64_t seed, float lo, float hi) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float u = static_cast<float>(splitmix64(seed ^ static_cast<uint64_t>(i)) >> 40) * (1.0f / 16777216.0f);
    p[i] = lo + (hi - lo) * u;
  }
}

__global__ void fill_value_kernel(float* p, int64_t n, float v) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) p[i] = v;
}

// Offsets of output element i in sources a and b.
__device__ __forceinline__ void offsets(const IndexMap& m, int64_t i, int64_t* oa, int64_t* ob) {
  int64_t a = 0, b = 0;
#pragma unroll
  for (int d = kMaxDims - 1; d >= 0; --d) {
    if (d >= m.rank) continue;
    const int64_t q = i / m.size[d];
    const int64_t r = i - q * m.size[d];
    a += r * m.stride_a[d];
    b += r * m.stride_b[d];
    i = q;
  }
  *oa = a;
  *ob = b;
}

template <class T>
__global__ void strided_copy_kernel(const T* in, T* out, int64_t offset, IndexMap m, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    int64_t a, b;
    offsets(m, i, &a, &b);
    out[i] = in[offset + a];
  }
}

__device__ __forceinline__ float apply(BinOp op, float x, float y) {
  switch (op) {
    case BinOp::kAdd: return x + y;
    case BinOp::kSub: return x - y;
    case BinOp::kMul: return x * y;
    case BinOp::kDiv: return x / y;
    case BinOp::kPow: return powf(x, y);
  }
  return x;
}

__global__ void binary_flat_kernel(BinOp op, const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    out[i] = apply(op, a[i], b[i]);
}

__global__ void binary_kernel(BinOp op, const float* a, const float* b, float* out, IndexMap m, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    int64_t oa, ob;
    offsets(m, i, &oa, &ob);
    out[i] = apply(op, a[oa], b[ob]);
  }
}

__global__ void unary_kernel(UnOp op, const float* x, float* y, int64_t n, float p0, float p1) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float v = x[i];
    float r = v;
    switch (op) {
      case UnOp::kSqrt: r = sqrtf(v); break;
      case UnOp::kErf: r = erff(v); break;
      case UnOp::kClip: r = fminf(fmaxf(v, p0), p1); break;
      case UnOp::kScale: r = v * p0; break;
      case UnOp::kGelu: r = 0.5f * v * (1.0f + erff(v * 0.70710678f)); break;
      case UnOp::kGeluTanh: r = 0.5f * v * (1.0f + tanhf(0.79788456f * (v + 0.044715f * v * v * v))); break;
      case UnOp::kHardSigmoid: r = fminf(fmaxf(p0 * v + p1, 0.0f), 1.0f); break;
      case UnOp::kHardSwish: r = v * fminf(fmaxf(v * (1.0f / 6.0f) + 0.5f, 0.0f), 1.0f); break;
    }
    y[i] = r;
  }
}

template <class TI, class TO>
__global__ void convert_kernel(const TI* in, TO* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    out[i] = static_cast<TO>(in[i]);
}

struct PadArgs {
  int rank;
  int64_t in_shape[kMaxDims], out_shape[kMaxDims], begin[kMaxDims];
};

__global__ void pad_kernel(const float* in, float* out, PadArgs a, PadKind mode, float value, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    int64_t rem = i, src = 0, in_stride = 1;
    bool inside = true;
    for (int d = a.rank - 1; d >= 0; --d) {
      const int64_t q = rem / a.out_shape[d];
      int64_t j = rem - q * a.out_shape[d] - a.begin[d];
      rem = q;
      const int64_t len = a.in_shape[d];
      if (j < 0 || j >= len) {
        if (mode == PadKind::kConstant) inside = false;
        else if (mode == PadKind::kEdge) j = j < 0 ? 0 : len - 1;
        else {
          // Reflect without repeating the edge; the period is 2 * (len - 1).
          const int64_t period = len > 1 ? 2 * (len - 1) : 1;
          j = j % period;
          if (j < 0) j += period;
          if (j >= len) j = period - j;
        }
      }
      src += j * in_stride;
      in_stride *= len;
    }
    out[i] = inside ? in[src] : value;
  }
}

template <class I>
__global__ void gather_kernel(const float* data, const I* index, float* out, int64_t axis_dim, int64_t n_index, int64_t inner,
                              int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t k = i % inner;
    const int64_t j = (i / inner) % n_index;
    const int64_t o = i / (inner * n_index);
    int64_t idx = static_cast<int64_t>(index[j]);
    if (idx < 0) idx += axis_dim;
    idx = idx < 0 ? 0 : (idx >= axis_dim ? axis_dim - 1 : idx);
    out[i] = data[(o * axis_dim + idx) * inner + k];
  }
}

__global__ void layer_norm_kernel(const float* x, const float* scale, int64_t n_scale, const float* bias, int64_t n_bias,
                                  float* y, int64_t rows, int64_t cols, float eps) {
  __shared__ float s_sum[32], s_sq[32];
  __shared__ float s_mean, s_rstd;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    float sum = 0, sq = 0;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float v = xr[c];
      sum += v;
      sq += v * v;
    }
    for (int o = 16; o > 0; o >>= 1) {
      sum += __shfl_down_sync(0xffffffffu, sum, o);
      sq += __shfl_down_sync(0xffffffffu, sq, o);
    }
    if (lane == 0) {
      s_sum[warp] = sum;
      s_sq[warp] = sq;
    }
    __syncthreads();
    if (warp == 0) {
      const int nw = (blockDim.x + 31) / 32;
      sum = lane < nw ? s_sum[lane] : 0.0f;
      sq = lane < nw ? s_sq[lane] : 0.0f;
      for (int o = 16; o > 0; o >>= 1) {
        sum += __shfl_down_sync(0xffffffffu, sum, o);
        sq += __shfl_down_sync(0xffffffffu, sq, o);
      }
      if (lane == 0) {
        const float mean = sum / static_cast<float>(cols);
        const float var = fmaxf(sq / static_cast<float>(cols) - mean * mean, 0.0f);
        s_mean = mean;
        s_rstd = rsqrtf(var + eps);
      }
    }
    __syncthreads();
    const float mean = s_mean, rstd = s_rstd;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      float v = (xr[c] - mean) * rstd * scale[c % n_scale];
      if (bias) v += bias[c % n_bias];
      yr[c] = v;
    }
    __syncthreads();  // the shared slots are reused by the next row
  }
}

template <class TI>
Status convert_to(const TI* in, void* out, int out_bytes, int64_t n, cudaStream_t s) {
  switch (out_bytes) {
    case 1: convert_kernel<<<blocks_for(n), kThreads, 0, s>>>(in, static_cast<uint8_t*>(out), n); break;
    case 2: convert_kernel<<<blocks_for(n), kThreads, 0, s>>>(in, static_cast<uint16_t*>(out), n); break;
    case 4: convert_kernel<<<blocks_for(n), kThreads, 0, s>>>(in, static_cast<uint32_t*>(out), n); break;
    case 8: convert_kernel<<<blocks_for(n), kThreads, 0, s>>>(in, static_cast<uint64_t*>(out), n); break;
    default: return Error::unsupported("convert: element size " + std::to_string(out_bytes));
  }
  return check_launch("convert");
}

}  // namespace

Status check_launch(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return Error::internal(std::string(what) + " kernel launch: " + cudaGetErrorString(e));
  return {};
}

std::vector<int64_t> packed_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

IndexMap coalesce(const IndexMap& m) {
  IndexMap out;
  for (int d = 0; d < m.rank; ++d) {
    if (m.size[d] == 1) continue;
    if (out.rank > 0) {
      const int l = out.rank - 1;
      // Dim l (outer) and d (inner) merge when stepping l equals stepping over all of d.
      if (out.stride_a[l] == m.stride_a[d] * m.size[d] && out.stride_b[l] == m.stride_b[d] * m.size[d]) {
        out.size[l] *= m.size[d];
        out.stride_a[l] = m.stride_a[d];
        out.stride_b[l] = m.stride_b[d];
        continue;
      }
    }
    out.size[out.rank] = m.size[d];
    out.stride_a[out.rank] = m.stride_a[d];
    out.stride_b[out.rank] = m.stride_b[d];
    ++out.rank;
  }
  if (out.rank == 0) {
    out.rank = 1;
    out.size[0] = 1;
  }
  return out;
}

Status fill_uniform(float* p, int64_t n, uint64_t seed, float lo, float hi, cudaStream_t s) {
  if (n <= 0) return {};
  fill_uniform_kernel<<<blocks_for(n), kThreads, 0, s>>>(p, n, seed, lo, hi);
  return check_launch("fill_uniform");
}

Status fill_value(float* p, int64_t n, float v, cudaStream_t s) {
  if (n <= 0) return {};
  fill_value_kernel<<<blocks_for(n), kThreads, 0, s>>>(p, n, v);
  return check_launch("fill_value");
}

Status strided_copy(const void* in, void* out, int elem_bytes, int64_t offset, const IndexMap& map, cudaStream_t s) {
  const IndexMap m = coalesce(map);
  const int64_t n = m.numel();
  if (n <= 0) return {};
  switch (elem_bytes) {
    case 1: strided_copy_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const uint8_t*>(in), static_cast<uint8_t*>(out), offset, m, n); break;
    case 2: strided_copy_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const uint16_t*>(in), static_cast<uint16_t*>(out), offset, m, n); break;
    case 4: strided_copy_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const uint32_t*>(in), static_cast<uint32_t*>(out), offset, m, n); break;
    case 8: strided_copy_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const uint64_t*>(in), static_cast<uint64_t*>(out), offset, m, n); break;
    default: return Error::unsupported("strided copy: element size " + std::to_string(elem_bytes));
  }
  return check_launch("strided_copy");
}

Status binary(BinOp op, const float* a, const float* b, float* out, const IndexMap& map, cudaStream_t s) {
  const IndexMap m = coalesce(map);
  const int64_t n = m.numel();
  if (n <= 0) return {};
  if (m.rank == 1 && m.stride_a[0] == 1 && m.stride_b[0] == 1)
    binary_flat_kernel<<<blocks_for(n), kThreads, 0, s>>>(op, a, b, out, n);
  else
    binary_kernel<<<blocks_for(n), kThreads, 0, s>>>(op, a, b, out, m, n);
  return check_launch("binary");
}

Status unary(UnOp op, const float* x, float* y, int64_t n, float p0, float p1, cudaStream_t s) {
  if (n <= 0) return {};
  unary_kernel<<<blocks_for(n), kThreads, 0, s>>>(op, x, y, n, p0, p1);
  return check_launch("unary");
}

Status convert_bytes(const void* in, int in_bytes, void* out, int out_bytes, int64_t n, cudaStream_t s) {
  if (n <= 0) return {};
  switch (in_bytes) {
    case 1: return convert_to(static_cast<const uint8_t*>(in), out, out_bytes, n, s);
    case 2: return convert_to(static_cast<const uint16_t*>(in), out, out_bytes, n, s);
    case 4: return convert_to(static_cast<const uint32_t*>(in), out, out_bytes, n, s);
    case 8: return convert_to(static_cast<const uint64_t*>(in), out, out_bytes, n, s);
    default: return Error::unsupported("convert: element size " + std::to_string(in_bytes));
  }
}

Status pad(const float* in, float* out, int rank, const int64_t* in_shape, const int64_t* out_shape, const int64_t* begin,
           PadKind mode, float value, cudaStream_t s) {
  if (rank > kMaxDims) return Error::unsupported("pad: rank " + std::to_string(rank) + " > " + std::to_string(kMaxDims));
  PadArgs a{};
  a.rank = rank;
  int64_t n = 1;
  for (int d = 0; d < rank; ++d) {
    a.in_shape[d] = in_shape[d];
    a.out_shape[d] = out_shape[d];
    a.begin[d] = begin[d];
    n *= out_shape[d];
  }
  if (n <= 0) return {};
  pad_kernel<<<blocks_for(n), kThreads, 0, s>>>(in, out, a, mode, value, n);
  return check_launch("pad");
}

Status gather(const float* data, const void* index, bool index_int64, float* out, int64_t outer, int64_t axis_dim,
              int64_t n_index, int64_t inner, cudaStream_t s) {
  const int64_t n = outer * n_index * inner;
  if (n <= 0 || axis_dim <= 0) return {};
  if (index_int64)
    gather_kernel<<<blocks_for(n), kThreads, 0, s>>>(data, static_cast<const int64_t*>(index), out, axis_dim, n_index, inner, n);
  else
    gather_kernel<<<blocks_for(n), kThreads, 0, s>>>(data, static_cast<const int32_t*>(index), out, axis_dim, n_index, inner, n);
  return check_launch("gather");
}

Status layer_norm(const float* x, const float* scale, int64_t n_scale, const float* bias, int64_t n_bias, float* y,
                  int64_t rows, int64_t cols, float eps, cudaStream_t s) {
  if (rows <= 0 || cols <= 0) return {};
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(rows, int64_t{1} << 16));
  layer_norm_kernel<<<grid, kThreads, 0, s>>>(x, scale, std::max<int64_t>(n_scale, 1), bias, std::max<int64_t>(n_bias, 1), y,
                                              rows, cols, eps);
  return check_launch("layer_norm");
}

}  // namespace rlflow::cost::gpu
