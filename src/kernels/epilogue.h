// Fused epilogues: a short list of elementwise ops that a GEMM, a
// convolution or any other kernel applies to a tile of its output while the
// tile is still in L1, so `conv -> +bias -> SiLU -> +residual` writes its
// output once instead of four times (DESIGN.md, principle 4).
//
// The ops see the output as a matrix (for a conv: rows = output channels,
// columns = output pixels of one image), so per-channel data is per row.
// Each kernel documents how its output maps onto that matrix.
//
// applyEpilogue is vectorized with AVX-512 or AVX2 (chosen at run time like
// the GEMM) and has a portable path. Sigmoid, SiLU and Tanh use a vector exp
// (Cephes polynomial, relative error ~2e-7) and a rational tanh (Eigen's);
// all saturate exactly: sigmoid(-100) == 0 (never NaN), sigmoid(100) == 1.
//
// This header includes nothing but <cstdint>: the per-ISA files compiled
// with AVX-512 flags include it (see gemm_microkernel.h for why).
#pragma once

#include <cstdint>

namespace kiln::kernels {

enum class EpilogueKind : uint8_t {
  kAddRowBias,  // c += data[row]
  kAddColBias,  // c += data[col]
  kMulRowScale, // c *= data[row]
  kAddTensor,   // c += data[row * ld + col] (a residual with the output's layout)
  kRelu,        // max(c, 0)
  kClip,        // min(max(c, a), b)
  kLeakyRelu,   // c >= 0 ? c : a * c
  kSigmoid,     // 1 / (1 + exp(-c))
  kSilu,        // c * sigmoid(c)
  kHardSigmoid, // max(0, min(1, a * c + b))  (ONNX defaults: a = 0.2, b = 0.5)
  kHardSwish,   // c * max(0, min(1, a * c + b))  (ONNX HardSwish: a = 1/6, b = 0.5)
  kTanh,
  kMulColScale, // c *= data[col] (a MatMul's output scaled per column)
  kGelu,        // c * (1 + erf(c / sqrt(2))) / 2
  kGeluTanh,    // c * (1 + tanh(sqrt(2 / pi) * (c + 0.044715 c^3))) / 2
};

const char *epilogueKindName(EpilogueKind kind);

struct EpilogueOp {
  EpilogueKind kind = EpilogueKind::kRelu;
  float a = 0, b = 0;          // see EpilogueKind
  const float *data = nullptr; // not owned; indexed by the FULL output's row/column
  int64_t ld = 0;              // kAddTensor: row stride of data, in elements
};

// Ops applied in order. A plain aggregate: copy it freely.
struct Epilogue {
  static constexpr int kMaxOps = 8;
  EpilogueOp ops[kMaxOps];
  int count = 0;
  // Appends an op; more than kMaxOps is a caller bug (asserted).
  void push(EpilogueOp op);
  bool empty() const { return count == 0; }
};

// True when no op reads per-row or per-column data (a bias or scale): the
// ops then treat every element alike, except kAddTensor, which reads the
// element at the same (row * ld + col) offset. A tile of rows with ldc == ld
// == cols is then one row of rows * cols elements.
bool epilogueIsElementwise(const EpilogueOp *ops, int count);

// Applies ep's ops in order to the tile c[rows x cols] (row stride ldc) whose
// top-left element is element (row0, col0) of the full output; row/column
// data (biases, scales, the residual) is indexed with those full-output
// coordinates. Serial; safe to call from several threads on disjoint tiles.
void applyEpilogue(const Epilogue &ep, float *c, int64_t ldc, int64_t row0, int64_t col0,
                   int64_t rows, int64_t cols);

} // namespace kiln::kernels
