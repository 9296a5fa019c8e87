// Interpreter kernels: MatMul, Gemm, MatMulInteger, QLinearMatMul, Einsum
// and Det. Every matrix product runs one i-k-j loop nest: each A(i, k) scales
// row k of B into a row accumulator, so the innermost loop runs over
// contiguous output columns. Integer products subtract their zero points
// first and accumulate in 64 bits. Einsum is general (repeated labels,
// ellipsis, implicit output) and deliberately plain: a sum over every
// combination of its labels.
#include "interp/kernels/common.h"
#include "interp/kernels/families.h"
#include "interp/kernels/quantize.h"

#include <cctype>
#include <cstring>
#include <map>

namespace kiln {

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
        // Blocks of 8 let GCC vectorize at -O2 (see addRow in conv.cpp).
        int64_t j = 0;
        for (; j + 8 <= s.n; j += 8)
          for (int u = 0; u < 8; ++u) dst[j + u] += av * static_cast<Acc>(brow[j + u]);
        for (; j < s.n; ++j) dst[j] += av * static_cast<Acc>(brow[j]);
      }
      for (int64_t j = 0; j < s.n; ++j) Y[i * s.n + j] = static_cast<Out>(acc[j]);
    }
  }
}

// The accumulator of a product of T: f64 when asked for, else T itself; for
// integers u64, whose wrap-around is defined and, cast back to T, gives what
// numpy's wrapping integer arithmetic gives.
template <class T, bool F64>
using AccOf =
    std::conditional_t<std::is_integral_v<T>, uint64_t, std::conditional_t<F64, double, T>>;

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
  case DType::F32:
    go(float{});
    break;
  case DType::F64:
    go(double{});
    break;
  case DType::I32:
    go(int32_t{});
    break;
  case DType::I64:
    go(int64_t{});
    break;
  case DType::U32:
    go(uint32_t{});
    break;
  case DType::U64:
    go(uint64_t{});
    break;
  default:
    return ctx.error("does not support ", dtypeName(d), " tensors");
  }
  return Status::success();
}

// The dtype products are computed in: f16/bf16 widen to f32.
DType computeType(DType d) {
  return d == DType::F16 || d == DType::BF16 ? DType::F32 : d;
}

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
    // Integer Gemm scales in f64 (alpha and beta are floats), starting from
    // the product wrapped to T.
    constexpr bool kInt = std::is_integral_v<T>;
    using E = std::conditional_t<kInt, double, Acc>;
    std::vector<Acc> acc(s.m * s.n);
    matmulLoops<T, Acc, Acc>(s, ac.data<T>(), bc.data<T>(), acc.data());
    Tensor cc = hasC ? convertTensor(ctx.in(2), compute) : Tensor();
    T *out = y.data<T>();
    for (int64_t i = 0; i < s.m * s.n; ++i) {
      E product = kInt ? static_cast<E>(static_cast<T>(acc[i])) : static_cast<E>(acc[i]);
      E v = static_cast<E>(alpha) * product;
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

// ---- Einsum -------------------------------------------------------------------

// Labels are letters' char codes; the broadcast ellipsis dims are
// kEllipsis + j, j = 0 for the outermost. -1 marks where "..." stood in a term.
constexpr int kEllipsis = 256;

Expected<std::vector<int>> splitTerm(const KernelContext &ctx, std::string_view term) {
  std::vector<int> labels;
  bool ellipsis = false;
  for (size_t i = 0; i < term.size(); ++i) {
    char ch = term[i];
    if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')) {
      labels.push_back(ch);
    } else if (term.substr(i, 3) == "..." && !ellipsis) {
      ellipsis = true;
      labels.push_back(-1);
      i += 2;
    } else {
      return ctx.error("invalid einsum term '", term, "'");
    }
  }
  return labels;
}

// Replaces the "..." of a term by its `count` ellipsis labels, right-aligned
// among the `total` broadcast ellipsis dims.
std::vector<int> expandEllipsis(const std::vector<int> &term, int64_t count, int64_t total) {
  std::vector<int> out;
  for (int l : term) {
    if (l != -1)
      out.push_back(l);
    else
      for (int64_t j = 0; j < count; ++j)
        out.push_back(static_cast<int>(kEllipsis + total - count + j));
  }
  return out;
}

struct EinsumSpec {
  std::vector<std::vector<int>> inputs; // the label of each axis of each operand
  std::vector<int> output;
};

Expected<EinsumSpec> parseEinsum(const KernelContext &ctx, const std::vector<Shape64> &shapes) {
  std::string eq;
  for (char ch : ctx.node().getString("equation"))
    if (!std::isspace(static_cast<unsigned char>(ch))) eq += ch;
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  std::vector<std::vector<int>> terms;
  for (size_t start = 0;;) {
    size_t comma = lhs.find(',', start);
    KILN_ASSIGN_OR_RETURN(auto term, splitTerm(ctx, lhs.substr(start, comma - start)));
    terms.push_back(std::move(term));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != shapes.size())
    return ctx.error("equation '", eq, "' has ", terms.size(), " operands, the node has ",
                     shapes.size());
  // How many dims each operand's ellipsis covers; the widest sets the total.
  std::vector<int64_t> ellRank(terms.size(), 0);
  int64_t total = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    int64_t letters = std::count_if(terms[i].begin(), terms[i].end(), [](int l) { return l >= 0; });
    bool ell = letters != static_cast<int64_t>(terms[i].size());
    ellRank[i] = static_cast<int64_t>(shapes[i].size()) - letters;
    if (ellRank[i] < 0 || (!ell && ellRank[i] != 0))
      return ctx.error("operand ", i, " has rank ", shapes[i].size(), " but its term in '", eq,
                       "' has ", letters, " labels");
    total = std::max(total, ellRank[i]);
  }
  EinsumSpec spec;
  std::map<int, int> uses;
  for (size_t i = 0; i < terms.size(); ++i) {
    spec.inputs.push_back(expandEllipsis(terms[i], ellRank[i], total));
    for (int l : spec.inputs.back()) ++uses[l];
  }
  if (arrow != std::string::npos) {
    KILN_ASSIGN_OR_RETURN(auto out, splitTerm(ctx, eq.substr(arrow + 2)));
    spec.output = expandEllipsis(out, total, total);
    for (size_t i = 0; i < spec.output.size(); ++i)
      if (!uses.count(spec.output[i]) ||
          std::count(spec.output.begin(), spec.output.end(), spec.output[i]) > 1)
        return ctx.error("output label '", char(spec.output[i]), "' of '", eq,
                         "' must appear once in the output and in some input");
  } else {
    // Implicit mode: the ellipsis dims, then the labels used exactly once in
    // alphabetical (char code) order.
    for (int64_t j = 0; j < total; ++j) spec.output.push_back(static_cast<int>(kEllipsis + j));
    for (auto [l, n] : uses)
      if (l < kEllipsis && n == 1) spec.output.push_back(l);
  }
  return spec;
}

// Advances idx over `sizes`, keeping offsets[op] = sum of idx * strides[op].
bool advance(std::vector<int64_t> &idx, const Shape64 &sizes,
             const std::vector<std::vector<int64_t>> &strides, std::vector<int64_t> &offsets) {
  for (size_t ax = idx.size(); ax-- > 0;) {
    if (++idx[ax] < sizes[ax]) {
      for (size_t op = 0; op < offsets.size(); ++op) offsets[op] += strides[op][ax];
      return true;
    }
    for (size_t op = 0; op < offsets.size(); ++op) offsets[op] -= strides[op][ax] * (sizes[ax] - 1);
    idx[ax] = 0;
  }
  return false;
}

Status einsumKernel(KernelContext &ctx) {
  std::vector<Shape64> shapes;
  for (int i = 0; i < ctx.numInputs(); ++i) shapes.push_back(ctx.in(i).shape());
  KILN_ASSIGN_OR_RETURN(EinsumSpec spec, parseEinsum(ctx, shapes));
  // The size of every label; a dim of 1 broadcasts against a larger one.
  std::map<int, int64_t> size;
  for (size_t op = 0; op < shapes.size(); ++op)
    for (size_t ax = 0; ax < shapes[op].size(); ++ax) {
      int l = spec.inputs[op][ax];
      int64_t d = shapes[op][ax];
      auto [it, fresh] = size.emplace(l, d);
      if (!fresh && it->second != d && d != 1) {
        if (it->second != 1)
          return ctx.error("label dims disagree: ", it->second, " vs ", d, " in operand ", op);
        it->second = d;
      }
    }
  // Output labels, then summed labels; each operand's stride per label (a
  // label repeated within an operand adds its strides: a diagonal).
  std::vector<int> outLabels = spec.output, sumLabels;
  for (auto [l, d] : size)
    if (std::find(outLabels.begin(), outLabels.end(), l) == outLabels.end()) sumLabels.push_back(l);
  auto stridesFor = [&](const std::vector<int> &labels) {
    std::vector<std::vector<int64_t>> strides(shapes.size(), std::vector<int64_t>(labels.size()));
    for (size_t op = 0; op < shapes.size(); ++op) {
      Shape64 axisStride = stridesOf(shapes[op]);
      for (size_t ax = 0; ax < shapes[op].size(); ++ax) {
        auto at = std::find(labels.begin(), labels.end(), spec.inputs[op][ax]);
        if (at != labels.end() && shapes[op][ax] != 1)
          strides[op][at - labels.begin()] += axisStride[ax];
      }
    }
    return strides;
  };
  auto outStrides = stridesFor(outLabels), sumStrides = stridesFor(sumLabels);
  Shape64 outSizes, sumSizes;
  for (int l : outLabels) outSizes.push_back(size[l]);
  for (int l : sumLabels) sumSizes.push_back(size[l]);

  DType dtype = ctx.in(0).dtype();
  DType compute = computeType(dtype);
  std::vector<Tensor> ins;
  for (int i = 0; i < ctx.numInputs(); ++i) {
    if (ctx.in(i).dtype() != dtype) return ctx.error("operands must share one dtype");
    ins.push_back(convertTensor(ctx.in(i), compute));
  }
  Tensor y(compute, outSizes);
  KILN_RETURN_IF_ERROR(dispatchProduct(ctx, compute, [&](auto tag, auto accTag) {
    using T = decltype(tag);
    using Acc = decltype(accTag);
    size_t nOps = ins.size();
    std::vector<int64_t> outIdx(outSizes.size(), 0), base(nOps, 0);
    bool summing = numelOf(sumSizes) > 0;
    for (int64_t o = 0; o < y.numel(); ++o) {
      Acc acc = 0;
      std::vector<int64_t> sumIdx(sumSizes.size(), 0), off = base;
      do {
        Acc prod = 1;
        for (size_t op = 0; op < nOps && summing; ++op)
          prod *= static_cast<Acc>(ins[op].data<T>()[off[op]]);
        if (summing) acc += prod;
      } while (summing && advance(sumIdx, sumSizes, sumStrides, off));
      y.data<T>()[o] = static_cast<T>(acc);
      advance(outIdx, outSizes, outStrides, base);
    }
  }));
  ctx.setOutput(0, convertTensor(y, dtype));
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
