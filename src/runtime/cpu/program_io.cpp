#include "runtime/cpu/program_io.h"

#include "runtime/cpu/attention_step.h"
#include "runtime/cpu/conv_step.h"
#include "runtime/cpu/conv_transpose_step.h"
#include "runtime/cpu/copy_steps.h"
#include "runtime/cpu/dispatch_step.h"
#include "runtime/cpu/host_op_step.h"
#include "runtime/cpu/int_conv_step.h"
#include "runtime/cpu/int_matmul_step.h"
#include "runtime/cpu/loop_steps.h"
#include "runtime/cpu/lstm_step.h"
#include "runtime/cpu/matmul_step.h"
#include "runtime/cpu/pool_step.h"
#include "runtime/cpu/steps.h"

#include <algorithm>
#include <cstring>

namespace kiln::cpu {

namespace {

constexpr size_t kWeightAlignment = 64;
constexpr int kMaxDepth = 64; // nested If branches and loop bodies

// ---- saving -----------------------------------------------------------------

void saveProgramBody(const Program &p, Saver &s);

template <class T> void saveStep(const Step &step, Saver &s) {
  const_cast<T &>(static_cast<const T &>(step)).io(s);
}

void saveStepBody(const Step &step, Saver &s);

// A loop step's fields, then its body program.
template <class T> void saveBodyStep(const Step &step, Saver &s) {
  saveStep<T>(step, s);
  saveProgramBody(*static_cast<const T &>(step).body(), s);
}

// A value: its kind, then a tensor (by table index), a sequence (count,
// tensors) or an optional (present flag, value).
void saveValue(const RtValue &v, Saver &s) {
  s(v.kind);
  switch (v.kind) {
  case RtValue::Kind::Tensor: return s(v.tensor);
  case RtValue::Kind::Sequence: return s(v.sequence);
  case RtValue::Kind::Optional:
    s(v.inner != nullptr);
    if (v.inner) saveValue(*v.inner, s);
    return;
  }
}

// A step, then its general variant (program.h) when it has one that can be
// stored.
void saveStepOf(const Step &step, Saver &s) {
  saveStepBody(step, s);
  s(step.perturbOutputs);
  const Step *general = step.generalVariant.get();
  s(general != nullptr);
  if (general) saveStepOf(*general, s);
}

void saveStepBody(const Step &step, Saver &s) {
  s(step.kind());
  switch (step.kind()) {
  case StepKind::Elementwise: return saveStep<ElementwiseStep>(step, s);
  case StepKind::Reduction: return saveStep<ReductionStep>(step, s);
  case StepKind::If: {
    const auto &ifStep = static_cast<const IfStep &>(step);
    saveStep<IfStep>(step, s);
    saveProgramBody(*ifStep.then_, s);
    saveProgramBody(*ifStep.else_, s);
    return;
  }
  case StepKind::Conv: return saveStep<ConvStep>(step, s);
  case StepKind::MatMul: return saveStep<MatMulStep>(step, s);
  case StepKind::IntMatMul: return saveStep<IntMatMulStep>(step, s);
  case StepKind::IntConv: return saveStep<IntConvStep>(step, s);
  case StepKind::Attention: return saveStep<AttentionStep>(step, s);
  case StepKind::Pool: return saveStep<PoolStep>(step, s);
  case StepKind::ConvTranspose: return saveStep<ConvTransposeStep>(step, s);
  case StepKind::Lstm: return saveStep<LstmStep>(step, s);
  case StepKind::Slice:
  case StepKind::Concat:
  case StepKind::Split:
  case StepKind::Transpose:
  case StepKind::ResizeNearest: return saveStep<CopyStep>(step, s);
  case StepKind::HostOp: return saveStep<HostOpStep>(step, s);
  case StepKind::Dispatch: return saveStep<DispatchStep>(step, s);
  case StepKind::Loop: return saveBodyStep<LoopStep>(step, s);
  case StepKind::Scan: return saveBodyStep<ScanStep>(step, s);
  case StepKind::SequenceMap: return saveBodyStep<SequenceMapStep>(step, s);
  }
  s.fail(step.describe() + ": unknown step kind");
}

void saveProgramBody(const Program &p, Saver &s) {
  s(p.numSlots, p.inputSlots, p.outputSlots, p.captures);
  s.writer().writeCount(p.constants.size());
  for (const auto &[slot, value] : p.constants) {
    s(slot);
    saveValue(value, s);
  }
  s.writer().writeCount(p.steps.size());
  for (const auto &step : p.steps) saveStepOf(*step, s);
}

// ---- loading ----------------------------------------------------------------

Expected<std::unique_ptr<Program>> loadProgramBody(Loader &l, int depth);

template <class T> std::unique_ptr<T> loadPrepared(Loader &l) {
  auto step = std::make_unique<T>();
  step->io(l);
  if (!l.ok()) return nullptr;
  if (Status s = step->prepare(); !s.ok()) {
    l.fail(s.error().message);
    return nullptr;
  }
  return step;
}

std::unique_ptr<Step> loadStepBody(Loader &l, int depth);

// A loop step's fields, then its body program.
template <class T> std::unique_ptr<Step> loadBodyStep(Loader &l, int depth) {
  auto step = std::make_unique<T>();
  step->io(l);
  if (!l.ok()) return nullptr;
  if (depth >= kMaxDepth) {
    l.fail("loop bodies nested too deeply");
    return nullptr;
  }
  auto body = loadProgramBody(l, depth + 1);
  if (!body.ok()) {
    l.fail(body.error().message);
    return nullptr;
  }
  step->setBody(std::move(*body));
  if (Status s = step->prepare(); !s.ok()) {
    l.fail(s.error().message);
    return nullptr;
  }
  return step;
}

RtValue loadValue(Loader &l, int depth) {
  RtValue v;
  l(v.kind);
  switch (v.kind) {
  case RtValue::Kind::Tensor: l(v.tensor); break;
  case RtValue::Kind::Sequence: l(v.sequence); break;
  case RtValue::Kind::Optional: {
    bool present = false;
    l(present);
    if (!present || !l.ok()) break;
    if (depth >= kMaxDepth) {
      l.fail("optional values nested too deeply");
      break;
    }
    v.inner = std::make_shared<RtValue>(loadValue(l, depth + 1));
    break;
  }
  default: l.fail("unknown value kind " + std::to_string(static_cast<int>(v.kind)));
  }
  return v;
}

std::unique_ptr<Step> loadStep(Loader &l, int depth) {
  std::unique_ptr<Step> step = loadStepBody(l, depth);
  bool perturb = false, hasGeneral = false;
  l(perturb, hasGeneral);
  if (!step || !l.ok()) return nullptr;
  step->perturbOutputs = perturb;
  if (hasGeneral) {
    if (depth >= kMaxDepth) {
      l.fail("steps nested too deeply");
      return nullptr;
    }
    step->generalVariant = loadStep(l, depth + 1);
    if (!step->generalVariant) return nullptr;
    const std::vector<int> &r = step->generalVariant->reads, &w = step->generalVariant->writes;
    // The variant computes the same node: it may touch no other slots.
    for (int slot : r)
      if (std::find(step->reads.begin(), step->reads.end(), slot) == step->reads.end()) {
        l.fail(step->describe() + ": its general variant reads another slot");
        return nullptr;
      }
    for (int slot : w)
      if (std::find(step->writes.begin(), step->writes.end(), slot) == step->writes.end()) {
        l.fail(step->describe() + ": its general variant writes another slot");
        return nullptr;
      }
  }
  return step;
}

std::unique_ptr<Step> loadStepBody(Loader &l, int depth) {
  StepKind kind{};
  l(kind);
  if (!l.ok()) return nullptr;
  switch (kind) {
  case StepKind::Elementwise:
  case StepKind::Reduction: {
    std::unique_ptr<KernelStep> step;
    std::string symbol;
    Status valid = Status::success();
    if (kind == StepKind::Elementwise) {
      auto e = std::make_unique<ElementwiseStep>();
      e->io(l);
      valid = e->validate();
      symbol = e->launch().symbol;
      e->setSlots();
      step = std::move(e);
    } else {
      auto r = std::make_unique<ReductionStep>();
      r->io(l);
      valid = r->validate();
      symbol = r->launch().symbol;
      r->setSlots();
      step = std::move(r);
    }
    if (!l.ok()) return nullptr;
    if (!valid.ok()) {
      l.fail(valid.error().message);
      return nullptr;
    }
    void *entry = l.resolve(symbol);
    if (!entry) return nullptr;
    step->setEntry(reinterpret_cast<KernelEntry>(entry));
    return step;
  }
  case StepKind::If: {
    auto step = std::make_unique<IfStep>();
    step->io(l);
    if (!l.ok()) return nullptr;
    if (depth >= kMaxDepth) {
      l.fail("If branches nested too deeply");
      return nullptr;
    }
    for (std::unique_ptr<Program> *branch : {&step->then_, &step->else_}) {
      auto p = loadProgramBody(l, depth + 1);
      if (!p.ok()) {
        l.fail(p.error().message);
        return nullptr;
      }
      *branch = std::move(*p);
    }
    step->setSlots();
    return step;
  }
  case StepKind::Conv: return loadPrepared<ConvStep>(l);
  case StepKind::MatMul: return loadPrepared<MatMulStep>(l);
  case StepKind::IntMatMul: return loadPrepared<IntMatMulStep>(l);
  case StepKind::IntConv: return loadPrepared<IntConvStep>(l);
  case StepKind::Attention: return loadPrepared<AttentionStep>(l);
  case StepKind::Pool: return loadPrepared<PoolStep>(l);
  case StepKind::ConvTranspose: return loadPrepared<ConvTransposeStep>(l);
  case StepKind::Lstm: return loadPrepared<LstmStep>(l);
  case StepKind::Slice:
  case StepKind::Concat:
  case StepKind::Split:
  case StepKind::Transpose:
  case StepKind::ResizeNearest: {
    std::unique_ptr<CopyStep> step = newCopyStep(kind);
    step->io(l);
    if (!l.ok()) return nullptr;
    if (Status s = step->validate(); !s.ok()) {
      l.fail(s.error().message);
      return nullptr;
    }
    step->deriveSlots();
    return step;
  }
  case StepKind::HostOp: return loadPrepared<HostOpStep>(l);
  case StepKind::Dispatch: {
    std::unique_ptr<DispatchStep> step = loadPrepared<DispatchStep>(l);
    if (!step) return nullptr;
    std::vector<KernelEntry> entries;
    for (const DispatchRecipe::Launch &launch : step->recipe().launches) {
      void *entry = l.resolve(launch.symbol);
      if (!entry) return nullptr;
      entries.push_back(reinterpret_cast<KernelEntry>(entry));
    }
    step->setEntries(std::move(entries));
    return step;
  }
  case StepKind::Loop: return loadBodyStep<LoopStep>(l, depth);
  case StepKind::Scan: return loadBodyStep<ScanStep>(l, depth);
  case StepKind::SequenceMap: return loadBodyStep<SequenceMapStep>(l, depth);
  }
  l.fail("unknown step kind " + std::to_string(static_cast<int>(kind)));
  return nullptr;
}

Expected<std::unique_ptr<Program>> loadProgramBody(Loader &l, int depth) {
  auto p = std::make_unique<Program>();
  l(p->numSlots, p->inputSlots, p->outputSlots, p->captures);
  const uint64_t numConstants = l.reader().readCount(uint64_t(1) << 24, 16);
  for (uint64_t i = 0; i < numConstants && l.ok(); ++i) {
    int slot = -1;
    l(slot);
    RtValue v = loadValue(l, 0);
    p->constants.emplace_back(slot, std::move(v));
  }
  const uint64_t numSteps = l.reader().readCount(uint64_t(1) << 24, 8);
  for (uint64_t i = 0; i < numSteps && l.ok(); ++i)
    if (std::unique_ptr<Step> step = loadStep(l, depth)) p->steps.push_back(std::move(step));
  if (!l.ok()) return l.reader().status().error();
  KILN_RETURN_IF_ERROR(p->validate());
  p->computeLiveness();
  return p;
}

} // namespace

void numberPrograms(Program &main) {
  std::vector<const Program *> programs = allPrograms(main);
  for (size_t i = 0; i < programs.size(); ++i) const_cast<Program *>(programs[i])->id = int(i);
}

Expected<SavedProgram> saveProgram(const Program &main) {
  artifact::ByteWriter body;
  TensorTable tensors;
  Saver saver(body, tensors);
  saveProgramBody(main, saver);
  KILN_RETURN_IF_ERROR(saver.status());

  // The table: per tensor its dtype, shape and place in the weights section.
  artifact::ByteWriter table, weights;
  table.writeCount(tensors.tensors.size());
  for (const Tensor &t : tensors.tensors) {
    table.writeI64(onnxCodeOf(t.dtype()));
    table.writeCount(t.shape().size());
    for (int64_t d : t.shape()) table.writeI64(d);
    if (t.dtype() == DType::String) { // the strings themselves, in the table
      for (const std::string &str : t.span<std::string>()) table.writeString(str);
      continue;
    }
    weights.alignTo(kWeightAlignment);
    table.writeU64(weights.size());
    table.writeU64(t.byteSize());
    weights.writeBytes(t.raw(), t.byteSize());
  }
  SavedProgram out;
  out.program = table.take() + body.take();
  out.weights = weights.take();
  return out;
}

Expected<std::unique_ptr<Program>> loadProgram(std::span<const uint8_t> program,
                                               std::span<const uint8_t> weights,
                                               std::shared_ptr<const void> owner,
                                               const SymbolResolver &resolve) {
  artifact::ByteReader in(program, "program section");
  std::vector<Tensor> tensors;
  const uint64_t count = in.readCount(uint64_t(1) << 24, 24); // code, rank and at least 8 bytes
  for (uint64_t i = 0; i < count && in.ok(); ++i) {
    const int64_t code = in.readI64();
    const uint64_t rank = in.readCount(16, 8);
    Shape64 shape;
    for (uint64_t d = 0; d < rank; ++d) shape.push_back(in.readI64());
    std::optional<DType> dtype = dtypeFromOnnx(static_cast<int>(code));
    if (in.ok() && !dtype)
      in.fail("tensor " + std::to_string(i) + ": unknown dtype " + std::to_string(code));
    int64_t numel = 1;
    bool sane = true;
    for (int64_t d : shape)
      if (d < 0 || __builtin_mul_overflow(numel, d, &numel)) sane = false;
    if (!in.ok()) break;
    if (*dtype == DType::String) {
      // Each string takes at least its 8-byte length: numel is bounded by
      // the bytes left before anything is allocated.
      if (!sane || uint64_t(numel) > in.remaining() / 8) {
        in.fail("tensor " + std::to_string(i) + " " + shapeToString(shape) +
                " does not fit the program section");
        break;
      }
      Tensor t(DType::String, shape);
      for (std::string &str : t.span<std::string>()) str = in.readString();
      tensors.push_back(std::move(t));
      continue;
    }
    const uint64_t offset = in.readU64(), bytes = in.readU64();
    if (!in.ok()) break;
    uint64_t want = 0;
    if (sane && __builtin_mul_overflow(uint64_t(numel), uint64_t(dtypeSize(*dtype)), &want))
      sane = false;
    if (!sane || want != bytes || offset % kWeightAlignment != 0 || offset > weights.size() ||
        bytes > weights.size() - offset) {
      in.fail("tensor " + std::to_string(i) + " " + shapeToString(shape) +
              " does not fit the weights section");
      break;
    }
    tensors.push_back(Tensor::view(*dtype, shape, owner, weights.data() + offset));
  }
  if (!in.ok()) return in.status().error();
  Loader loader(in, tensors, resolve);
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Program> main, loadProgramBody(loader, 0));
  in.expectEnd();
  if (!in.ok()) return in.status().error();
  numberPrograms(*main);
  return main;
}

} // namespace kiln::cpu
