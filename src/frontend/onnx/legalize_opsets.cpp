// The ONNX ops whose form changed between opsets 7 and 23, rewritten into the
// latest form that kiln's op table describes. Each rule says which opsets it
// serves; a rule that sees the latest form passes it through unchanged.
#include "frontend/onnx/legalize_rules.h"

#include <limits>

namespace kiln::onnx_import {

namespace {

using Result = Expected<std::vector<Value *>>;

// Moves an ints attribute into input `index` as an i64 constant (the form
// opset 10/11/13/18 switched to for axes, pads, splits, starts...).
void moveIntsToInput(NodeDraft &d, GraphBuilder &b, const std::string &attr, size_t index) {
  auto a = d.take(attr);
  if (!a) return;
  if (d.inputs.size() <= index) d.inputs.resize(index + 1, nullptr);
  d.inputs[index] = b.constantInts(a->ints, d.name + "/" + attr);
}

// A scalar constant of the dtype of `like` (used for Clip bounds and Pad value).
Value *scalarLike(GraphBuilder &b, Value *like, double v, const std::string &name) {
  DType dt = like ? like->type().dtype() : DType::F32;
  Tensor t(dt, {});
  t.setDouble(0, v);
  return b.constant(t, name);
}

// Constant: every value_* attribute becomes the one `value` tensor.
Result legalizeConstant(NodeDraft &d, GraphBuilder &b) {
  Tensor t;
  if (auto a = d.take("value")) t = a->t;
  else if (auto a = d.take("value_float")) t = Tensor::scalar<float>(a->f);
  else if (auto a = d.take("value_int")) t = Tensor::scalar<int64_t>(a->i);
  else if (auto a = d.take("value_floats"))
    t = Tensor::fromVector(a->floats, {static_cast<int64_t>(a->floats.size())});
  else if (auto a = d.take("value_ints"))
    t = Tensor::fromVector(a->ints, {static_cast<int64_t>(a->ints.size())});
  else if (auto a = d.take("value_string")) {
    t = Tensor(DType::String, {});
    t.data<std::string>()[0] = a->s;
  } else if (auto a = d.take("value_strings")) {
    t = Tensor(DType::String, {static_cast<int64_t>(a->strings.size())});
    for (size_t i = 0; i < a->strings.size(); ++i) t.data<std::string>()[i] = a->strings[i];
  } else if (d.has("sparse_value")) {
    return makeError("node '", d.name, "' (Constant): sparse_value is not supported");
  } else {
    return makeError("node '", d.name, "' (Constant): has no value attribute");
  }
  if (!d.attrs.empty())
    return makeError("node '", d.name, "' (Constant): unexpected attribute '",
                     d.attrs.begin()->first, "'");
  d.attrs["value"] = Attribute::ofTensor(std::move(t));
  return legalizeDirect(d, b);
}

// Reduce*: axes attribute (ReduceSum before 13, the others before 18) -> input 1.
Result legalizeReduce(NodeDraft &d, GraphBuilder &b) {
  moveIntsToInput(d, b, "axes", 1);
  return legalizeDirect(d, b);
}

// Squeeze, Unsqueeze before 13: axes attribute -> input 1.
Result legalizeAxesInput(NodeDraft &d, GraphBuilder &b) {
  moveIntsToInput(d, b, "axes", 1);
  return legalizeDirect(d, b);
}

// Split before 13: split attribute -> input 1.
Result legalizeSplit(NodeDraft &d, GraphBuilder &b) {
  moveIntsToInput(d, b, "split", 1);
  return legalizeDirect(d, b);
}

// Slice before 10: starts, ends, axes attributes -> inputs 1, 2, 3.
Result legalizeSlice(NodeDraft &d, GraphBuilder &b) {
  moveIntsToInput(d, b, "starts", 1);
  moveIntsToInput(d, b, "ends", 2);
  moveIntsToInput(d, b, "axes", 3);
  return legalizeDirect(d, b);
}

// Clip before 11: min, max attributes -> inputs 1, 2 (absent = unbounded).
Result legalizeClip(NodeDraft &d, GraphBuilder &b) {
  auto lo = d.take("min"), hi = d.take("max");
  if (lo || hi) {
    d.inputs.resize(3, nullptr);
    if (lo) d.inputs[1] = scalarLike(b, d.input(0), lo->f, d.name + "/min");
    if (hi) d.inputs[2] = scalarLike(b, d.input(0), hi->f, d.name + "/max");
  }
  return legalizeDirect(d, b);
}

// Pad before 11: pads, value attributes -> inputs 1, 2.
Result legalizePad(NodeDraft &d, GraphBuilder &b) {
  auto value = d.take("value");
  moveIntsToInput(d, b, "pads", 1);
  if (value) {
    d.inputs.resize(3, nullptr);
    d.inputs[2] = scalarLike(b, d.input(0), value->f, d.name + "/value");
  }
  return legalizeDirect(d, b);
}

// TopK before 10: k attribute -> input 1.
Result legalizeTopK(NodeDraft &d, GraphBuilder &b) {
  if (auto k = d.take("k")) {
    d.inputs.resize(2, nullptr);
    d.inputs[1] = b.constantInts({k->i}, d.name + "/k");
  }
  return legalizeDirect(d, b);
}

// Upsample (7-9) and Resize-10 resize with asymmetric coordinates and floor
// rounding for nearest; they become Resize(X, roi = none, scales).
Result legalizeUpsampleLike(NodeDraft &d, GraphBuilder &b) {
  Value *scales = d.input(1);
  if (auto s = d.take("scales"))
    scales = b.constant(Tensor::fromVector(s->floats, {static_cast<int64_t>(s->floats.size())}),
                        d.name + "/scales");
  std::string mode = "nearest";
  if (auto m = d.take("mode")) mode = m->s;
  if (mode == "bilinear" || mode == "trilinear") mode = "linear";
  d.inputs = {d.input(0), nullptr, scales};
  d.attrs["mode"] = Attribute::ofString(mode);
  d.attrs["coordinate_transformation_mode"] = Attribute::ofString("asymmetric");
  d.attrs["nearest_mode"] = Attribute::ofString("floor");
  d.opType = "Resize";
  return legalizeDirect(d, b);
}

Result legalizeResize(NodeDraft &d, GraphBuilder &b) {
  if (d.opset < 11) return legalizeUpsampleLike(d, b);
  return legalizeDirect(d, b);
}

// Softmax, LogSoftmax, Hardmax before 13 work on the input flattened to 2-d
// at `axis` (default 1). Where the axis is the last one that is the same as
// the new form; otherwise Flatten -> op(axis=1) -> Reshape back.
Result legalizeSoftmaxFamily(NodeDraft &d, GraphBuilder &b) {
  if (d.opset >= 13) return legalizeDirect(d, b);
  int64_t axis = 1;
  if (auto a = d.take("axis")) axis = a->i;
  Value *x = d.input(0);
  if (!x) return legalizeDirect(d, b); // reports the missing input
  const Shape &shape = x->type().shape();
  if (shape.rankKnown && (axis == shape.rank() - 1 || axis == -1)) {
    d.attrs["axis"] = Attribute::ofInt(-1);
    return legalizeDirect(d, b);
  }
  auto op = *opFromName(d.opType);
  KILN_ASSIGN_OR_RETURN(Node * flat, b.emit(OpKind::Flatten, {x}, {{"axis", Attribute::ofInt(axis)}},
                                            1, d.name + "/flatten"));
  flat->output(0)->setName(d.name + "/flatten");
  KILN_ASSIGN_OR_RETURN(Node * sm, b.emit(op, {flat->output(0)}, {{"axis", Attribute::ofInt(1)}}, 1,
                                          d.name));
  sm->output(0)->setName(d.name + "/2d");
  KILN_ASSIGN_OR_RETURN(Node * shp, b.emit(OpKind::Shape, {x}, {}, 1, d.name + "/shape"));
  shp->output(0)->setName(d.name + "/shape");
  KILN_ASSIGN_OR_RETURN(Node * back, b.emit(OpKind::Reshape, {sm->output(0), shp->output(0)}, {}, 1,
                                            d.name + "/reshape"));
  return back->outputs();
}

// Scatter (9-10) is ScatterElements without reduction.
Result legalizeScatter(NodeDraft &d, GraphBuilder &b) {
  d.opType = "ScatterElements";
  return legalizeDirect(d, b);
}

// BatchNormalization before 9 had `spatial` (1 is the only form kiln and
// later opsets know); before 7 `is_test` (the importer drops every
// `consumed_inputs`). Outputs past
// the first are training statistics, which inference never produces.
Result legalizeBatchNorm(NodeDraft &d, GraphBuilder &b) {
  if (auto s = d.take("spatial"); s && s->i != 1)
    return makeError("node '", d.name, "' (BatchNormalization): spatial=0 is not supported");
  d.take("is_test");
  return legalizeDirect(d, b);
}

// Dropout before 12 had a ratio attribute (and is_test before 7); at
// inference it is the identity either way.
Result legalizeDropout(NodeDraft &d, GraphBuilder &b) {
  d.take("ratio");
  d.take("is_test");
  return legalizeDirect(d, b);
}

// Scan-8 had a batch axis and a sequence_lens input; only the form of 9+ is
// implemented.
Result legalizeScan(NodeDraft &d, GraphBuilder &b) {
  if (d.opset < 9)
    return makeError("node '", d.name, "' (Scan): opset ", d.opset,
                     " form (batched, with sequence_lens) is not supported; re-export at opset 9+");
  return legalizeDirect(d, b);
}

// Binary ops before opset 7 broadcast only with broadcast=1, lining B up
// with A's dims from `axis` (default: B's dims are A's last ones, as in
// numpy). When axis puts B earlier, B gets trailing 1-dims so numpy
// broadcasting lines it up the same way.
Result legalizeLegacyBroadcast(NodeDraft &d, GraphBuilder &b) {
  if (d.opset >= 7) return legalizeDirect(d, b);
  d.take("broadcast");
  auto axis = d.take("axis");
  Value *lhs = d.input(0), *rhs = d.input(1);
  if (!axis || !lhs || !rhs) return legalizeDirect(d, b);
  const Shape &sa = lhs->type().shape(), &sb = rhs->type().shape();
  if (!sa.rankKnown || !sb.rankKnown)
    return makeError("node '", d.name, "' (", d.opType,
                     "): legacy broadcast with axis needs inputs of known rank");
  int64_t ax = axis->i < 0 ? axis->i + sa.rank() : axis->i;
  int64_t trailing = sa.rank() - ax - sb.rank();
  if (ax < 0 || trailing < 0)
    return makeError("node '", d.name, "' (", d.opType, "): broadcast axis ", axis->i,
                     " does not fit input shapes ", sa.str(), " and ", sb.str());
  if (trailing > 0) {
    std::vector<int64_t> axes;
    for (int64_t i = 0; i < trailing; ++i) axes.push_back(sb.rank() + i);
    std::string name = d.name + "/broadcast";
    Value *axesValue = b.constantInts(axes, name + "/axes");
    KILN_ASSIGN_OR_RETURN(Node * u, b.emit(OpKind::Unsqueeze, {rhs, axesValue}, {}, 1, name));
    u->output(0)->setName(name);
    d.inputs[1] = u->output(0);
  }
  return legalizeDirect(d, b);
}

// PRelu before 7 applied a 1-d slope of size C along axis 1 of X; numpy
// broadcasting needs it as [C, 1, ..., 1].
Result legalizeLegacyPRelu(NodeDraft &d, GraphBuilder &b) {
  if (d.opset >= 7 || !d.input(0) || !d.input(1)) return legalizeDirect(d, b);
  const Shape &sx = d.input(0)->type().shape(), &ss = d.input(1)->type().shape();
  bool perChannel = sx.rankKnown && ss.rankKnown && sx.rank() > 2 && ss.rank() == 1 &&
                    !(ss.dims[0].isStatic() && ss.dims[0].value() == 1);
  if (!perChannel) return legalizeDirect(d, b);
  std::vector<int64_t> axes;
  for (int64_t i = 1; i + 1 < sx.rank(); ++i) axes.push_back(i);
  std::string name = d.name + "/slope";
  KILN_ASSIGN_OR_RETURN(Node * u, b.emit(OpKind::Unsqueeze,
                                         {d.input(1), b.constantInts(axes, name + "/axes")}, {}, 1,
                                         name));
  u->output(0)->setName(name);
  d.inputs[1] = u->output(0);
  return legalizeDirect(d, b);
}

// Loop's trip count M and condition are optional inputs. An absent M is an
// unbounded count and an absent condition starts true (the body's condition
// output still decides the next iteration, as in ONNX Runtime), so both are
// written as constants and the op sees one form.
Result legalizeLoop(NodeDraft &d, GraphBuilder &b) {
  if (d.inputs.size() < 2) d.inputs.resize(2, nullptr);
  if (!d.inputs[0])
    d.inputs[0] = b.constant(Tensor::scalar<int64_t>(std::numeric_limits<int64_t>::max()),
                             d.name + "/max_trip_count");
  if (!d.inputs[1]) d.inputs[1] = b.constant(Tensor::scalar<bool>(true), d.name + "/cond");
  return legalizeDirect(d, b);
}

// DFT-20 moved axis from an attribute (default 1) to input 2 (default -2).
// Without that input, the opset-20 default is written as the attribute, so
// the kernel reads input 2 when present and the attribute otherwise.
Result legalizeDft(NodeDraft &d, GraphBuilder &b) {
  if (d.opset >= 20 && !d.input(2) && !d.has("axis")) d.attrs["axis"] = Attribute::ofInt(-2);
  return legalizeDirect(d, b);
}

// Gemm before 7 had a broadcast attribute; C broadcasts unidirectionally in
// every later opset, which covers both of its settings.
Result legalizeLegacyGemm(NodeDraft &d, GraphBuilder &b) {
  d.take("broadcast");
  return legalizeDirect(d, b);
}

// LpPool and GlobalLpPool before 2 took p as a float.
Result legalizeLegacyLpPool(NodeDraft &d, GraphBuilder &b) {
  if (auto p = d.attrs.find("p"); p != d.attrs.end() && p->second.kind == AttrKind::Float)
    p->second = Attribute::ofInt(static_cast<int64_t>(p->second.f));
  return legalizeDirect(d, b);
}

} // namespace

void registerOpsetRules(std::unordered_map<std::string, Legalizer> &t) {
  t["Constant"] = legalizeConstant;
  for (const char *op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
                         "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp",
                         "ReduceSumSquare"})
    t[op] = legalizeReduce;
  t["Squeeze"] = legalizeAxesInput;
  t["Unsqueeze"] = legalizeAxesInput;
  t["Split"] = legalizeSplit;
  t["Slice"] = legalizeSlice;
  t["Clip"] = legalizeClip;
  t["Pad"] = legalizePad;
  t["TopK"] = legalizeTopK;
  t["Upsample"] = legalizeUpsampleLike;
  t["Resize"] = legalizeResize;
  t["Softmax"] = legalizeSoftmaxFamily;
  t["LogSoftmax"] = legalizeSoftmaxFamily;
  t["Hardmax"] = legalizeSoftmaxFamily;
  t["Scatter"] = legalizeScatter;
  t["BatchNormalization"] = legalizeBatchNorm;
  t["Dropout"] = legalizeDropout;
  t["Scan"] = legalizeScan;
  t["DFT"] = legalizeDft;
  t["Loop"] = legalizeLoop;
  for (const char *op :
       {"Add", "Sub", "Mul", "Div", "Pow", "And", "Or", "Xor", "Equal", "Greater", "Less"})
    t[op] = legalizeLegacyBroadcast;
  t["PRelu"] = legalizeLegacyPRelu;
  t["Gemm"] = legalizeLegacyGemm;
  t["LpPool"] = legalizeLegacyLpPool;
  t["GlobalLpPool"] = legalizeLegacyLpPool;
}

} // namespace kiln::onnx_import
