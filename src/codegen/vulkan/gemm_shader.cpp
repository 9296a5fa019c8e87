#include "codegen/vulkan/gemm_shader.h"

#include "codegen/vulkan/emit_glsl.h"

#include <cstdio>
#include <cstring>
#include <sstream>

namespace kiln::codegen {

using kernels::EpilogueKind;
using Form = GemmShaderSpec::Form;

namespace {

bool perRow(EpilogueKind k) {
  return k == EpilogueKind::kAddRowBias || k == EpilogueKind::kMulRowScale;
}
bool perColumn(EpilogueKind k) {
  return k == EpilogueKind::kAddColBias || k == EpilogueKind::kMulColScale;
}

// A float literal that is exactly `f` (no decimal round trip).
std::string floatLiteral(float f) {
  uint32_t bits = 0;
  std::memcpy(&bits, &f, sizeof bits);
  char buf[40];
  std::snprintf(buf, sizeof buf, "uintBitsToFloat(0x%08xu)", bits);
  return buf;
}

// The statements applying the epilogue to `v` (a float variable) of the
// element at output index `oi` and channel `ch` (int expressions).
std::string epilogueCode(const GemmShaderSpec &spec) {
  std::ostringstream s;
  const int data = 3, residual = 3 + int(spec.hasData());
  for (size_t i = 0; i < spec.ops.size(); ++i) {
    const GemmShaderSpec::Op &op = spec.ops[i];
    const std::string a = floatLiteral(op.a), b = floatLiteral(op.b);
    const std::string channelData = "b" + std::to_string(data) + ".v[int(kp.v[" +
                                    std::to_string(kGemmDataOffsets + int(i)) + "]) + ch]";
    switch (op.kind) {
    case EpilogueKind::kAddRowBias:
    case EpilogueKind::kAddColBias:
      s << "      v += " << channelData << ";\n";
      break;
    case EpilogueKind::kMulRowScale:
    case EpilogueKind::kMulColScale:
      s << "      v *= " << channelData << ";\n";
      break;
    case EpilogueKind::kAddTensor:
      s << "      v += b" << residual << ".v[oi];\n";
      break;
    case EpilogueKind::kRelu:
      s << "      v = v < 0.0 ? 0.0 : v;\n";
      break;
    case EpilogueKind::kClip:
      s << "      v = min(max(v, " << a << "), " << b << ");\n";
      break;
    case EpilogueKind::kLeakyRelu:
      s << "      v = v >= 0.0 ? v : " << a << " * v;\n";
      break;
    case EpilogueKind::kSigmoid:
      s << "      v = kiln_sigmoid(v);\n";
      break;
    case EpilogueKind::kSilu:
      s << "      v = v * kiln_sigmoid(v);\n";
      break;
    case EpilogueKind::kHardSigmoid:
      s << "      v = max(0.0, min(1.0, " << a << " * v + " << b << "));\n";
      break;
    case EpilogueKind::kHardSwish:
      s << "      v = v * max(0.0, min(1.0, " << a << " * v + " << b << "));\n";
      break;
    case EpilogueKind::kTanh:
      s << "      v = kiln_tanh(v);\n";
      break;
    case EpilogueKind::kGelu:
      s << "      v = v * (1.0 + kiln_erf(v * 0.70710678118654752)) * 0.5;\n";
      break;
    case EpilogueKind::kGeluTanh:
      s << "      v = v * (1.0 + kiln_tanh(0.79788456080286536 * (v + 0.044715 * v * v * v))) * "
           "0.5;\n";
      break;
    }
  }
  return s.str();
}

void header(std::ostringstream &s, const GemmShaderSpec &spec, const char *what) {
  s << "#version 450\n"
    << "// kiln tuned shader: " << what << "\n"
    << "#extension GL_EXT_shader_explicit_arithmetic_types : require\n"
    << "#extension GL_EXT_control_flow_attributes : require\n"
    << "layout(local_size_x_id = 0) in;\n"
    << "layout(std430, set = 0, binding = 0) readonly buffer B0 { float v[]; } b0;\n"
    << "layout(std430, set = 0, binding = 1) readonly buffer B1 { float v[]; } b1;\n"
    << "layout(std430, set = 0, binding = 2) writeonly buffer B2 { float v[]; } b2;\n";
  int next = 3;
  if (spec.hasData())
    s << "layout(std430, set = 0, binding = " << next++
      << ") readonly buffer B3 { float v[]; } b3; // epilogue data\n";
  if (spec.hasResidual()) {
    s << "layout(std430, set = 0, binding = " << next << ") readonly buffer B" << next
      << " { float v[]; } b" << next << "; // residual\n";
    ++next;
  }
  s << "layout(std430, set = 0, binding = " << next
    << ") readonly buffer Params { int64_t v[]; } kp;\n"
    << glslHelpers();
}

// The conv geometry, read from the params.
constexpr const char *kConvGeometry = R"(
  int NI = int(kp.v[0]), C = int(kp.v[1]), H = int(kp.v[2]), W = int(kp.v[3]);
  int K = int(kp.v[4]), OH = int(kp.v[5]), OW = int(kp.v[6]), R = int(kp.v[7]), S = int(kp.v[8]);
  int SH = int(kp.v[9]), SW = int(kp.v[10]), PH = int(kp.v[11]), PW = int(kp.v[12]);
  int DH = int(kp.v[13]), DW = int(kp.v[14]), G = int(kp.v[15]);
  int CG = C / G, KG = K / G, RS = R * S, OHW = OH * OW;
)";

// The implicit-GEMM and tiled-GEMM shaders share everything but how a
// tile's operands are gathered and where a result goes.
std::string tiled(const GemmShaderSpec &spec) {
  const bool conv = spec.form == Form::kConv;
  const int T = spec.tile, BK = 16, TM = T / 16;
  std::ostringstream s;
  header(s, spec, conv ? "implicit-GEMM conv" : "tiled GEMM");
  s << "const int T = " << T << ", BK = " << BK << ", TM = " << TM << ", PER = " << T * BK / 256
    << "; // PER: elements of each tile one invocation gathers\n"
    << "shared float As[BK][T + 1];\n" // +1: column writes of a k-major gather hit distinct banks
    << "shared float Bs[BK][T + 1];\n"
    << "void main() {\n"
    << "  int lid = int(gl_LocalInvocationID.x), tx = lid % 16, ty = lid / 16;\n"
    << "  int m0 = int(gl_WorkGroupID.x) * T, n0 = int(gl_WorkGroupID.y) * T, z = "
       "int(gl_WorkGroupID.z);\n";
  if (conv) {
    s << kConvGeometry
      << "  int M = NI * OHW, N = KG, KD = CG * RS;\n"
      // The A gather is pixel-major: each invocation keeps one pixel of the tile.
      << "  int am = lid % T, ak = lid / T;\n"
      << "  int pm = m0 + am, img = pm / OHW, pix = pm - img * OHW;\n"
      << "  int ih0 = (pix / OW) * SH - PH, iw0 = (pix % OW) * SW - PW;\n"
      << "  int xbase = (img * C + z * CG) * H * W;\n"
      << "  int wbase = z * KG * KD;\n"
      // Each gathered k as (channel, kernel row, kernel column), advanced
      // by BK per step with carries instead of divisions (slow on GPUs,
      // slower on a CPU device, which has no vector integer division).
      << "  int gc[PER], gr[PER], gt[PER];\n"
      << "  for (int q = 0; q < PER; ++q) {\n"
      << "    int k = ak + q * (256 / T), rs = k % RS;\n"
      << "    gc[q] = k / RS; gr[q] = rs / S; gt[q] = rs % S;\n"
      << "  }\n"
      << "  int sc = BK / RS, sr = (BK % RS) / S, st = (BK % RS) % S;\n";
  } else {
    s << "  int M = int(kp.v[0]), N = int(kp.v[1]), KD = int(kp.v[2]);\n"
      << "  int abase = 0, bbase = 0, rest = z;\n"
      << "  for (int d = int(kp.v[3]) - 1; d >= 0; --d) {\n"
      << "    int size = int(kp.v[4 + d]), i = rest % size;\n"
      << "    rest /= size;\n"
      << "    abase += i * int(kp.v[8 + d]);\n"
      << "    bbase += i * int(kp.v[12 + d]);\n"
      << "  }\n";
  }
  for (int i = 0; i < TM; ++i)
    for (int j = 0; j < TM; ++j) s << "  float c" << i << j << " = 0.0;\n";
  s << "  for (int k0 = 0; k0 < KD; k0 += BK) {\n";
  if (conv) {
    s << "    for (int q = 0; q < PER; ++q) {\n"
      << "      int kk = ak + q * (256 / T), k = k0 + kk;\n"
      << "      float x = 0.0;\n"
      << "      if (pm < M && k < KD) {\n"
      << "        int ih = ih0 + gr[q] * DH, iw = iw0 + gt[q] * DW;\n"
      << "        if (ih >= 0 && ih < H && iw >= 0 && iw < W) x = b0.v[xbase + (gc[q] * H + ih) * "
         "W "
         "+ iw];\n"
      << "      }\n"
      << "      As[kk][am] = x;\n"
      << "      gt[q] += st;\n"
      << "      int carry = gt[q] >= S ? 1 : 0;\n"
      << "      gt[q] -= carry * S; gr[q] += sr + carry;\n"
      << "      carry = gr[q] >= R ? 1 : 0;\n"
      << "      gr[q] -= carry * R; gc[q] += sc + carry;\n"
      << "    }\n"
      // Weights are k-major ([K][C/g * R * S]): consecutive invocations, consecutive k.
      << "    for (int q = 0; q < PER; ++q) {\n"
      << "      int e = lid + 256 * q, kk = e % BK, nn = e / BK, k = k0 + kk, n = n0 + nn;\n"
      << "      Bs[kk][nn] = (n < N && k < KD) ? b1.v[wbase + n * KD + k] : 0.0;\n"
      << "    }\n";
  } else {
    s << "    for (int q = 0; q < PER; ++q) {\n" // A row-major: k fastest
      << "      int e = lid + 256 * q, kk = e % BK, mm = e / BK, k = k0 + kk, m = m0 + mm;\n"
      << "      As[kk][mm] = (m < M && k < KD) ? b0.v[abase + m * KD + k] : 0.0;\n"
      << "    }\n"
      << "    for (int q = 0; q < PER; ++q) {\n" // B row-major: n fastest
      << "      int e = lid + 256 * q, nn = e % T, kk = e / T, k = k0 + kk, n = n0 + nn;\n"
      << "      Bs[kk][nn] = (n < N && k < KD) ? b1.v[bbase + k * N + n] : 0.0;\n"
      << "    }\n";
  }
  // The micro-tile unrolled into scalars: arrays indexed in loops may live
  // in memory on some drivers (lavapipe's).
  s << "    barrier();\n"
    << "    [[unroll]] for (int kk = 0; kk < BK; ++kk) {\n";
  for (int i = 0; i < TM; ++i) s << "      float a" << i << " = As[kk][ty + " << 16 * i << "];\n";
  for (int j = 0; j < TM; ++j) s << "      float b" << j << " = Bs[kk][tx + " << 16 * j << "];\n";
  for (int i = 0; i < TM; ++i)
    for (int j = 0; j < TM; ++j)
      s << "      c" << i << j << " = fma(a" << i << ", b" << j << ", c" << i << j << ");\n";
  s << "    }\n"
    << "    barrier();\n"
    << "  }\n";
  for (int i = 0; i < TM; ++i) {
    s << "  {\n"
      << "    int m = m0 + ty + " << 16 * i << ";\n";
    if (conv) s << "    int oimg = m / OHW, opix = m - oimg * OHW;\n";
    for (int j = 0; j < TM; ++j) {
      s << "    if (m < M && n0 + tx + " << 16 * j << " < N) {\n"
        << "      int n = n0 + tx + " << 16 * j << ";\n";
      if (conv)
        s << "      int ch = z * KG + n, oi = (oimg * K + ch) * OHW + opix;\n";
      else
        s << "      int ch = n, oi = (z * M + m) * N + n;\n";
      s << "      float v = c" << i << j << ";\n"
        << epilogueCode(spec) << "      b2.v[oi] = v;\n"
        << "    }\n";
    }
    s << "  }\n";
  }
  s << "}\n";
  return s.str();
}

std::string directMatMul(const GemmShaderSpec &spec) {
  std::ostringstream s;
  header(s, spec, "direct matmul");
  s << "void main() {\n"
    << "  int oi = int(gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x + "
       "gl_GlobalInvocationID.x);\n"
    << "  int M = int(kp.v[0]), N = int(kp.v[1]), KD = int(kp.v[2]);\n"
    << "  int nd = int(kp.v[3]), batches = 1;\n"
    << "  for (int d = 0; d < nd; ++d) batches *= int(kp.v[4 + d]);\n"
    << "  if (oi >= batches * M * N) return;\n"
    << "  int n = oi % N, m = (oi / N) % M, rest = oi / (M * N), ch = n;\n"
    << "  int abase = 0, bbase = 0;\n"
    << "  for (int d = nd - 1; d >= 0; --d) {\n"
    << "    int size = int(kp.v[4 + d]), i = rest % size;\n"
    << "    rest /= size;\n"
    << "    abase += i * int(kp.v[8 + d]);\n"
    << "    bbase += i * int(kp.v[12 + d]);\n"
    << "  }\n"
    << "  int a = abase + m * KD, b = bbase + n;\n"
    << "  float v = 0.0;\n"
    << "  for (int k = 0; k < KD; ++k) v = fma(b0.v[a + k], b1.v[b + k * N], v);\n"
    << epilogueCode(spec) << "  b2.v[oi] = v;\n"
    << "}\n";
  return s.str();
}

std::string directConv(const GemmShaderSpec &spec) {
  std::ostringstream s;
  header(s, spec, "direct conv");
  s << "void main() {\n"
    << "  int oi = int(gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x + "
       "gl_GlobalInvocationID.x);\n"
    << kConvGeometry << "  if (oi >= NI * K * OHW) return;\n"
    << "  int pix = oi % OHW, ch = (oi / OHW) % K, img = oi / (OHW * K);\n"
    << "  int g = ch / KG, oh = pix / OW, ow = pix - oh * OW;\n"
    << "  int ih0 = oh * SH - PH, iw0 = ow * SW - PW;\n"
    << "  int xbase = (img * C + g * CG) * H * W, wbase = ch * CG * RS;\n"
    << "  float v = 0.0;\n"
    << "  for (int c = 0; c < CG; ++c)\n"
    << "    for (int r = 0; r < R; ++r) {\n"
    << "      int ih = ih0 + r * DH;\n"
    << "      if (ih < 0 || ih >= H) continue;\n"
    << "      for (int t = 0; t < S; ++t) {\n"
    << "        int iw = iw0 + t * DW;\n"
    << "        if (iw >= 0 && iw < W)\n"
    << "          v = fma(b0.v[xbase + (c * H + ih) * W + iw], b1.v[wbase + (c * R + r) * S + t], "
       "v);\n"
    << "      }\n"
    << "    }\n"
    << epilogueCode(spec) << "  b2.v[oi] = v;\n"
    << "}\n";
  return s.str();
}

} // namespace

bool GemmShaderSpec::hasData() const {
  for (const Op &op : ops)
    if (perRow(op.kind) || perColumn(op.kind)) return true;
  return false;
}

bool GemmShaderSpec::hasResidual() const {
  for (const Op &op : ops)
    if (op.kind == EpilogueKind::kAddTensor) return true;
  return false;
}

bool gemmShaderTakes(Form form, EpilogueKind kind) {
  if (form == Form::kMatMul || form == Form::kDirectMatMul) return !perRow(kind);
  return !perColumn(kind);
}

Expected<std::string> emitGemmGlsl(const GemmShaderSpec &spec) {
  for (const GemmShaderSpec::Op &op : spec.ops)
    if (!gemmShaderTakes(spec.form, op.kind))
      return makeError("the tuned shaders cannot apply epilogue op ", int(op.kind),
                       " (kernels/epilogue.h) to this form");
  if (spec.form == Form::kDirectConv) return directConv(spec);
  if (spec.form == Form::kDirectMatMul) return directMatMul(spec);
  if (spec.tile != 64 && spec.tile != 32) return makeError("tile ", spec.tile, " is not 32 or 64");
  return tiled(spec);
}

} // namespace kiln::codegen
