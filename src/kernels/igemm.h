// kiln's integer GEMM, the core of the int8 ops (MatMulInteger,
// QLinearMatMul, ConvInteger, QLinearConv):
//
//   acc(i, j) = sum_k (A(i, k) - za(i)) * (B(k, j) - zb(j))      (in i32)
//
// A is M x K and B is K x N, each u8 or i8, zero points per tensor, per row
// of A or per column of B. Each finished tile of acc goes to a finisher
// (store as i32, or requantize to u8/i8), so no M x N i32 matrix is
// written when the op's result is 8-bit.
//
// The hardware multiplies u8 by i8 (AVX-512 VNNI's vpdpbusd; the AVX2 and
// portable kernels use the same operand types), so operands of the other
// type are shifted by 128 while packed (an i8 A becomes A + 128 as u8, a u8
// B becomes B - 128 as i8, both exact) and the zero points shifted with
// them. The zero points are applied after the product, from row sums of A
// and column sums of B:
//
//   acc = sum A'B' - zb'(j) * rowsum(A')(i) - za'(i) * colsum(B')(j) + K za' zb'
//
// all in wrapping i32 arithmetic, so acc equals the exact sum whenever the
// exact sum fits in i32 (always for K <= 33025), and the exact sum
// truncated to i32 otherwise (what MatMulInteger's i32 output is).
//
// Packed layout (A and B alike, per ISA: IgemmPanelFormat): K is padded
// with zeros to a multiple of 4 (Kp) and cut into groups of g consecutive
// k; row panels of A (h <= mr rows, nearly equal heights as RowPanels in
// gemm_driver.h) hold element (i, k) at [(k / g) * h * g + i * g + k % g];
// column panels of B (nr columns, the last zero-padded) hold element (k, j)
// at [(k / g) * nr * g + j * g + k % g]. With g = 4 bytes (VNNI, portable)
// one 32-bit load gives a row's 4 consecutive k and one vector load 16
// columns' 4 k: vpdpbusd's operands. AVX2 packs g = 2 elements of i16 (the
// shifted values widened) for vpmaddwd, whose pair sums are exact.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace kiln::runtime {
class ThreadPool;
}

namespace kiln::kernels {

enum class IgemmIsa { kAuto, kPortable, kAvx2, kAvx512Vnni };
const char *igemmIsaName(IgemmIsa isa);
bool igemmIsaSupported(IgemmIsa isa);
// `isa` itself when supported, else the fastest this CPU supports.
IgemmIsa resolveIgemmIsa(IgemmIsa isa);

// An 8-bit matrix operand in memory: row-major, rows `ld` bytes apart, of
// type u8 (isSigned false) or i8; `trans` reads it transposed (element (r,
// c) at data[c * ld + r]).
struct Int8Matrix {
  const void *data = nullptr;
  int64_t ld = 0;
  bool isSigned = false;
  bool trans = false;
};

// A zero point per tensor (values == nullptr: `scalar`), or one i32 per row
// of A / column of B.
struct ZeroPoints {
  int32_t scalar = 0;
  const int32_t *values = nullptr;
  int32_t at(int64_t i) const { return values ? values[i] : scalar; }
};

namespace detail {
struct AlignedFreeBytes {
  void operator()(void *p) const;
};
} // namespace detail

// A constant operand packed once (weights): B of X * W, or A of W * X (a
// convolution's weights). Immutable, shared by threads.
class PackedInt8 {
public:
  PackedInt8() = default;
  // Packs an M x K matrix as the A operand.
  static PackedInt8 packA(int64_t M, int64_t K, const Int8Matrix &a, IgemmIsa isa = IgemmIsa::kAuto);
  // Packs a K x N matrix as the B operand.
  static PackedInt8 packB(int64_t K, int64_t N, const Int8Matrix &b, IgemmIsa isa = IgemmIsa::kAuto);
  bool isA() const { return isA_; }
  int64_t outer() const { return outer_; } // M for A, N for B
  int64_t depth() const { return K_; }
  bool sourceSigned() const { return signed_; }
  IgemmIsa isa() const { return isa_; }
  const uint8_t *data() const { return data_.get(); }
  // Sum over k of the shifted operand, per row of A or column of B.
  const int32_t *sums() const { return sums_.data(); }
  size_t bytes() const { return bytes_; }

private:
  std::unique_ptr<uint8_t[], detail::AlignedFreeBytes> data_;
  std::vector<int32_t> sums_;
  int64_t outer_ = 0, K_ = 0;
  size_t bytes_ = 0;
  bool isA_ = false, signed_ = false;
  IgemmIsa isa_ = IgemmIsa::kPortable;
};

// Receives each finished tile: acc holds h rows of `cols` values (row r at
// acc + r * ldAcc), element (r, c) being acc(row0 + r, col0 + c).
struct IgemmFinisher {
  void (*fn)(const void *ctx, const int32_t *acc, int64_t ldAcc, int64_t row0, int64_t col0,
             int h, int cols) = nullptr;
  const void *ctx = nullptr;
};

// Finisher: store acc into an i32 matrix (row stride ld).
struct StoreI32 {
  int32_t *out;
  int64_t ld;
};
IgemmFinisher storeI32(const StoreI32 *s);

// Finisher: out = saturate(round_half_even(f32(acc + bias) * scale) + zp), as
// quantize.h's requantize<Q> in f32 (the interpreter and ONNX Runtime). The
// bias (i32, may be null) and the scale (f32) are per row when perRow, else
// per column; a single scale (scaleCount 1) applies to every element.
struct Requantize {
  void *out;
  int64_t ld;        // row stride of out, in elements
  int64_t colStride; // column stride of out (1: row-major; else e.g. a transposed store)
  bool outSigned;    // i8, else u8
  int32_t zeroPoint;
  const float *scale;
  bool scalePerRow; // else per column (ignored when scaleCount == 1)
  int64_t scaleCount;
  const int32_t *bias;
  bool biasPerRow;
};
IgemmFinisher requantize(const Requantize *r);

// The packed layout of one ISA's kernels.
struct IgemmPanelFormat {
  int nr;        // columns per B panel
  int kGroup;    // consecutive k per group: 4 or 2
  int elemBytes; // 1 (u8 A, i8 B) or 2 (both as i16)
};
IgemmPanelFormat igemmFormat(IgemmIsa isa);

// Produces B's column panel [j0, j0 + cols) (cols <= f.nr, zero-padded)
// packed in the layout above for the whole depth, and the column sums of
// the shifted values (f.nr entries; 0 for the padding). For operands packed
// on the fly, e.g. a convolution's im2col panel.
struct IgemmBSource {
  void (*pack)(const void *ctx, int64_t j0, int cols, const IgemmPanelFormat &f, void *dst,
               int32_t *colSums) = nullptr;
  const void *ctx = nullptr;
};

struct IgemmProblem {
  int64_t M = 0, N = 0, K = 0;
  // A: pre-packed, or a matrix packed per call.
  const PackedInt8 *packedA = nullptr;
  Int8Matrix a;
  // B: pre-packed, a matrix packed per call, or a panel source.
  const PackedInt8 *packedB = nullptr;
  Int8Matrix b;
  IgemmBSource bSource;
  bool bSourceSigned = false; // the type of B behind bSource (for its zero points)
  ZeroPoints za, zb;
  IgemmFinisher finish;
  runtime::ThreadPool *pool = nullptr; // null: runtime::ThreadPool::global()
  IgemmIsa isa = IgemmIsa::kAuto;      // ignored when an operand is pre-packed
};

// Runs the product; blocks until done; safe to call from several threads.
void igemm(const IgemmProblem &p);

// Packs one B column panel from a matrix into `dst` (the helper of
// IgemmBSource implementations that have their panel as a plain matrix).
void igemmPackBPanel(const Int8Matrix &b, int64_t K, int64_t j0, int cols,
                     const IgemmPanelFormat &f, void *dst, int32_t *colSums);

} // namespace kiln::kernels
