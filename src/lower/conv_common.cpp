// Window geometry, row arithmetic and fused epilogues shared by the conv,
// pool and matmul lowerings (see conv_common.h).
#include "lower/conv_common.h"

#include "lower/elementwise_ops.h"

namespace kiln::lower::convlower {

using kir::Affine;
using kir::Opcode;

namespace {

std::string listText(const std::vector<int64_t> &v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

} // namespace

Expected<std::vector<int64_t>> intsAttr(const Node &node, const std::string &name, size_t count,
                                        int64_t fill) {
  if (!node.hasAttr(name)) return std::vector<int64_t>(count, fill);
  std::vector<int64_t> v = node.getInts(name);
  if (v.size() != count)
    return makeError("attribute '", name, "' has ", v.size(), " values, expected ", count);
  return v;
}

Expected<std::vector<WindowAxis>> convWindow(DispatchBuilder &d, const Node &node,
                                             const std::vector<SVal> &in,
                                             const std::vector<SVal> &kernel, bool ceilMode) {
  const size_t n = in.size();
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> strides, intsAttr(node, "strides", n, 1));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> dilations, intsAttr(node, "dilations", n, 1));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads, intsAttr(node, "pads", 2 * n, 0));
  const std::string autoPad = node.getString("auto_pad");
  const bool same = autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER";
  if (!same && autoPad != "VALID" && autoPad != "NOTSET")
    return makeError("unknown auto_pad '", autoPad, "'");
  for (size_t i = 0; i < n; ++i) {
    if (strides[i] <= 0) return makeError("strides must be > 0, got ", listText(strides));
    if (dilations[i] <= 0) return makeError("dilations must be > 0, got ", listText(dilations));
    if (!same && autoPad != "VALID" && (pads[i] < 0 || pads[i + n] < 0))
      return makeError("pads must not be negative, got ", listText(pads));
  }
  // The interpreter ignores ceil_mode under VALID.
  const bool ceil = ceilMode && autoPad != "VALID";
  std::vector<WindowAxis> axes(n);
  for (size_t i = 0; i < n; ++i) {
    WindowAxis &a = axes[i];
    a.in = in[i];
    a.kernel = kernel[i];
    a.stride = strides[i];
    a.dilation = dilations[i];
    if (auto k = d.constant(kernel[i]); k && *k <= 0)
      return makeError("kernel dims must be > 0, got ", *k, " on spatial axis ", i);
    d.check(d.lt(d.c(0), kernel[i]), "kernel dims must be > 0, got {}", {kernel[i]});
    const SVal s = d.c(a.stride);
    a.span = d.add(d.mul(d.sub(kernel[i], d.c(1)), d.c(a.dilation)), d.c(1));
    if (same) {
      // ceil(in / stride) outputs; the padding that takes is split evenly,
      // the odd element at the end (UPPER) or the start (LOWER).
      a.out = d.ceilDiv(in[i], s);
      const SVal total = d.max(d.c(0), d.sub(d.add(d.mul(d.sub(a.out, d.c(1)), s), a.span), in[i]));
      const SVal small = d.floorDiv(total, d.c(2));
      a.padBegin = autoPad == "SAME_UPPER" ? small : d.sub(total, small);
      a.padEnd = d.sub(total, a.padBegin);
      continue;
    }
    a.padBegin = d.c(autoPad == "VALID" ? 0 : pads[i]);
    a.padEnd = d.c(autoPad == "VALID" ? 0 : pads[i + n]);
    const SVal padded = d.add(d.add(in[i], a.padBegin), a.padEnd);
    const SVal room = d.sub(padded, a.span);
    d.check(d.le(d.c(0), room),
            "spatial axis " + std::to_string(i) +
                ": the padded input ({}) is smaller than the dilated kernel ({})",
            {padded, a.span});
    a.out = d.add(ceil ? d.ceilDiv(room, s) : d.floorDiv(room, s), d.c(1));
    if (ceil) {
      // The last window must start inside the input or its left padding.
      const SVal last = d.mul(d.sub(a.out, d.c(1)), s);
      a.out = d.select(d.le(d.add(in[i], a.padBegin), last), d.sub(a.out, d.c(1)), a.out);
    }
  }
  return axes;
}

Interior interiorRange(DispatchBuilder &d, SVal count, SVal limit, SVal kernel, int64_t stride,
                       int64_t dilation, SVal padBegin) {
  const SVal s = d.c(stride);
  // First tap (offset -padBegin) at or after 0.
  const SVal lo = d.clamp(d.ceilDiv(padBegin, s), d.c(0), count);
  // Last tap (offset (kernel - 1) * dilation - padBegin) before limit.
  const SVal lastOff = d.sub(d.mul(d.sub(kernel, d.c(1)), d.c(dilation)), padBegin);
  const SVal hiRaw = d.add(d.floorDiv(d.sub(d.sub(limit, d.c(1)), lastOff), s), d.c(1));
  return {lo, d.max(d.min(hiRaw, count), lo)};
}

int I64::floorDivConst(int x, int64_t k) {
  if (k == 1) return x;
  const int q = div(x, c(k));
  return select(lt(mod(x, c(k)), c(0)), sub(q, c(1)), q);
}

std::vector<int> unflatten(DispatchBuilder &d, int flat, const std::vector<SVal> &dims) {
  I64 i{d.kb()};
  std::vector<int> coords(dims.size());
  for (size_t k = dims.size(); k-- > 1;) {
    if (auto v = d.constant(dims[k]); v && *v == 1) {
      coords[k] = i.c(0);
      continue;
    }
    const int dim = d.value(dims[k]);
    coords[k] = i.mod(flat, dim);
    flat = i.div(flat, dim);
  }
  if (!dims.empty()) coords[0] = flat;
  return coords;
}

int convert(kir::KernelBuilder &b, DType to, DType type, int value) {
  return to == type ? value : b.cast(to, type, value);
}

DType accumulatorType(DType t) {
  return t == DType::F16 || t == DType::BF16 ? DType::F32 : t;
}

// ---- fused epilogues -------------------------------------------------------------

int Epilogue::inputOf(const Value *v) const {
  auto it = bodyInputs.find(v);
  return it == bodyInputs.end() ? -1 : it->second;
}

namespace {

// The strides of node input `input` along each output axis (right-aligned,
// numpy broadcasting): 0 where its dim is 1 or missing. Checks on every run
// that its dims broadcast.
Expected<std::vector<SVal>> broadcastStrides(DispatchBuilder &d, int input,
                                             const std::vector<SVal> &outDims) {
  const int rank = d.inputRank(input), outRank = int(outDims.size());
  if (rank < 0 || rank > outRank)
    return makeError("epilogue operand ", input, " has rank ", rank, ", the output has ", outRank);
  std::vector<SVal> dims = d.dims(input), strides(size_t(outRank), d.c(0));
  SVal stride = d.c(1);
  for (int a = rank - 1; a >= 0; --a) {
    const SVal dim = dims[size_t(a)], out = outDims[size_t(a + outRank - rank)];
    d.check(d.lor(d.eq(dim, d.c(1)), d.eq(dim, out)),
            "epilogue operand " + std::to_string(input) + " has dim {} where the output has {}",
            {dim, out});
    strides[size_t(a + outRank - rank)] = d.select(d.eq(dim, d.c(1)), d.c(0), stride);
    stride = d.mul(stride, dim);
  }
  return strides;
}

} // namespace

Expected<Epilogue> planEpilogue(DispatchBuilder &d, const std::vector<SVal> &outDims) {
  Epilogue ep;
  const Node &node = d.node();
  if (node.op() != OpKind::Fused) {
    ep.core = &node;
    return ep;
  }
  const Graph *body = node.getGraph("body");
  if (!body || body->nodes().empty() || body->outputs().size() != 1 || node.numOutputs() != 1)
    return makeError("a fused conv/matmul region must have nodes and one output");
  for (size_t i = 0; i < body->inputs().size(); ++i) ep.bodyInputs[body->inputs()[i]] = int(i);
  ep.core = body->nodes().front().get();
  for (size_t k = 1; k < body->nodes().size(); ++k) {
    const Node &n = *body->nodes()[k];
    if (!canLowerElementwise(n))
      return makeError("fused epilogue ", n.describe(), " has no Kernel IR expansion");
    const Type &t = n.output(0)->type();
    if (!t.shape().rankKnown || int(t.shape().rank()) != int(outDims.size()))
      return makeError("fused epilogue ", n.describe(), " does not keep the output's rank");
    for (const Value *v : n.inputs()) {
      const int input = ep.inputOf(v);
      if (!v || input < 0 || ep.strides.count(input)) continue;
      KILN_ASSIGN_OR_RETURN(ep.strides[input], broadcastStrides(d, input, outDims));
    }
    ep.nodes.push_back(&n);
  }
  return ep;
}

Status emitRowOutput(DispatchBuilder &d, const Epilogue &ep, int acc, DType accType, int accRow,
                     int outRow, SVal length, const std::vector<int> &coords) {
  const DType outType = d.outputType(0);
  if (ep.nodes.empty() && acc == d.out(0) && outType == accType) return Status::success();
  kir::KernelBuilder &b = d.kb();
  I64 i{b};
  // Each operand's offset at the row's start.
  std::map<int, int> rowOffset;
  for (const auto &[input, strides] : ep.strides) {
    int off = i.c(0);
    for (size_t a = 0; a < coords.size() && a + 1 < strides.size(); ++a)
      if (auto k = d.constant(strides[a]); !k || *k != 0)
        off = i.add(off, i.mul(coords[a], d.value(strides[a])));
    rowOffset[input] = off;
  }
  const DType coreType = ep.core->output(0)->type().dtype();
  const int j = d.loop(length, {kir::Schedule::Kind::Vector, 8});
  const int v = convert(b, coreType, accType, b.load(acc, Affine{}.add(1, -1, j), accRow));
  std::map<const Value *, int> values{{ep.core->output(0), v}};
  for (const Node *n : ep.nodes) {
    std::vector<int> operands;
    for (const Value *in : n->inputs()) {
      if (!in) {
        operands.push_back(-1);
      } else if (auto it = values.find(in); it != values.end()) {
        operands.push_back(it->second);
      } else {
        const int input = ep.inputOf(in);
        if (input < 0)
          return makeError("fused epilogue ", n->describe(), " reads an unknown value");
        operands.push_back(
            b.load(d.in(input), d.term(ep.strides.at(input).back(), j), rowOffset.at(input)));
      }
    }
    KILN_ASSIGN_OR_RETURN(int r, emitElementwise(b, *n, operands));
    values[n->output(0)] = r;
  }
  const Value *result =
      d.node().op() == OpKind::Fused ? d.node().getGraph("body")->outputs()[0] : ep.core->output(0);
  auto it = values.find(result);
  if (it == values.end()) return makeError("the fused region's output is not its epilogue's");
  const DType resultType = result->type().dtype();
  b.store(d.out(0), Affine{}.add(1, -1, j), convert(b, outType, resultType, it->second), outRow);
  b.endLoop();
  return Status::success();
}

} // namespace kiln::lower::convlower
