// Interpreter kernels for the ops that hold regions: If, Loop, Scan and
// SequenceMap. Each runs its region through Interpreter::runRegion with the
// node's own scope as the outer environment, so nodes inside a region read
// values of the enclosing graphs directly. Region errors come back prefixed
// with the parent node, so a failure deep inside nested branches still says
// which If or Loop it was under.
#include "interp/interpreter.h"
#include "interp/kernels/common.h"
#include "interp/kernels/families.h"

#include <algorithm>
#include <limits>

namespace kiln {

namespace {

// A condition held in a one-element tensor (If's cond, Loop's cond). ONNX
// types it bool; any numeric element is read as "non-zero is true".
Expected<bool> readCondition(const KernelContext &ctx, const RtValue &v, const char *what) {
  if (!v.isTensor()) return ctx.error(what, " must be a tensor, got ", v.describe());
  if (v.tensor.dtype() == DType::String) return ctx.error(what, " must be bool, got string");
  if (v.tensor.numel() != 1)
    return ctx.error(what, " must hold one element, got shape ", shapeToString(v.tensor.shape()));
  return v.tensor.getDouble(0) != 0;
}

// Runs a region and checks that it gave `expectedOutputs` values.
Expected<std::vector<RtValue>> runBody(KernelContext &ctx, const Graph &body,
                                       std::vector<RtValue> inputs, size_t expectedOutputs,
                                       const char *what) {
  auto outs = ctx.interpreter().runRegion(body, std::move(inputs), ctx.environment());
  if (!outs.ok()) return withContext(ctx.node().describe() + ": " + what, outs.error());
  if (outs->size() != expectedOutputs)
    return ctx.error(what, " gave ", outs->size(), " outputs, expected ", expectedOutputs);
  return outs;
}

// The region attribute `name` (required by the op table, so present unless
// the graph was built by hand without the verifier).
Expected<const Graph *> regionOf(const KernelContext &ctx, const char *name) {
  const Graph *g = ctx.node().getGraph(name);
  if (!g) return ctx.error("has no '", name, "' region");
  return g;
}

// Collects the per-iteration values of one scan output; they must all be
// tensors of one dtype and shape, since they are stacked afterwards.
Status appendScanValue(const KernelContext &ctx, std::vector<Tensor> &collected, RtValue v,
                       size_t outputIndex) {
  if (!v.isTensor())
    return ctx.error("scan output ", outputIndex, " must be a tensor, got ", v.describe());
  if (!collected.empty() &&
      (collected[0].shape() != v.tensor.shape() || collected[0].dtype() != v.tensor.dtype()))
    return ctx.error("scan output ", outputIndex, " changed from ",
                     RtValue(collected[0]).describe(), " to ", v.describe(), " between iterations");
  collected.push_back(std::move(v.tensor));
  return Status::success();
}

// Stacks equal-shaped tensors along a new axis `axis` (0 <= axis <= rank).
Tensor stackAlongNewAxis(const std::vector<Tensor> &parts, int64_t axis) {
  std::vector<Tensor> expanded;
  expanded.reserve(parts.size());
  for (const Tensor &p : parts) {
    Shape64 s = p.shape();
    s.insert(s.begin() + axis, 1);
    expanded.push_back(p.reshaped(std::move(s)));
  }
  return concatAlongAxis(expanded, axis);
}

// A scan output of zero iterations: an empty tensor whose other dims come
// from the body's declared output type where it is fully static.
Tensor emptyScanOutput(const Value &bodyOutput, int64_t axis) {
  const Type &t = bodyOutput.type();
  DType dtype = t.isTensor() ? t.dtype() : DType::F32;
  Shape64 shape;
  if (auto dims = t.isTensor() ? t.shape().staticDims() : std::nullopt) shape = *dims;
  axis = std::clamp<int64_t>(axis, 0, static_cast<int64_t>(shape.size()));
  shape.insert(shape.begin() + axis, 0);
  return Tensor(dtype, shape);
}

// ---- If ------------------------------------------------------------------------

Status ifKernel(KernelContext &ctx) {
  KILN_ASSIGN_OR_RETURN(bool cond, readCondition(ctx, ctx.value(0), "condition"));
  const char *branch = cond ? "then_branch" : "else_branch";
  KILN_ASSIGN_OR_RETURN(const Graph *region, regionOf(ctx, branch));
  KILN_ASSIGN_OR_RETURN(std::vector<RtValue> outs,
                        runBody(ctx, *region, {}, ctx.numOutputs(), branch));
  for (int i = 0; i < ctx.numOutputs(); ++i) ctx.setOutput(i, std::move(outs[i]));
  return Status::success();
}

// ---- Fused ---------------------------------------------------------------------

// A fused group's meaning is its region run on the node's inputs; the
// interpreter keeps that meaning so fused graphs stay checkable against it.
Status fusedKernel(KernelContext &ctx) {
  KILN_ASSIGN_OR_RETURN(const Graph *body, regionOf(ctx, "body"));
  std::vector<RtValue> in;
  for (int i = 0; i < ctx.numInputs(); ++i) in.push_back(ctx.has(i) ? ctx.value(i) : RtValue());
  KILN_ASSIGN_OR_RETURN(std::vector<RtValue> outs,
                        runBody(ctx, *body, std::move(in), ctx.numOutputs(), "body"));
  for (int i = 0; i < ctx.numOutputs(); ++i) ctx.setOutput(i, std::move(outs[i]));
  return Status::success();
}

// ---- Loop ----------------------------------------------------------------------

// The trip limit M: absent means no limit (the condition alone stops it).
Expected<int64_t> readTripLimit(const KernelContext &ctx) {
  if (!ctx.has(0)) return std::numeric_limits<int64_t>::max();
  const RtValue &v = ctx.value(0);
  if (!v.isTensor() || !isInt(v.tensor.dtype()) || v.tensor.numel() != 1)
    return ctx.error("max trip count must be a one-element integer tensor, got ", v.describe());
  return v.tensor.getInt(0);
}

// Inputs: M, cond, carried values. Body: (iteration, cond, carried...) ->
// (cond, carried..., scan outputs...). Outputs: final carried values, then
// the scan outputs stacked along a new axis 0.
Status loopKernel(KernelContext &ctx) {
  KILN_ASSIGN_OR_RETURN(const Graph *body, regionOf(ctx, "body"));
  const int numCarried = std::max(0, ctx.numInputs() - 2);
  const int numScan = ctx.numOutputs() - numCarried;
  if (numScan < 0)
    return ctx.error("has ", numCarried, " loop-carried inputs but only ", ctx.numOutputs(),
                     " outputs");
  if (body->inputs().size() != static_cast<size_t>(2 + numCarried))
    return ctx.error("body takes ", body->inputs().size(), " inputs, expected ", 2 + numCarried,
                     " (iteration number, condition and ", numCarried, " carried values)");
  KILN_ASSIGN_OR_RETURN(int64_t maxTrips, readTripLimit(ctx));
  bool cond = true;
  if (ctx.has(1)) {
    KILN_ASSIGN_OR_RETURN(cond, readCondition(ctx, ctx.value(1), "condition"));
  }

  std::vector<RtValue> carried;
  for (int i = 0; i < numCarried; ++i) {
    if (!ctx.has(2 + i)) return ctx.error("loop-carried input ", i, " is missing");
    carried.push_back(ctx.value(2 + i));
  }
  std::vector<std::vector<Tensor>> scans(numScan);
  for (int64_t iter = 0; iter < maxTrips && cond; ++iter) {
    std::vector<RtValue> in;
    in.reserve(2 + numCarried);
    in.emplace_back(Tensor::scalar<int64_t>(iter));
    in.emplace_back(Tensor::scalar<bool>(cond));
    for (RtValue &v : carried) in.push_back(std::move(v));
    KILN_ASSIGN_OR_RETURN(std::vector<RtValue> outs,
                          runBody(ctx, *body, std::move(in), 1 + numCarried + numScan, "body"));
    KILN_ASSIGN_OR_RETURN(cond, readCondition(ctx, outs[0], "body's condition output"));
    for (int i = 0; i < numCarried; ++i) carried[i] = std::move(outs[1 + i]);
    for (int k = 0; k < numScan; ++k)
      KILN_RETURN_IF_ERROR(appendScanValue(ctx, scans[k], std::move(outs[1 + numCarried + k]), k));
  }

  for (int i = 0; i < numCarried; ++i) ctx.setOutput(i, std::move(carried[i]));
  for (int k = 0; k < numScan; ++k) {
    Tensor out = scans[k].empty() ? emptyScanOutput(*body->outputs()[1 + numCarried + k], 0)
                                  : stackAlongNewAxis(scans[k], 0);
    ctx.setOutput(numCarried + k, std::move(out));
  }
  return Status::success();
}

// ---- Scan ----------------------------------------------------------------------

// An axes or directions attribute of Scan: one entry per scan input (or
// output), all zero when absent. Directions are 0 (forward) or 1 (reverse).
Expected<std::vector<int64_t>> perScanAttr(const KernelContext &ctx, const char *name,
                                           int64_t count, bool isDirection) {
  std::vector<int64_t> v = ctx.node().getInts(name);
  if (v.empty()) return std::vector<int64_t>(count, 0);
  if (static_cast<int64_t>(v.size()) != count)
    return ctx.error(name, " has ", v.size(), " entries, expected ", count);
  for (int64_t x : v)
    if (isDirection && x != 0 && x != 1) return ctx.error(name, " entries must be 0 or 1, got ", x);
  return v;
}

// Slice `index` of `t` along `axis`, with the axis removed.
Tensor scanSlice(const Tensor &t, int64_t axis, int64_t index) {
  Tensor s = sliceAlongAxis(t, axis, index, 1);
  Shape64 shape = t.shape();
  shape.erase(shape.begin() + axis);
  return s.reshaped(std::move(shape));
}

struct ScanLayout {
  int numState = 0, numScanIn = 0, numScanOut = 0;
  std::vector<int64_t> inAxes, inDirs, outAxes, outDirs;
  int64_t length = 0; // iterations: the scan inputs' extent along their axes
};

Expected<ScanLayout> scanLayout(const KernelContext &ctx, const Graph &body) {
  ScanLayout L;
  L.numScanIn = static_cast<int>(ctx.node().getInt("num_scan_inputs"));
  L.numState = ctx.numInputs() - L.numScanIn;
  L.numScanOut = ctx.numOutputs() - L.numState;
  if (L.numScanIn < 1 || L.numState < 0 || L.numScanOut < 0)
    return ctx.error("num_scan_inputs ", L.numScanIn, " does not fit ", ctx.numInputs(),
                     " inputs and ", ctx.numOutputs(), " outputs");
  if (body.inputs().size() != static_cast<size_t>(L.numState + L.numScanIn) ||
      body.outputs().size() != static_cast<size_t>(L.numState + L.numScanOut))
    return ctx.error("body has ", body.inputs().size(), " inputs and ", body.outputs().size(),
                     " outputs, expected ", L.numState + L.numScanIn, " and ",
                     L.numState + L.numScanOut);
  KILN_ASSIGN_OR_RETURN(L.inAxes, perScanAttr(ctx, "scan_input_axes", L.numScanIn, false));
  KILN_ASSIGN_OR_RETURN(L.inDirs, perScanAttr(ctx, "scan_input_directions", L.numScanIn, true));
  KILN_ASSIGN_OR_RETURN(L.outAxes, perScanAttr(ctx, "scan_output_axes", L.numScanOut, false));
  KILN_ASSIGN_OR_RETURN(L.outDirs, perScanAttr(ctx, "scan_output_directions", L.numScanOut, true));
  for (int j = 0; j < L.numScanIn; ++j) {
    const int input = L.numState + j;
    if (!ctx.has(input) || !ctx.value(input).isTensor())
      return ctx.error("scan input ", j, " must be a tensor");
    const Tensor &x = ctx.in(input);
    KILN_ASSIGN_OR_RETURN(L.inAxes[j], resolveAxis(ctx, L.inAxes[j], x.rank()));
    int64_t len = x.dim(L.inAxes[j]);
    if (j > 0 && len != L.length)
      return ctx.error("scan input ", j, " has ", len, " steps along axis ", L.inAxes[j],
                       ", scan input 0 has ", L.length);
    L.length = len;
  }
  return L;
}

// Stacks the per-iteration values of scan output k along its axis; reverse
// direction puts the first iteration last.
Expected<Tensor> finishScanOutput(const KernelContext &ctx, const ScanLayout &L, int k,
                                  std::vector<Tensor> parts, const Value &bodyOutput) {
  int64_t rank = parts.empty()
                     ? (bodyOutput.type().shape().rankKnown ? bodyOutput.type().shape().rank() : 0)
                     : parts[0].rank();
  KILN_ASSIGN_OR_RETURN(int64_t axis, resolveAxis(ctx, L.outAxes[k], rank + 1));
  if (parts.empty()) return emptyScanOutput(bodyOutput, axis);
  if (L.outDirs[k] == 1) std::reverse(parts.begin(), parts.end());
  return stackAlongNewAxis(parts, axis);
}

// Inputs: initial states, then scan inputs. Body: (states..., one slice of
// each scan input) -> (states..., scan output slices...).
Status scanKernel(KernelContext &ctx) {
  KILN_ASSIGN_OR_RETURN(const Graph *body, regionOf(ctx, "body"));
  KILN_ASSIGN_OR_RETURN(ScanLayout L, scanLayout(ctx, *body));
  std::vector<RtValue> states;
  for (int i = 0; i < L.numState; ++i) {
    if (!ctx.has(i)) return ctx.error("state input ", i, " is missing");
    states.push_back(ctx.value(i));
  }
  std::vector<std::vector<Tensor>> scans(L.numScanOut);
  for (int64_t t = 0; t < L.length; ++t) {
    std::vector<RtValue> in;
    for (RtValue &v : states) in.push_back(std::move(v));
    for (int j = 0; j < L.numScanIn; ++j) {
      int64_t index = L.inDirs[j] == 1 ? L.length - 1 - t : t;
      in.emplace_back(scanSlice(ctx.in(L.numState + j), L.inAxes[j], index));
    }
    KILN_ASSIGN_OR_RETURN(std::vector<RtValue> outs,
                          runBody(ctx, *body, std::move(in), L.numState + L.numScanOut, "body"));
    for (int i = 0; i < L.numState; ++i) states[i] = std::move(outs[i]);
    for (int k = 0; k < L.numScanOut; ++k)
      KILN_RETURN_IF_ERROR(appendScanValue(ctx, scans[k], std::move(outs[L.numState + k]), k));
  }
  for (int i = 0; i < L.numState; ++i) ctx.setOutput(i, std::move(states[i]));
  for (int k = 0; k < L.numScanOut; ++k) {
    KILN_ASSIGN_OR_RETURN(Tensor out, finishScanOutput(ctx, L, k, std::move(scans[k]),
                                                       *body->outputs()[L.numState + k]));
    ctx.setOutput(L.numState + k, std::move(out));
  }
  return Status::success();
}

// ---- SequenceMap ---------------------------------------------------------------

// Runs the body once per element of the input sequences (all of one length);
// tensor inputs are passed unchanged to every iteration. Each output is the
// sequence of the body's per-iteration values.
Status sequenceMapKernel(KernelContext &ctx) {
  KILN_ASSIGN_OR_RETURN(const Graph *body, regionOf(ctx, "body"));
  if (body->inputs().size() != static_cast<size_t>(ctx.numInputs()))
    return ctx.error("body takes ", body->inputs().size(), " inputs, the node has ",
                     ctx.numInputs());
  if (!ctx.value(0).isSequence())
    return ctx.error("input 0 must be a sequence, got ", ctx.value(0).describe());
  const size_t length = ctx.value(0).sequence.size();
  for (int j = 1; j < ctx.numInputs(); ++j) {
    if (!ctx.has(j)) return ctx.error("input ", j, " is missing");
    const RtValue &v = ctx.value(j);
    if (v.isSequence() && v.sequence.size() != length)
      return ctx.error("input ", j, " is a sequence of ", v.sequence.size(),
                       " tensors, input 0 has ", length);
  }
  std::vector<std::vector<Tensor>> results(ctx.numOutputs());
  for (size_t it = 0; it < length; ++it) {
    std::vector<RtValue> in;
    for (int j = 0; j < ctx.numInputs(); ++j) {
      const RtValue &v = ctx.value(j);
      in.push_back(v.isSequence() ? RtValue(v.sequence[it]) : v);
    }
    KILN_ASSIGN_OR_RETURN(std::vector<RtValue> outs,
                          runBody(ctx, *body, std::move(in), ctx.numOutputs(), "body"));
    for (int k = 0; k < ctx.numOutputs(); ++k) {
      if (!outs[k].isTensor())
        return ctx.error("body output ", k, " must be a tensor, got ", outs[k].describe());
      results[k].push_back(std::move(outs[k].tensor));
    }
  }
  for (int k = 0; k < ctx.numOutputs(); ++k)
    ctx.setOutput(k, RtValue::ofSequence(std::move(results[k])));
  return Status::success();
}

} // namespace

void registerControlFlowKernels(KernelTable &t) {
  t.add(OpKind::If, ifKernel);
  t.add(OpKind::Fused, fusedKernel);
  t.add(OpKind::Loop, loopKernel);
  t.add(OpKind::Scan, scanKernel);
  t.add(OpKind::SequenceMap, sequenceMapKernel);
}

} // namespace kiln
