#include "backend/vulkan/tuned_steps.h"

#include "codegen/vulkan/spirv.h"
#include "runtime/cpu/conv_step.h"
#include "runtime/cpu/matmul_step.h"
#include "runtime/cpu/steps.h"

#include <algorithm>
#include <fstream>

namespace kiln::vulkan {

using codegen::GemmShaderSpec;
using Form = GemmShaderSpec::Form;

namespace {

constexpr int kThreads = 256; // the tuned shaders' workgroup (gemm_shader.h)
// Output channels per group below which a conv runs direct: a GEMM tile of
// 32 or 64 columns would idle most of its invocations (depthwise: all but one).
constexpr int64_t kDirectBelowChannels = 16;
constexpr int64_t kMaxIndex = int64_t(1) << 31; // the shaders index in 32 bits

const cpu::EpiloguePlan &planOf(const cpu::Step &step) {
  return step.kind() == cpu::StepKind::Conv ? static_cast<const cpu::ConvStep &>(step).epilogue()
                                            : static_cast<const cpu::MatMulStep &>(step).epilogue();
}

bool fitsIndex(const Tensor &t) {
  return t.numel() < kMaxIndex;
}

} // namespace

bool takesTunedShader(const cpu::Step &step) {
  if (step.kind() != cpu::StepKind::Conv && step.kind() != cpu::StepKind::MatMul) return false;
  const Form form = step.kind() == cpu::StepKind::Conv ? Form::kConv : Form::kMatMul;
  const kernels::Epilogue &ep = planOf(step).epilogue;
  for (int i = 0; i < ep.count; ++i)
    if (!codegen::gemmShaderTakes(form, ep.ops[i].kind)) return false;
  return true;
}

Expected<const Kernel *> ShaderCache::get(const std::string &glsl, int buffers,
                                          const std::string &name, const std::string &dumpDir) {
  auto it = kernels_.find(glsl);
  if (it == kernels_.end()) {
    if (!dumpDir.empty()) std::ofstream(dumpDir + "/" + name + ".comp") << glsl;
    KILN_ASSIGN_OR_RETURN(std::vector<uint32_t> spirv, codegen::compileGlslCompute(glsl));
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> k,
                          device_.createKernel(spirv, buffers, kThreads));
    it = kernels_.emplace(glsl, std::move(k)).first;
  }
  return it->second.get();
}

Expected<std::unique_ptr<TunedStep>> TunedStep::create(Device &device, DeviceTensors &tensors,
                                                       ShaderCache &shaders, const cpu::Step &step,
                                                       const std::string &dumpDir) {
  if (!takesTunedShader(step)) return makeError(step.describe(), ": no tuned shader takes it");
  std::unique_ptr<TunedStep> t(new TunedStep(device, tensors));
  t->step_ = &step;
  t->label_ = step.describe();
  t->conv_ = step.kind() == cpu::StepKind::Conv;
  const cpu::EpiloguePlan &plan = planOf(step);
  // The epilogue's per-channel arrays, concatenated; a conv's bias first
  // (the CPU kernels add it before the plan's ops).
  std::vector<float> data;
  auto addOp = [&](kernels::EpilogueKind kind, float a, float b, const float *values,
                   int64_t count) {
    t->spec_.ops.push_back({kind, a, b});
    t->dataOffsets_.push_back(int64_t(data.size()));
    if (values) data.insert(data.end(), values, values + count);
  };
  const Tensor *weights = nullptr;
  if (t->conv_) {
    const auto &c = static_cast<const cpu::ConvStep &>(step);
    weights = &c.weights();
    if (c.bias().defined())
      addOp(kernels::EpilogueKind::kAddRowBias, 0, 0, c.bias().data<float>(), c.bias().numel());
    const int64_t perGroup = c.shape().K / c.shape().groups;
    t->spec_.form = perGroup < kDirectBelowChannels ? Form::kDirectConv : Form::kConv;
  } else {
    const auto &m = static_cast<const cpu::MatMulStep &>(step);
    if (m.weights().defined()) weights = &m.weights();
    t->spec_.form = Form::kMatMul;
  }
  for (int i = 0; i < plan.epilogue.count; ++i) {
    const kernels::EpilogueOp &op = plan.epilogue.ops[i];
    const bool perChannel = op.kind != kernels::EpilogueKind::kAddTensor && op.data;
    addOp(op.kind, op.a, op.b, perChannel ? op.data : nullptr, perChannel ? plan.channels : 0);
  }
  if (plan.residualOp >= 0) {
    const auto &slots = t->conv_ ? static_cast<const cpu::ConvStep &>(step).inputSlots()
                                 : static_cast<const cpu::MatMulStep &>(step).inputSlots();
    t->residualSlot_ = slots[size_t(plan.residualInput)];
  }
  if (weights) {
    if (!fitsIndex(*weights)) return makeError(t->label_, ": weights too large for the shaders");
    KILN_ASSIGN_OR_RETURN(t->weights_, tensors.constant(*weights));
  }
  if (!data.empty()) {
    Tensor host(DType::F32, {int64_t(data.size())});
    std::copy(data.begin(), data.end(), host.data<float>());
    KILN_ASSIGN_OR_RETURN(t->data_, tensors.upload(host));
  }
  const std::string base = strCat("tuned_", t->conv_ ? "conv" : "matmul");
  auto shader = [&](Form form, int tile) -> Expected<const Kernel *> {
    GemmShaderSpec spec = t->spec_;
    spec.form = form;
    spec.tile = tile;
    KILN_ASSIGN_OR_RETURN(std::string glsl, codegen::emitGemmGlsl(spec));
    auto k = shaders.get(glsl, spec.buffers(), strCat(base, "_", tile), dumpDir);
    if (!k.ok()) return makeError(t->label_, ": ", k.error().message);
    return k;
  };
  if (t->spec_.form == Form::kDirectConv) {
    KILN_ASSIGN_OR_RETURN(t->direct_, shader(Form::kDirectConv, 0));
  } else {
    KILN_ASSIGN_OR_RETURN(t->tile64_, shader(t->spec_.form, 64));
    KILN_ASSIGN_OR_RETURN(t->tile32_, shader(t->spec_.form, 32));
    if (!t->conv_) {
      KILN_ASSIGN_OR_RETURN(t->direct_, shader(Form::kDirectMatMul, 0));
    }
  }
  return t;
}

Expected<std::shared_ptr<Buffer>> TunedStep::onDevice(const Tensor &t) const {
  if (std::shared_ptr<Buffer> b = tensors_.find(t)) return b;
  // Not the start of a device buffer: copied by the host, so never from
  // one a recorded dispatch has yet to write (a kiln bug, refused).
  if (tensors_.pendingWrite(t))
    return makeError(label_, ": an input is a view into a tensor not yet computed");
  KILN_ASSIGN_OR_RETURN(Tensor d, tensors_.upload(t));
  return tensors_.find(d); // the dispatch's batch holds it from here
}

// A driver that ends loops past a budget (driver_limits.h) would cut a
// direct form's sum short, silently: refused.
Status TunedStep::withinLoopBudget(int64_t iterations) const {
  const int64_t budget = device_.info().limits.loopIterations;
  if (budget > 0 && iterations > budget)
    return makeError(label_, ": its shader runs ", iterations,
                     " loop iterations per invocation; the device's driver (", device_.info().name,
                     ") ends loops after ", budget, ", which would cut its result short");
  return Status::success();
}

// The fused residual's tensor (null when the epilogue has none); sets
// `whyNot` when it is not an f32 tensor of the output's shape.
const Tensor *TunedStep::residualFor(const cpu::Frame &frame, const Shape64 &outShape,
                                     std::string &whyNot) const {
  if (residualSlot_ < 0) return nullptr;
  const RtValue &r = frame.slots[size_t(residualSlot_)];
  if (!r.isTensor() || r.tensor.dtype() != DType::F32 || r.tensor.shape() != outShape)
    whyNot = "residual " + r.describe() + " is not f32" + shapeToString(outShape);
  return &r.tensor;
}

Status TunedStep::run(cpu::Frame &frame, std::string &whyNot) const {
  whyNot.clear();
  return conv_ ? runConv(frame, whyNot) : runMatMul(frame, whyNot);
}

// Binds the epilogue's buffers after the operands and output, adds the
// data offsets to the params, and records the dispatch: over `groups`
// (tiled), or `invocations` (direct).
Status TunedStep::launch(const Kernel &kernel, std::vector<std::shared_ptr<Buffer>> buffers,
                         const Tensor *residual, std::vector<int64_t> words,
                         const uint32_t groups[3], int64_t invocations) const {
  if (spec_.hasData()) buffers.push_back(tensors_.find(data_));
  if (spec_.hasResidual()) {
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> r, onDevice(*residual));
    buffers.push_back(std::move(r));
  }
  words.resize(codegen::kGemmDataOffsets, 0);
  words.insert(words.end(), dataOffsets_.begin(), dataOffsets_.end());
  Status s = groups ? device_.recordGroups(kernel, buffers, words, groups, label_)
                    : device_.record(kernel, buffers, words, invocations, label_);
  if (!s.ok()) return makeError(label_, ": ", s.error().message);
  return Status::success();
}

Status TunedStep::runConv(cpu::Frame &frame, std::string &whyNot) const {
  const auto &step = static_cast<const cpu::ConvStep &>(*step_);
  const RtValue &xv = frame.slots[size_t(step.inputSlots()[0])];
  const int64_t rank = step.oneD() ? 3 : 4;
  if (!xv.isTensor() || xv.tensor.dtype() != DType::F32 || xv.tensor.rank() != rank ||
      xv.tensor.dim(1) != step.shape().C) {
    whyNot = "input " + xv.describe() + " is not the conv's";
    return Status::success();
  }
  const Tensor &x = xv.tensor;
  kernels::ConvShape s = step.shape();
  s.N = x.dim(0);
  s.H = step.oneD() ? 1 : x.dim(2);
  s.W = x.dim(rank - 1);
  const int64_t OH = s.outH(), OW = s.outW();
  if (s.N > 0 && !s.valid()) {
    whyNot = "input " + shapeToString(x.shape()) + " is too small for the kernel";
    return Status::success();
  }
  const Shape64 outShape = step.oneD() ? Shape64{s.N, s.K, OW} : Shape64{s.N, s.K, OH, OW};
  const Tensor *residual = residualFor(frame, outShape, whyNot);
  if (!whyNot.empty()) return Status::success();
  KILN_ASSIGN_OR_RETURN(Tensor y, tensors_.allocate(DType::F32, outShape));
  if (!fitsIndex(x) || !fitsIndex(y))
    return makeError(label_, ": tensors of 2^31 elements or more are past the shaders' indices");
  if (y.numel() > 0) {
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> xb, onDevice(x));
    const std::vector<int64_t> words = {
        s.N, s.C,       s.H,       s.W,      s.K,       OH,          OW,          s.R,
        s.S, s.strideH, s.strideW, s.padTop, s.padLeft, s.dilationH, s.dilationW, s.groups};
    std::vector<std::shared_ptr<Buffer>> buffers = {xb, tensors_.find(weights_), tensors_.find(y)};
    if (spec_.form == Form::kDirectConv) {
      const int64_t cg = s.C / s.groups; // the shader's loops: channels, rows, columns
      KILN_RETURN_IF_ERROR(withinLoopBudget(cg + cg * s.R + cg * s.R * s.S));
      KILN_RETURN_IF_ERROR(launch(*direct_, buffers, residual, words, nullptr, y.numel()));
    } else {
      const int64_t M = s.N * OH * OW, N = s.K / s.groups;
      const int64_t tiles64 = ((M + 63) / 64) * ((N + 63) / 64) * s.groups;
      const int T = tiles64 >= device_.info().tuning.bigTilesFrom ? 64 : 32;
      const uint32_t groups[3] = {uint32_t((M + T - 1) / T), uint32_t((N + T - 1) / T),
                                  uint32_t(s.groups)};
      KILN_RETURN_IF_ERROR(
          launch(T == 64 ? *tile64_ : *tile32_, buffers, residual, words, groups, 0));
    }
  }
  frame.slots[size_t(step.outputSlot())] = RtValue(std::move(y));
  return Status::success();
}

Status TunedStep::runMatMul(cpu::Frame &frame, std::string &whyNot) const {
  const auto &step = static_cast<const cpu::MatMulStep &>(*step_);
  const std::vector<int> &in = step.inputSlots();
  const RtValue &av = frame.slots[size_t(in[0])];
  if (!av.isTensor() || av.tensor.dtype() != DType::F32 || av.tensor.rank() == 0) {
    whyNot = "left operand " + av.describe() + " is not an f32 tensor";
    return Status::success();
  }
  Tensor a = av.tensor, b;
  if (weights_.defined()) {
    b = weights_;
  } else {
    const RtValue &bv = frame.slots[size_t(in[1])];
    if (!bv.isTensor() || bv.tensor.dtype() != DType::F32 || bv.tensor.rank() == 0) {
      whyNot = "right operand " + bv.describe() + " is not an f32 tensor";
      return Status::success();
    }
    b = bv.tensor;
  }
  // ONNX MatMul: 1-D operands get a unit dim that the output drops. A
  // constant right side folds the left side's leading dims into M.
  const bool aVec = a.rank() == 1, bVec = b.rank() == 1;
  Shape64 as = a.shape(), bs = b.shape();
  if (aVec) as.insert(as.begin(), 1);
  if (bVec) bs.push_back(1);
  if (weights_.defined() && as.size() > 2) {
    const int64_t K = as.back();
    as = {numelOf(Shape64(as.begin(), as.end() - 1)), K};
  }
  const int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  if (bs[bs.size() - 2] != K) {
    whyNot = "shapes " + shapeToString(a.shape()) + " and " + shapeToString(b.shape()) +
             " do not multiply";
    return Status::success();
  }
  const Shape64 batchA(as.begin(), as.end() - 2), batchB(bs.begin(), bs.end() - 2);
  auto batch = cpu::broadcastShapes({batchA, batchB});
  if (!batch.ok()) {
    whyNot = "batch dims: " + batch.error().message;
    return Status::success();
  }
  // The output's batch dims with each operand's element stride (0 where it
  // broadcasts), adjacent dims merged where both strides allow.
  struct Dim {
    int64_t size, a, b;
  };
  std::vector<Dim> dims;
  int64_t strideA = M * K, strideB = K * N;
  for (size_t d = batch->size(); d-- > 0;) {
    const size_t fromEnd = batch->size() - d;
    const int64_t da = fromEnd <= batchA.size() ? batchA[batchA.size() - fromEnd] : 1;
    const int64_t db = fromEnd <= batchB.size() ? batchB[batchB.size() - fromEnd] : 1;
    Dim dim{(*batch)[d], da == 1 ? 0 : strideA, db == 1 ? 0 : strideB};
    strideA *= da;
    strideB *= db;
    if (dim.size == 1) continue;
    if (!dims.empty()) { // dims is innermost first: merge into the one inside
      Dim &inner = dims.back();
      if (dim.a == inner.a * inner.size && dim.b == inner.b * inner.size) {
        inner.size *= dim.size;
        continue;
      }
    }
    dims.push_back(dim);
  }
  if (dims.size() > size_t(codegen::kMatMulBatchDims)) {
    whyNot = "more than 4 batch dims that broadcast differently";
    return Status::success();
  }
  Shape64 outShape = *batch;
  if (!aVec) outShape.push_back(M);
  if (!bVec) outShape.push_back(N);
  if (weights_.defined()) { // the left side's own leading dims
    outShape = a.shape();
    if (a.rank() == 1)
      outShape = {N};
    else
      outShape.back() = N;
  }
  const Tensor *residual = residualFor(frame, outShape, whyNot);
  if (!whyNot.empty()) return Status::success();
  KILN_ASSIGN_OR_RETURN(Tensor y, tensors_.allocate(DType::F32, outShape));
  if (!fitsIndex(a) || !fitsIndex(b) || !fitsIndex(y))
    return makeError(label_, ": tensors of 2^31 elements or more are past the shaders' indices");
  const int64_t batches = numelOf(*batch);
  if (y.numel() > 0) {
    if (batches > int64_t(device_.maxGroups(2)))
      return makeError(label_, ": ", batches,
                       " matrices in one MatMul are more than the device "
                       "launches at once");
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> ab, onDevice(a));
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> bb, onDevice(b));
    // Words: M, N, K, then the batch dims outermost first (the shader
    // walks them from the last).
    std::vector<int64_t> words(size_t(codegen::kGemmDataOffsets), 0);
    words[0] = M;
    words[1] = N;
    words[2] = K;
    words[3] = int64_t(dims.size());
    for (size_t i = 0; i < dims.size(); ++i) {
      const Dim &d = dims[dims.size() - 1 - i];
      words[4 + i] = d.size;
      words[8 + i] = d.a;
      words[12 + i] = d.b;
    }
    if (M < device_.info().tuning.directMatMulBelowRows) {
      KILN_RETURN_IF_ERROR(withinLoopBudget(K));
      KILN_RETURN_IF_ERROR(
          launch(*direct_, {ab, bb, tensors_.find(y)}, residual, words, nullptr, y.numel()));
    } else {
      const int64_t tiles64 = ((M + 63) / 64) * ((N + 63) / 64) * batches;
      const int T = tiles64 >= device_.info().tuning.bigTilesFrom ? 64 : 32;
      const uint32_t groups[3] = {uint32_t((M + T - 1) / T), uint32_t((N + T - 1) / T),
                                  uint32_t(batches)};
      KILN_RETURN_IF_ERROR(launch(T == 64 ? *tile64_ : *tile32_, {ab, bb, tensors_.find(y)},
                                  residual, words, groups, 0));
    }
  }
  frame.slots[size_t(step.outputSlot())] = RtValue(std::move(y));
  return Status::success();
}

} // namespace kiln::vulkan
