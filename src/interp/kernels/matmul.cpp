// Interpreter kernels: MatMul, Gemm, MatMulInteger, QLinearMatMul and Det
// (Einsum lives in einsum.cpp and registers here). Every matrix product runs
// one i-k-j loop nest: each A(i, k) scales row k of B into a row accumulator,
// so the innermost loop runs over contiguous output columns. Integer
// products subtract their zero points first and accumulate in 64 bits.
#include "interp/kernels/common.h"
#include "interp/kernels/families.h"
#include "interp/kernels/quantize.h"

#include <cstring>

namespace kiln {

Status einsumKernel(KernelContext &ctx); // einsum.cpp

namespace {

// A numpy matmul: batch dims broadcast; a 1-d A is a row vector and a 1-d B a
// column vector, and their unit axis is dropped from the result.
struct MatmulShape {
  Shape64 aBatch, bBatch, batch;
  int64_t m = 1, k = 1, n = 1;
  Shape64 out;
};

Expected<MatmulShape> matmulShape(const KernelContext &ctx, const Shape64 &a, const Shape64 &b) {
  if (a.empty() || b.empty()) return ctx.error("matmul operands must not be scalars");
  Shape64 a2 = a, b2 = b;
  if (a.size() == 1) a2.insert(a2.begin(), 1);
  if (b.size() == 1) b2.push_back(1);
  MatmulShape s;
  s.m = a2[a2.size() - 2];
  s.k = a2.back();
  s.n = b2.back();
  if (b2[b2.size() - 2] != s.k)
    return ctx.error("inner dims do not match: A is ", shapeToString(a), ", B is ",
                     shapeToString(b));
  s.aBatch.assign(a2.begin(), a2.end() - 2);
  s.bBatch.assign(b2.begin(), b2.end() - 2);
  auto batch = broadcastShapes64(s.aBatch, s.bBatch);
  if (!batch.ok()) return ctx.error("batch dims do not broadcast: ", batch.error().message);
  s.batch = *batch;
  s.out = s.batch;
  if (a.size() > 1) s.out.push_back(s.m);
  if (b.size() > 1) s.out.push_back(s.n);
  return s;
}

// y[batch, i, :] = sum over k of a[batch, i, k] * b[batch, k, :].
template <class T, class Acc, class Out>
void matmulLoops(const MatmulShape &s, const T *a, const T *b, Out *y) {
  std::vector<int64_t> aOff = broadcastOffsets(s.aBatch, s.batch);
  std::vector<int64_t> bOff = broadcastOffsets(s.bBatch, s.batch);
  std::vector<Acc> acc(s.n);
  for (size_t bi = 0; bi < aOff.size(); ++bi) {
    const T *A = a + aOff[bi] * s.m * s.k;
    const T *B = b + bOff[bi] * s.k * s.n;
    Out *Y = y + static_cast<int64_t>(bi) * s.m * s.n;
    for (int64_t i = 0; i < s.m; ++i) {
      std::fill(acc.begin(), acc.end(), Acc(0));
      for (int64_t kk = 0; kk < s.k; ++kk) {
        Acc av = static_cast<Acc>(A[i * s.k + kk]);
        const T *brow = B + kk * s.n;
        Acc *__restrict dst = acc.data();
        for (int64_t j = 0; j < s.n; ++j) dst[j] += av * static_cast<Acc>(brow[j]);
      }
      for (int64_t j = 0; j < s.n; ++j) Y[i * s.n + j] = static_cast<Out>(acc[j]);
    }
  }
}

// The accumulator of a product of T: 64-bit for integers, f64 when asked
// for, else T itself.
template <class T, bool F64>
using AccOf = std::conditional_t<std::is_integral_v<T>,
                                 std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>,
                                 std::conditional_t<F64, double, T>>;

// Runs f(T{}, Acc{}) for a matmul-able dtype; f16/bf16 must have been
// converted to f32 by the caller.
template <class F> Status dispatchProduct(const KernelContext &ctx, DType d, F &&f) {
  bool f64 = ctx.options().accumulateF64;
  auto go = [&](auto tag) {
    using T = decltype(tag);
    if (f64)
      f(tag, AccOf<T, true>{});
    else
      f(tag, AccOf<T, false>{});
  };
  switch (d) {
  case DType::F32: go(float{}); break;
  case DType::F64: go(double{}); break;
  case DType::I32: go(int32_t{}); break;
  case DType::I64: go(int64_t{}); break;
  case DType::U32: go(uint32_t{}); break;
  case DType::U64: go(uint64_t{}); break;
  default: return ctx.error("does not support ", dtypeName(d), " tensors");
  }
  return Status::success();
}

// The dtype products are computed in: f16/bf16 widen to f32.
DType computeType(DType d) { return d == DType::F16 || d == DType::BF16 ? DType::F32 : d; }

Status matmulKernel(KernelContext &ctx) {
  const Tensor &a = ctx.in(0), &b = ctx.in(1);
  if (a.dtype() != b.dtype())
    return ctx.error("A is ", dtypeName(a.dtype()), " but B is ", dtypeName(b.dtype()));
  KILN_ASSIGN_OR_RETURN(MatmulShape s, matmulShape(ctx, a.shape(), b.shape()));
  DType compute = computeType(a.dtype());
  Tensor ac = convertTensor(a, compute), bc = convertTensor(b, compute);
  Tensor y(compute, s.out);
  KILN_RETURN_IF_ERROR(dispatchProduct(ctx, compute, [&](auto tag, auto accTag) {
    using T = decltype(tag);
    matmulLoops<T, decltype(accTag), T>(s, ac.data<T>(), bc.data<T>(), y.data<T>());
  }));
  ctx.setOutput(0, convertTensor(y, a.dtype()));
  return Status::success();
}

// ---- Gemm -------------------------------------------------------------------

// A 2-d tensor, transposed when `trans` (a copy either way is cheap next to
// the product, and keeps the product's inner loop contiguous).
Tensor orient(const Tensor &t, bool trans) {
  if (!trans) return t;
  int64_t rows = t.dim(0), cols = t.dim(1);
  Tensor out(t.dtype(), {cols, rows});
  size_t size = dtypeSize(t.dtype());
  const char *src = static_cast<const char *>(t.raw());
  char *dst = static_cast<char *>(out.mutableRaw());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      std::memcpy(dst + (c * rows + r) * size, src + (r * cols + c) * size, size);
  return out;
}

// Y = alpha * A' * B' + beta * C, with C broadcast to [M, N].
Status gemmKernel(KernelContext &ctx) {
  const Tensor &a = ctx.in(0), &b = ctx.in(1);
  if (a.rank() != 2 || b.rank() != 2)
    return ctx.error("A and B must be matrices, got ", shapeToString(a.shape()), " and ",
                     shapeToString(b.shape()));
  DType compute = computeType(a.dtype());
  Tensor ac = orient(convertTensor(a, compute), ctx.node().getInt("transA") != 0);
  Tensor bc = orient(convertTensor(b, compute), ctx.node().getInt("transB") != 0);
  KILN_ASSIGN_OR_RETURN(MatmulShape s, matmulShape(ctx, ac.shape(), bc.shape()));
  double alpha = ctx.node().getFloat("alpha"), beta = ctx.node().getFloat("beta");
  bool hasC = ctx.has(2) && beta != 0;
  std::vector<int64_t> cOff;
  if (hasC) {
    const Tensor &c = ctx.in(2);
    auto full = broadcastShapes64(c.shape(), s.out);
    if (!full.ok() || *full != s.out)
      return ctx.error("C has shape ", shapeToString(c.shape()), " which does not broadcast to ",
                       shapeToString(s.out));
    cOff = broadcastOffsets(c.shape(), s.out);
  }
  Tensor y(compute, s.out);
  KILN_RETURN_IF_ERROR(dispatchProduct(ctx, compute, [&](auto tag, auto accTag) {
    using T = decltype(tag);
    using Acc = decltype(accTag);
    // Integer Gemm scales in f64: alpha and beta are floats.
    using E = std::conditional_t<std::is_integral_v<T>, double, Acc>;
    std::vector<Acc> acc(s.m * s.n);
    matmulLoops<T, Acc, Acc>(s, ac.data<T>(), bc.data<T>(), acc.data());
    Tensor cc = hasC ? convertTensor(ctx.in(2), compute) : Tensor();
    T *out = y.data<T>();
    for (int64_t i = 0; i < s.m * s.n; ++i) {
      E v = static_cast<E>(alpha) * static_cast<E>(acc[i]);
      if (hasC) v += static_cast<E>(beta) * static_cast<E>(cc.data<T>()[cOff[i]]);
      out[i] = static_cast<T>(v);
    }
  }));
  ctx.setOutput(0, convertTensor(y, a.dtype()));
  return Status::success();
}

// ---- integer products ---------------------------------------------------------

// The int64 product (A - a_zp) * (B - b_zp) of MatMulInteger and
// QLinearMatMul: a_zp is per tensor or per row of A, b_zp per tensor or per
// column of B.
Expected<std::vector<int64_t>> integerProduct(const KernelContext &ctx, MatmulShape &s, int aIn,
                                              int aZp, int bIn, int bZp) {
  const Tensor &a = ctx.in(aIn), &b = ctx.in(bIn);
  if (!is8Bit(a.dtype()) || !is8Bit(b.dtype()))
    return ctx.error("expects u8 or i8 inputs, got ", dtypeName(a.dtype()), " and ",
                     dtypeName(b.dtype()));
  KILN_ASSIGN_OR_RETURN(s, matmulShape(ctx, a.shape(), b.shape()));
  KILN_ASSIGN_OR_RETURN(auto az, zeroPoints(ctx, aZp, s.m, "A zero point"));
  KILN_ASSIGN_OR_RETURN(auto bz, zeroPoints(ctx, bZp, s.n, "B zero point"));
  Tensor ai = minusZeroPoint(a, az, s.k), bi = minusZeroPoint(b, bz, 1);
  std::vector<int64_t> acc(numelOf(s.out));
  matmulLoops<int32_t, int64_t, int64_t>(s, ai.data<int32_t>(), bi.data<int32_t>(), acc.data());
  return acc;
}

Status matmulIntegerKernel(KernelContext &ctx) {
  MatmulShape s;
  KILN_ASSIGN_OR_RETURN(auto acc, integerProduct(ctx, s, 0, 2, 1, 3));
  Tensor y(DType::I32, s.out);
  for (size_t i = 0; i < acc.size(); ++i) y.data<int32_t>()[i] = static_cast<int32_t>(acc[i]);
  ctx.setOutput(0, std::move(y));
  return Status::success();
}

// QLinearMatMul(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp): scales
// per tensor, per row of A or per column of B.
Status qlinearMatmulKernel(KernelContext &ctx) {
  MatmulShape s;
  KILN_ASSIGN_OR_RETURN(auto acc, integerProduct(ctx, s, 0, 2, 3, 5));
  KILN_ASSIGN_OR_RETURN(auto as, quantScales(ctx, 1, s.m, "A scale"));
  KILN_ASSIGN_OR_RETURN(auto bs, quantScales(ctx, 4, s.n, "B scale"));
  KILN_ASSIGN_OR_RETURN(auto ys, quantScales(ctx, 6, 1, "Y scale"));
  KILN_ASSIGN_OR_RETURN(auto yz, zeroPoints(ctx, 7, 1, "Y zero point"));
  DType outType = ctx.in(7).dtype();
  if (!is8Bit(outType)) return ctx.error("Y zero point must be u8 or i8");
  bool f64 = ctx.options().accumulateF64;
  Tensor y(outType, s.out);
  for (size_t i = 0; i < acc.size(); ++i) {
    int64_t row = (static_cast<int64_t>(i) / s.n) % s.m, col = static_cast<int64_t>(i) % s.n;
    double scale = combinedScale(as[row], bs[col], ys[0], f64);
    if (outType == DType::U8)
      y.data<uint8_t>()[i] = requantize<uint8_t>(acc[i], scale, yz[0], f64);
    else
      y.data<int8_t>()[i] = requantize<int8_t>(acc[i], scale, yz[0], f64);
  }
  ctx.setOutput(0, std::move(y));
  return Status::success();
}

// ---- Det ----------------------------------------------------------------------

// Determinant by LU decomposition with partial pivoting, in f64.
double determinant(std::vector<double> a, int64_t n) {
  double det = 1;
  for (int64_t col = 0; col < n; ++col) {
    int64_t pivot = col;
    for (int64_t r = col + 1; r < n; ++r)
      if (std::fabs(a[r * n + col]) > std::fabs(a[pivot * n + col])) pivot = r;
    if (a[pivot * n + col] == 0) return 0;
    if (pivot != col) {
      for (int64_t c = 0; c < n; ++c) std::swap(a[col * n + c], a[pivot * n + c]);
      det = -det;
    }
    double p = a[col * n + col];
    det *= p;
    for (int64_t r = col + 1; r < n; ++r) {
      double f = a[r * n + col] / p;
      for (int64_t c = col; c < n; ++c) a[r * n + c] -= f * a[col * n + c];
    }
  }
  return det;
}

Status detKernel(KernelContext &ctx) {
  const Tensor &x = ctx.in(0);
  if (!isFloat(x.dtype())) return ctx.error("expects a float input, got ", dtypeName(x.dtype()));
  if (x.rank() < 2 || x.dim(x.rank() - 1) != x.dim(x.rank() - 2))
    return ctx.error("input has shape ", shapeToString(x.shape()),
                     ", expected [..., M, M] square matrices");
  int64_t n = x.dim(x.rank() - 1);
  Tensor y(x.dtype(), Shape64(x.shape().begin(), x.shape().end() - 2));
  std::vector<double> values = toDoubles(x);
  for (int64_t i = 0; i < y.numel(); ++i) {
    std::vector<double> m(values.begin() + i * n * n, values.begin() + (i + 1) * n * n);
    y.setDouble(i, determinant(std::move(m), n));
  }
  ctx.setOutput(0, std::move(y));
  return Status::success();
}

} // namespace

void registerMatmulKernels(KernelTable &t) {
  t.add(OpKind::MatMul, matmulKernel);
  t.add(OpKind::Gemm, gemmKernel);
  t.add(OpKind::MatMulInteger, matmulIntegerKernel);
  t.add(OpKind::QLinearMatMul, qlinearMatmulKernel);
  t.add(OpKind::Einsum, einsumKernel);
  t.add(OpKind::Det, detKernel);
}

} // namespace kiln
