// Kernel IR run on a Vulkan device (lavapipe in CI: mesa-vulkan-drivers)
// against the same kernel compiled for this CPU, on the same inputs: every
// opcode on every dtype it takes, every cast, the integer edge cases the
// Kernel IR defines (x / 0, MIN / -1, shifts past the width), NaN and the
// infinities, 16-bit float rounding, and the parallel-loop range mapping.
// Integer results and casts must match bit for bit; f32 math within a few
// ulps (GLSL's exp, log and trigonometry are the driver's).
#include "codegen/vulkan/emit_glsl.h"
#include "codegen/vulkan/spirv.h"
#include "cpu_jit_run.h"
#include "kernel/kernel_ir.h"
#include "runtime/vulkan/device_tensors.h"
#include "runtime/vulkan/vulkan_device.h"
#include "support/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

namespace kiln {
namespace {

using kir::Affine;
using kir::Opcode;

// Holds the Vulkan device for the whole suite (creating one per test is slow
// on lavapipe); skips when the machine has no Vulkan.
class VulkanDeviceTest : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    auto d = vulkan::Device::open();
    if (d.ok())
      device_ = std::move(*d);
    else
      skipReason_ = d.error().message;
  }
  static void TearDownTestSuite() { device_.reset(); }
  void SetUp() override {
    if (!device_) GTEST_SKIP() << "no Vulkan device: " << skipReason_;
  }

  // Runs `k` on the CPU and on the device over `n` parallel iterations
  // (range [begin, n)) with the same buffers, each a byte image; returns
  // the buffers after each run.
  void runBoth(const kir::Kernel &k, std::vector<std::vector<uint8_t>> buffers,
               const std::vector<int64_t> &params, int64_t begin, int64_t n,
               std::vector<std::vector<uint8_t>> &cpu, std::vector<std::vector<uint8_t>> &gpu) {
    cpu = buffers;
    std::vector<void *> ptrs;
    for (auto &b : cpu) ptrs.push_back(b.data());
    Status ran = runOnCpuJit(k, ptrs, params, begin, n);
    ASSERT_TRUE(ran.ok()) << ran.error().message;

    auto glsl = codegen::emitGlsl(k);
    ASSERT_TRUE(glsl.ok()) << glsl.error().message;
    auto spirv = codegen::compileGlslCompute(*glsl);
    ASSERT_TRUE(spirv.ok()) << spirv.error().message;
    auto kernel = device_->createKernel(*spirv, int(buffers.size()));
    ASSERT_TRUE(kernel.ok()) << kernel.error().message;
    std::vector<std::shared_ptr<vulkan::Buffer>> owned;
    for (auto &b : buffers) {
      auto buf = device_->allocate(b.size());
      ASSERT_TRUE(buf.ok()) << buf.error().message;
      std::memcpy((*buf)->data(), b.data(), b.size());
      owned.push_back(std::move(*buf));
    }
    std::vector<int64_t> words = params;
    words.push_back(begin);
    words.push_back(n);
    Status s = device_->dispatch(**kernel, owned, words, n - begin);
    ASSERT_TRUE(s.ok()) << s.error().message;
    gpu.clear();
    for (auto &b : owned) {
      const auto *p = static_cast<const uint8_t *>(b->data());
      gpu.emplace_back(p, p + b->size());
    }
  }

  static std::unique_ptr<vulkan::Device> device_;
  static std::string skipReason_;
};
std::unique_ptr<vulkan::Device> VulkanDeviceTest::device_;
std::string VulkanDeviceTest::skipReason_;

// Values of every kind for a dtype: specials, edges, and random ones.
std::vector<double> sampleValues(DType t, size_t n) {
  std::vector<double> v;
  if (isFloat(t)) {
    v = {0.0,
         -0.0,
         1.0,
         -1.0,
         0.5,
         -0.5,
         1.5,
         2.5,
         -2.5,
         3.0,
         -3.0,
         1e-3,
         65504.0,
         65520.0,
         -70000.0,
         1e-6,
         6e-8,
         1e30,
         -1e30,
         300.0,
         -129.0,
         255.5,
         4294967296.0,
         -2147483904.0,
         std::numeric_limits<double>::infinity(),
         -std::numeric_limits<double>::infinity(),
         std::numeric_limits<double>::quiet_NaN()};
  } else if (t == DType::Bool) {
    v = {0, 1};
  } else {
    const int bits = int(dtypeSize(t) * 8);
    const double lo = isSignedInt(t) ? -std::ldexp(1.0, bits - 1) : 0.0;
    const double hi = isSignedInt(t) ? std::ldexp(1.0, bits - 1) - 1 : std::ldexp(1.0, bits) - 1;
    v = {0, 1, 2, 3, 7, lo, hi, lo + 1, hi - 1};
    if (isSignedInt(t)) v.insert(v.end(), {-1, -2, -7, -3});
  }
  std::mt19937 rng(1234);
  std::normal_distribution<double> normal(0.0, 40.0);
  while (v.size() < n) {
    double x = normal(rng);
    if (!isFloat(t)) x = std::round(x);
    if (isUnsignedInt(t) || t == DType::Bool) x = std::fabs(x);
    if (t == DType::Bool) x = x > 20 ? 1 : 0;
    v.push_back(x);
  }
  v.resize(n);
  return v;
}

// The bytes of `values` stored as `t` (out-of-range integers wrap).
std::vector<uint8_t> encode(DType t, const std::vector<double> &values) {
  std::vector<uint8_t> out(values.size() * dtypeSize(t));
  for (size_t i = 0; i < values.size(); ++i) {
    uint8_t *p = out.data() + i * dtypeSize(t);
    const double x = values[i];
    auto put = [&](auto value) { std::memcpy(p, &value, sizeof value); };
    auto wrap = [&](int bits) {
      const double m = std::ldexp(1.0, bits);
      double r = std::fmod(x, m);
      if (r < 0) r += m;
      return uint64_t(r);
    };
    switch (t) {
    case DType::F32:
      put(float(x));
      break;
    case DType::F64:
      put(x);
      break;
    case DType::F16:
      put(Half(float(x)).bits);
      break;
    case DType::BF16:
      put(BFloat16(float(x)).bits);
      break;
    case DType::Bool:
      put(uint8_t(x != 0));
      break;
    case DType::I8:
    case DType::U8:
      put(uint8_t(wrap(8)));
      break;
    case DType::I16:
    case DType::U16:
      put(uint16_t(wrap(16)));
      break;
    case DType::I32:
    case DType::U32:
      put(uint32_t(wrap(32)));
      break;
    default:
      put(x < 0 ? uint64_t(int64_t(x)) : x >= 1.8446744073709552e19 ? ~uint64_t(0) : uint64_t(x));
      break;
    }
  }
  return out;
}

double decode(DType t, const uint8_t *p) {
  auto get = [&](auto value) {
    std::memcpy(&value, p, sizeof value);
    return value;
  };
  switch (t) {
  case DType::F32:
    return get(float(0));
  case DType::F64:
    return get(double(0));
  case DType::F16: {
    Half h;
    h.bits = get(uint16_t(0));
    return float(h);
  }
  case DType::BF16: {
    BFloat16 h;
    h.bits = get(uint16_t(0));
    return float(h);
  }
  case DType::Bool:
    return get(uint8_t(0)) != 0;
  case DType::I8:
    return get(int8_t(0));
  case DType::U8:
    return get(uint8_t(0));
  case DType::I16:
    return get(int16_t(0));
  case DType::U16:
    return get(uint16_t(0));
  case DType::I32:
    return get(int32_t(0));
  case DType::U32:
    return get(uint32_t(0));
  case DType::I64:
    return double(get(int64_t(0)));
  default:
    return double(get(uint64_t(0)));
  }
}

// y[i] = f(inputs[..][i]) over a parallel loop of n; `body` emits f.
template <class Body>
kir::Kernel elementwise(const std::string &name, const std::vector<DType> &ins, DType out,
                        Body body) {
  kir::KernelBuilder b(name);
  std::vector<int> bufs;
  for (size_t i = 0; i < ins.size(); ++i)
    bufs.push_back(b.addBuffer("x" + std::to_string(i), ins[i], false));
  const int y = b.addBuffer("y", out, true);
  const int n = b.addParam("n");
  const int i = b.beginLoop(Affine::param(n), {kir::Schedule::Kind::Parallel, 1});
  Affine at;
  at.add(1, -1, i);
  std::vector<int> loaded;
  for (int buf : bufs) loaded.push_back(b.load(buf, at));
  b.store(y, at, body(b, loaded));
  b.endLoop();
  return b.finish();
}

// Bits equal, or both NaN, or (tolerance > 0) relatively close.
void expectSame(DType t, const std::vector<uint8_t> &cpu, const std::vector<uint8_t> &gpu,
                const std::string &what, double tolerance = 0,
                const std::vector<std::vector<double>> *inputs = nullptr) {
  ASSERT_EQ(cpu.size(), gpu.size());
  int reported = 0;
  for (size_t i = 0; i * dtypeSize(t) < cpu.size() && reported < 5; ++i) {
    const uint8_t *c = cpu.data() + i * dtypeSize(t), *g = gpu.data() + i * dtypeSize(t);
    if (std::memcmp(c, g, dtypeSize(t)) == 0) continue;
    const double a = decode(t, c), b = decode(t, g);
    if (std::isnan(a) && std::isnan(b)) continue;
    if (tolerance > 0 && std::fabs(a - b) <= tolerance * std::max(1.0, std::fabs(a))) continue;
    if (a == 0 && b == 0) continue; // +0 / -0
    std::string in;
    if (inputs)
      for (const auto &x : *inputs) in += (in.empty() ? "" : ", ") + std::to_string(x[i]);
    ADD_FAILURE() << what << " element " << i << " (" << in << "): cpu " << a << ", vulkan " << b;
    ++reported;
  }
}

TEST_F(VulkanDeviceTest, FloatMathMatchesTheCpu) {
  const size_t n = 300;
  struct Case {
    Opcode op;
    double tolerance;
    bool smallInputs;
  };
  const Case unary[] = {
      {Opcode::Neg, 0, false},      {Opcode::Abs, 0, false},      {Opcode::Floor, 0, false},
      {Opcode::Ceil, 0, false},     {Opcode::Round, 0, false},    {Opcode::Sqrt, 1e-6, false},
      {Opcode::Recip, 1e-6, false}, {Opcode::Rsqrt, 1e-6, false}, {Opcode::Exp, 2e-6, true},
      {Opcode::Log, 2e-6, false},   {Opcode::Tanh, 2e-6, false},  {Opcode::Sigmoid, 2e-6, false},
      {Opcode::Erf, 2e-6, false},   {Opcode::Sin, 1e-5, true},    {Opcode::Cos, 1e-5, true},
      {Opcode::Atan, 1e-5, false},  {Opcode::Asinh, 1e-5, true}};
  std::vector<double> x = sampleValues(DType::F32, n);
  std::vector<double> small = x;
  for (double &v : small) v = std::isfinite(v) ? std::fmod(v, 20.0) : v;
  for (const Case &c : unary)
    for (DType t : {DType::F32, DType::F16, DType::F64}) {
      const auto &in = c.smallInputs ? small : x;
      auto k = elementwise(
          std::string("u_") + kir::opcodeName(c.op), {t}, t,
          [&](kir::KernelBuilder &b, const std::vector<int> &v) { return b.unary(c.op, t, v[0]); });
      std::vector<std::vector<uint8_t>> cpu, gpu;
      runBoth(k, {encode(t, in), std::vector<uint8_t>(n * dtypeSize(t))}, {int64_t(n)}, 0, n, cpu,
              gpu);
      const std::vector<std::vector<double>> inputs{in};
      // f16 results may differ by one rounding step where f32 math differs;
      // f64 exp, log and trigonometry are computed in f32 (emit_glsl.h).
      double tolerance = c.tolerance;
      if (t == DType::F16 && tolerance > 0) tolerance = 1e-3;
      if (t == DType::F64 && tolerance > 0) tolerance = std::max(tolerance, 1e-6);
      expectSame(t, cpu[1], gpu[1],
                 std::string(kir::opcodeName(c.op)) + " " + std::string(dtypeName(t)), tolerance,
                 &inputs);
    }
}

TEST_F(VulkanDeviceTest, FloatBinaryOpsMatchTheCpu) {
  const size_t n = 400;
  std::vector<double> a = sampleValues(DType::F32, n), b = sampleValues(DType::F32, n);
  std::shuffle(b.begin(), b.end(), std::mt19937(7));
  for (size_t i = 0; i < 40; ++i) b[i] = double(int(i % 7) - 3); // integral exponents
  for (Opcode op : {Opcode::Add, Opcode::Sub, Opcode::Mul, Opcode::Div, Opcode::Max, Opcode::Min,
                    Opcode::Pow, Opcode::Mod})
    for (DType t : {DType::F32, DType::F64, DType::BF16}) {
      auto k = elementwise(std::string("b_") + kir::opcodeName(op), {t, t}, t,
                           [&](kir::KernelBuilder &kb, const std::vector<int> &v) {
                             return kb.binary(op, t, v[0], v[1]);
                           });
      std::vector<std::vector<uint8_t>> cpu, gpu;
      runBoth(k, {encode(t, a), encode(t, b), std::vector<uint8_t>(n * dtypeSize(t))}, {int64_t(n)},
              0, n, cpu, gpu);
      const double tolerance = op == Opcode::Pow ? 1e-5 : op == Opcode::Mod ? 1e-4 : 0;
      const std::vector<std::vector<double>> inputs{a, b};
      expectSame(t, cpu[2], gpu[2],
                 std::string(kir::opcodeName(op)) + " " + std::string(dtypeName(t)),
                 t == DType::BF16 && tolerance > 0 ? 1e-2 : tolerance, &inputs);
    }
}

TEST_F(VulkanDeviceTest, IntegerOpsMatchTheCpuBitForBit) {
  const size_t n = 256;
  for (DType t :
       {DType::I8, DType::U8, DType::I16, DType::I32, DType::U32, DType::I64, DType::U64}) {
    std::vector<double> a = sampleValues(t, n), b = sampleValues(t, n);
    std::reverse(b.begin(), b.end());
    for (size_t i = 0; i < 16; ++i)
      b[i] = double(i % 4 == 0 ? 0 : i); // x / 0, shifts past the width
    for (Opcode op :
         {Opcode::Add, Opcode::Sub, Opcode::Mul, Opcode::Div, Opcode::Mod, Opcode::Max, Opcode::Min,
          Opcode::And, Opcode::Or, Opcode::Xor, Opcode::Shl, Opcode::Shr}) {
      auto k = elementwise(std::string("i_") + kir::opcodeName(op), {t, t}, t,
                           [&](kir::KernelBuilder &kb, const std::vector<int> &v) {
                             return kb.binary(op, t, v[0], v[1]);
                           });
      std::vector<std::vector<uint8_t>> cpu, gpu;
      runBoth(k, {encode(t, a), encode(t, b), std::vector<uint8_t>(n * dtypeSize(t))}, {int64_t(n)},
              0, n, cpu, gpu);
      const std::vector<std::vector<double>> inputs{a, b};
      expectSame(t, cpu[2], gpu[2],
                 std::string(kir::opcodeName(op)) + " " + std::string(dtypeName(t)), 0, &inputs);
    }
  }
}

TEST_F(VulkanDeviceTest, EveryCastMatchesTheCpuBitForBit) {
  const size_t n = 200;
  const DType types[] = {DType::F32, DType::F64, DType::F16, DType::BF16, DType::Bool,
                         DType::I8,  DType::U8,  DType::I16, DType::U16,  DType::I32,
                         DType::U32, DType::I64, DType::U64};
  for (DType from : types)
    for (DType to : types) {
      if (from == to) continue;
      std::vector<double> x = sampleValues(from, n);
      auto k =
          elementwise("cast", {from}, to, [&](kir::KernelBuilder &b, const std::vector<int> &v) {
            return b.cast(to, from, v[0]);
          });
      std::vector<std::vector<uint8_t>> cpu, gpu;
      runBoth(k, {encode(from, x), std::vector<uint8_t>(n * dtypeSize(to))}, {int64_t(n)}, 0, n,
              cpu, gpu);
      const std::vector<std::vector<double>> inputs{x};
      expectSame(to, cpu[1], gpu[1],
                 "cast " + std::string(dtypeName(from)) + " -> " + std::string(dtypeName(to)), 0,
                 &inputs);
    }
}

// Rows reduced with a variable in a serial loop, over part of the parallel
// range ([begin, rows): rows before begin stay untouched), and a kernel with
// no parallel loop at all.
TEST_F(VulkanDeviceTest, ReductionsAndParallelRangesMatchTheCpu) {
  const int64_t rows = 37, cols = 129, begin = 5;
  kir::KernelBuilder b("row_sum_max");
  const int x = b.addBuffer("x", DType::F32, false);
  const int y = b.addBuffer("y", DType::F32, true);
  const int r = b.addParam("rows"), c = b.addParam("cols");
  const int acc = b.addVar("acc", DType::F32);
  const int i = b.beginLoop(Affine::param(r), {kir::Schedule::Kind::Parallel, 1});
  b.varWrite(acc, b.constant(DType::F32, 0.0));
  const int j = b.beginLoop(Affine::param(c));
  Affine at;
  at.add(1, c, i).add(1, -1, j);
  const int v = b.load(x, at);
  b.varWrite(acc, b.binary(Opcode::Add, DType::F32, b.varRead(acc),
                           b.binary(Opcode::Max, DType::F32, v, b.constant(DType::F32, 0.0))));
  b.endLoop();
  Affine row;
  row.add(1, -1, i);
  b.store(y, row, b.varRead(acc));
  b.endLoop();
  const kir::Kernel k = b.finish();
  std::vector<double> in = sampleValues(DType::F32, size_t(rows * cols));
  for (double &d : in) d = std::isfinite(d) ? std::fmod(d, 100.0) : 1.0;
  std::vector<std::vector<uint8_t>> cpu, gpu;
  runBoth(k, {encode(DType::F32, in), encode(DType::F32, std::vector<double>(size_t(rows), -7.0))},
          {rows, cols}, begin, rows, cpu, gpu);
  expectSame(DType::F32, cpu[1], gpu[1], "row sums", 1e-5);
  EXPECT_EQ(decode(DType::F32, gpu[1].data()), -7.0) << "row 0 is before begin";

  kir::KernelBuilder s("serial_prefix");
  const int sx = s.addBuffer("x", DType::I64, false);
  const int sy = s.addBuffer("y", DType::I64, true);
  const int sn = s.addParam("n");
  const int sum = s.addVar("sum", DType::I64);
  s.varWrite(sum, s.intConstant(DType::I64, 0));
  const int si = s.beginLoop(Affine::param(sn));
  Affine e;
  e.add(1, -1, si);
  s.varWrite(sum, s.binary(Opcode::Add, DType::I64, s.varRead(sum), s.load(sx, e)));
  s.store(sy, e, s.varRead(sum));
  s.endLoop();
  const kir::Kernel serial = s.finish();
  std::vector<double> ints = sampleValues(DType::I32, 100);
  runBoth(serial, {encode(DType::I64, ints), std::vector<uint8_t>(800)}, {100}, 0, 1, cpu, gpu);
  expectSame(DType::I64, cpu[1], gpu[1], "prefix sums");
}

TEST(VulkanDevice, ASelectorNamingNoDeviceIsAClearError) {
  auto d = vulkan::Device::open("no-such-device-anywhere");
  ASSERT_FALSE(d.ok());
  const std::string m = d.error().message;
  EXPECT_TRUE(m.find("no Vulkan device matches 'no-such-device-anywhere'") != std::string::npos ||
              m.find("no Vulkan loader") != std::string::npos ||
              m.find("reports no device") != std::string::npos)
      << m;
}

// A buffer that goes is reused by the next allocation of its size class
// (quarter powers of two), mapping and all; a larger request gets another.
// Sizes far from the other tests' (whose spares share the pool).
TEST_F(VulkanDeviceTest, FreedBuffersAreReusedBySizeClass) {
  void *first = nullptr;
  {
    auto b = device_->allocate(37000000);
    ASSERT_TRUE(b.ok()) << b.error().message;
    first = (*b)->data();
  }
  auto same = device_->allocate(36000000); // both round up to 5 * 2^23
  ASSERT_TRUE(same.ok()) << same.error().message;
  EXPECT_EQ((*same)->data(), first);
  EXPECT_EQ((*same)->size(), 36000000u);
  auto bigger = device_->allocate(100000000);
  ASSERT_TRUE(bigger.ok()) << bigger.error().message;
  EXPECT_NE((*bigger)->data(), first);
}

// What the host must wait for before reading: tensors allocated (for a
// dispatch to write) since the device last ran, views into them included;
// never uploads or host memory.
TEST_F(VulkanDeviceTest, TensorsAllocatedSinceTheLastRunArePendingWrites) {
  vulkan::DeviceTensors tensors(*device_);
  auto out = tensors.allocate(DType::F32, {4, 8});
  ASSERT_TRUE(out.ok()) << out.error().message;
  Tensor host(DType::F32, {4, 8});
  for (int64_t i = 0; i < host.numel(); ++i) host.data<float>()[i] = float(i);
  auto up = tensors.upload(host);
  ASSERT_TRUE(up.ok()) << up.error().message;
  const Tensor inner =
      Tensor::view(DType::F32, {8}, nullptr, static_cast<const float *>(out->raw()) + 8);
  EXPECT_TRUE(tensors.pendingWrite(*out));
  EXPECT_TRUE(tensors.pendingWrite(out->reshaped({32})));
  EXPECT_TRUE(tensors.pendingWrite(inner));
  EXPECT_FALSE(tensors.pendingWrite(*up));
  EXPECT_FALSE(tensors.pendingWrite(host));
  EXPECT_EQ(static_cast<const float *>(up->raw())[31], 31.0f);
  tensors.markRun();
  EXPECT_FALSE(tensors.pendingWrite(*out));
  EXPECT_FALSE(tensors.pendingWrite(inner));
}

} // namespace
} // namespace kiln
