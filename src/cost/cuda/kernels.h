#pragma once
// Internal to the CUDA backend: the small kernels for elementwise and layout ops that cuDNN and
// cuBLAS do not provide. Every launcher is asynchronous on the given stream and reports launch
// errors. C++17 (compiled by nvcc).
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "rlflow/util/expected.h"

namespace rlflow::cost::gpu {

constexpr int kMaxDims = 8;

// An index space over the output (row-major sizes) and, for each of up to two sources, the
// element stride of each output dim in that source (0 for a broadcast dim).
struct IndexMap {
  int rank = 0;
  int64_t size[kMaxDims] = {};
  int64_t stride_a[kMaxDims] = {};
  int64_t stride_b[kMaxDims] = {};
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= size[i];
    return n;
  }
};

// Merges adjacent dims that are contiguous in every source, so index arithmetic stays short.
IndexMap coalesce(const IndexMap& m);

// Packed row-major strides of a shape.
std::vector<int64_t> packed_strides(const std::vector<int64_t>& shape);

Status check_launch(const char* what);

// Uniform values in [lo, hi): deterministic in the seed.
Status fill_uniform(float* p, int64_t n, uint64_t seed, float lo, float hi, cudaStream_t s);
Status fill_value(float* p, int64_t n, float v, cudaStream_t s);

// out[i] = in[offset + sum_d idx_d(i) * m.stride_a[d]] for every output element i: transpose,
// slice, and broadcasting copies are all this one gather.
Status strided_copy(const void* in, void* out, int elem_bytes, int64_t offset, const IndexMap& m, cudaStream_t s);

enum class BinOp { kAdd, kSub, kMul, kDiv, kPow };
Status binary(BinOp op, const float* a, const float* b, float* out, const IndexMap& m, cudaStream_t s);

enum class UnOp { kSqrt, kErf, kClip, kScale, kGelu, kGeluTanh, kHardSigmoid, kHardSwish };
Status unary(UnOp op, const float* x, float* y, int64_t n, float p0, float p1, cudaStream_t s);

// Reads n elements of in_bytes and writes n elements of out_bytes: the memory traffic of a Cast
// (the bit patterns are not converted; only the timing matters here).
Status convert_bytes(const void* in, int in_bytes, void* out, int out_bytes, int64_t n, cudaStream_t s);

enum class PadKind { kConstant, kReflect, kEdge };
Status pad(const float* in, float* out, int rank, const int64_t* in_shape, const int64_t* out_shape, const int64_t* begin,
           PadKind mode, float value, cudaStream_t s);

// out[o, j, i] = data[o, index[j], i] with data viewed as [outer, axis_dim, inner].
Status gather(const float* data, const void* index, bool index_int64, float* out, int64_t outer, int64_t axis_dim,
              int64_t n_index, int64_t inner, cudaStream_t s);

// Normalises each of `rows` rows of `cols` elements; scale/bias are read cyclically (broadcast
// over the normalised dims); bias may be null.
Status layer_norm(const float* x, const float* scale, int64_t n_scale, const float* bias, int64_t n_bias, float* y,
                  int64_t rows, int64_t cols, float eps, cudaStream_t s);

}  // namespace rlflow::cost::gpu
