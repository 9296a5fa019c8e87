#include "codegen/cpu/emit_math.h"

#include "support/erfc_poly.h"

#include <llvm/IR/Intrinsics.h>

#include <initializer_list>

namespace kiln::codegen {

namespace {

llvm::Value *fconst(llvm::IRBuilder<> &b, llvm::Type *t, double v) {
  return llvm::ConstantFP::get(t, v);
}

// Horner evaluation of c[0] + c[1] x + c[2] x^2 + ... with fused multiply-adds.
llvm::Value *polynomial(llvm::IRBuilder<> &b, llvm::Value *x, std::initializer_list<double> c) {
  llvm::Type *t = x->getType();
  const double *coeffs = c.begin();
  int n = static_cast<int>(c.size());
  llvm::Value *acc = fconst(b, t, coeffs[n - 1]);
  for (int i = n - 2; i >= 0; --i)
    acc = b.CreateIntrinsic(llvm::Intrinsic::fma, {t}, {acc, x, fconst(b, t, coeffs[i])});
  return acc;
}

llvm::Value *minnum(llvm::IRBuilder<> &b, llvm::Value *x, double v) {
  return b.CreateMinNum(x, fconst(b, x->getType(), v));
}
llvm::Value *maxnum(llvm::IRBuilder<> &b, llvm::Value *x, double v) {
  return b.CreateMaxNum(x, fconst(b, x->getType(), v));
}

// NaN inputs give NaN outputs: the clamps above would otherwise drop them.
llvm::Value *keepNan(llvm::IRBuilder<> &b, llvm::Value *x, llvm::Value *result) {
  return b.CreateSelect(b.CreateFCmpUNO(x, x), x, result);
}

bool isDouble(llvm::Value *x) { return x->getType()->getScalarType()->isDoubleTy(); }

// 2^n for integral-valued float n in [-125, 127] (f32) or [-1021, 1023] (f64),
// built from the exponent bits.
llvm::Value *pow2(llvm::IRBuilder<> &b, llvm::Value *n) {
  llvm::Type *ft = n->getType();
  bool dbl = isDouble(n);
  llvm::Type *it = ft->isVectorTy()
                       ? static_cast<llvm::Type *>(llvm::VectorType::get(
                             dbl ? b.getInt64Ty() : b.getInt32Ty(),
                             llvm::cast<llvm::VectorType>(ft)->getElementCount()))
                       : (dbl ? b.getInt64Ty() : b.getInt32Ty());
  llvm::Value *ni = b.CreateFPToSI(n, it);
  llvm::Value *biased = b.CreateAdd(ni, llvm::ConstantInt::get(it, dbl ? 1023 : 127));
  llvm::Value *bits = b.CreateShl(biased, llvm::ConstantInt::get(it, dbl ? 52 : 23));
  return b.CreateBitCast(bits, ft);
}

} // namespace

llvm::Value *emitExp(llvm::IRBuilder<> &b, llvm::Value *x) {
  llvm::Type *t = x->getType();
  const bool dbl = isDouble(x);
  // exp(x) = 2^n * exp(r), n = round(x / ln2), |r| <= ln2/2. The clamp keeps
  // n + 1 inside the normal exponent range; outside it the result is 0 or
  // +inf, selected at the end.
  const double lo = dbl ? -707.0 : -86.6, hi = dbl ? 709.0 : 88.72;
  llvm::Value *xc = maxnum(b, minnum(b, x, hi), lo);
  llvm::Value *n = b.CreateIntrinsic(llvm::Intrinsic::roundeven, {t},
                                     {b.CreateFMul(xc, fconst(b, t, 1.4426950408889634))});
  // Cody-Waite: ln2 split in a high part exact in few bits and a low part.
  llvm::Value *r = b.CreateIntrinsic(llvm::Intrinsic::fma, {t},
                                     {n, fconst(b, t, -0.693145751953125), xc});
  r = b.CreateIntrinsic(llvm::Intrinsic::fma, {t}, {n, fconst(b, t, -1.428606820309417e-06), r});
  llvm::Value *p;
  if (dbl) {
    // Taylor to degree 11: |r|^12/12! < 2e-17 for |r| <= 0.347.
    p = polynomial(b, r,
                   {1.0, 1.0, 1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040,
                    1.0 / 40320, 1.0 / 362880, 1.0 / 3628800, 1.0 / 39916800});
  } else {
    // Degree-7 Taylor: |r|^8/8! < 5e-9 relative for |r| <= 0.347.
    p = polynomial(b, r,
                   {1.0, 1.0, 1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040});
  }
  // 2^n computed as 2^(n-1) * 2 so that n = 128 (x near the f32 maximum)
  // still has a representable scale.
  llvm::Value *scale = pow2(b, b.CreateFSub(n, fconst(b, t, 1.0)));
  llvm::Value *result = b.CreateFMul(b.CreateFMul(p, scale), fconst(b, t, 2.0));
  result = b.CreateSelect(b.CreateFCmpOLT(x, fconst(b, t, lo)), fconst(b, t, 0.0), result);
  result = b.CreateSelect(b.CreateFCmpOGT(x, fconst(b, t, hi)),
                          llvm::ConstantFP::getInfinity(t), result);
  return keepNan(b, x, result);
}

llvm::Value *emitSigmoid(llvm::IRBuilder<> &b, llvm::Value *x) {
  llvm::Type *t = x->getType();
  // 1 / (1 + e^-x): e^-x overflows to +inf for x << 0, giving exactly 0.
  llvm::Value *e = emitExp(b, b.CreateFNeg(x));
  return b.CreateFDiv(fconst(b, t, 1.0), b.CreateFAdd(fconst(b, t, 1.0), e));
}

llvm::Value *emitTanh(llvm::IRBuilder<> &b, llvm::Value *x) {
  llvm::Type *t = x->getType();
  llvm::Value *ax = b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
  // Small |x|: the odd Taylor series (x^11 term < 1e-7 relative at 0.4),
  // where 1 - 2/(e^2x + 1) would cancel.
  llvm::Value *x2 = b.CreateFMul(x, x);
  llvm::Value *series = b.CreateFMul(
      x, polynomial(b, x2,
                    {1.0, -1.0 / 3, 2.0 / 15, -17.0 / 315, 62.0 / 2835, -1382.0 / 155925}));
  // Large |x|: 1 - 2 / (e^(2|x|) + 1), sign restored; e^(2|x|) = inf gives 1.
  llvm::Value *e = emitExp(b, b.CreateFMul(ax, fconst(b, t, 2.0)));
  llvm::Value *big = b.CreateFSub(fconst(b, t, 1.0),
                                  b.CreateFDiv(fconst(b, t, 2.0), b.CreateFAdd(e, fconst(b, t, 1.0))));
  big = b.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, big, x);
  llvm::Value *result = b.CreateSelect(b.CreateFCmpOLT(ax, fconst(b, t, 0.4)), series, big);
  return keepNan(b, x, result);
}

llvm::Value *emitErf(llvm::IRBuilder<> &b, llvm::Value *x) {
  llvm::Type *t = x->getType();
  llvm::Value *ax = b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
  // Small |x| (< 0.5): Maclaurin series 2/sqrt(pi) (x - x^3/3 + x^5/10 - ...),
  // truncation < 2e-8 relative at 0.5.
  llvm::Value *x2 = b.CreateFMul(x, x);
  llvm::Value *series = b.CreateFMul(
      b.CreateFMul(x, fconst(b, t, 1.1283791670955126)),
      polynomial(b, x2, {1.0, -1.0 / 3, 1.0 / 10, -1.0 / 42, 1.0 / 216, -1.0 / 1320, 1.0 / 9360}));
  // Otherwise erf = 1 - t * exp(-x^2 + P(t)), t = 1/(1 + |x|/2): the
  // Chebyshev-fitted erfc of Numerical Recipes (fractional error < 1.2e-7).
  llvm::Value *tt = b.CreateFDiv(fconst(b, t, 1.0),
                                 b.CreateFAdd(fconst(b, t, 1.0), b.CreateFMul(ax, fconst(b, t, 0.5))));
  llvm::Value *poly = fconst(b, t, kErfcPoly[kErfcPolyTerms - 1]);
  for (int i = kErfcPolyTerms - 2; i >= 0; --i)
    poly = b.CreateIntrinsic(llvm::Intrinsic::fma, {t}, {poly, tt, fconst(b, t, kErfcPoly[i])});
  llvm::Value *erfc = b.CreateFMul(tt, emitExp(b, b.CreateFSub(poly, b.CreateFMul(ax, ax))));
  llvm::Value *big = b.CreateBinaryIntrinsic(llvm::Intrinsic::copysign,
                                             b.CreateFSub(fconst(b, t, 1.0), erfc), x);
  llvm::Value *result = b.CreateSelect(b.CreateFCmpOLT(ax, fconst(b, t, 0.5)), series, big);
  return keepNan(b, x, result);
}

} // namespace kiln::codegen
