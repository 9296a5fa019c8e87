// Type and shape inference for the ops of ir/ops/control.def: the region ops
// (If, Loop, Scan, SequenceMap), sequences and optionals.
//
// Region ops also refine their regions. ONNX bodies often declare their
// inputs without a shape, or without any type (the importer reads that as f32
// of unknown rank), so:
//   1. each region input whose declared type leaves the shape open takes the
//      type of the operand that feeds it; a declared type is only widened
//      where the operand does not fit it;
//   2. loop-carried values (Loop, Scan states) may change shape between
//      iterations, so their types are widened until the body's outputs fit
//      its inputs: a fixpoint of a few rounds, then unknown rank;
//   3. the region is inferred again whenever what it reads changed: its nodes also read values
//      of the enclosing graphs, whose types may have changed since. Nested
//      region ops do the same for their own regions from their inference
//      functions, so a region op's output types never come from a stale
//      region (graph-wide inferGraph visits the parent before its regions).
// Inference never rejects a model here: declared sequence and region types
// are often loose, so anything unexpected gives unknown shapes instead.
#include "ir/infer/families.h"
#include "ir/infer/infer.h"

#include <algorithm>
#include <unordered_map>

namespace kiln {

namespace {

// ---- type helpers ----------------------------------------------------------------

// Dims that agree are kept, others become unknown; ranks that differ give
// unknown rank.
Shape mergeShapes(const Shape &a, const Shape &b) {
  if (!a.rankKnown || !b.rankKnown || a.rank() != b.rank()) return Shape::unranked();
  Shape out = a;
  for (int64_t i = 0; i < a.rank(); ++i)
    if (!(a.dims[i] == b.dims[i])) out.dims[i] = Dim::unknown();
  return out;
}

// The most precise type covering both. Kinds that differ keep `a` (callers
// decide which side wins).
Type mergeTypes(const Type &a, const Type &b) {
  if (a.kind() != b.kind()) return a;
  switch (a.kind()) {
  case Type::Kind::Tensor:
    return Type::tensor(a.dtype(), mergeShapes(a.shape(), b.shape()));
  case Type::Kind::Sequence:
    return Type::sequence(mergeTypes(a.element(), b.element()));
  case Type::Kind::Optional:
    return Type::optional(mergeTypes(a.element(), b.element()));
  }
  return a;
}

// The type with every shape inside it made unknown-rank.
Type withoutShape(const Type &t) {
  switch (t.kind()) {
  case Type::Kind::Tensor:
    return Type::tensor(t.dtype(), Shape::unranked());
  case Type::Kind::Sequence:
    return Type::sequence(withoutShape(t.element()));
  case Type::Kind::Optional:
    return Type::optional(withoutShape(t.element()));
  }
  return t;
}

Type unrankedLike(const Type &t) {
  return Type::tensor(t.dtype(), Shape::unranked());
}

// Whether a declared type says nothing about the shape (so an operand type
// may replace it, kind included: an untyped input reads as a tensor).
bool isVague(const Type &t) {
  if (t.isTensor()) return !t.shape().rankKnown;
  return isVague(t.element());
}

// Step 1 of the header: the type a region input should have for `operand`.
Type refinedInputType(const Type &declared, const Type &operand) {
  return isVague(declared) ? operand : mergeTypes(declared, operand);
}

// ---- region refinement -----------------------------------------------------------

void setRegionInput(Graph &region, size_t i, const Type &t) {
  region.inputs()[i]->setType(t);
}

// ---- bounding re-inference ---------------------------------------------------
//
// Re-inferring a region re-infers the region ops inside it, each of which
// settles its own body over several rounds: done blindly, nested Loops cost
// rounds^depth. So, for the span of one outermost region op's inference
// (during which no graph is created or freed, so pointers identify them):
//   1. a region is re-inferred only when what its inference reads has
//      changed since its last inference: its input types and the types of
//      the outer values it (or a region below it) reads;
//   2. the carried types of a body only widen (merged with those it was last
//      settled with), so a body sees few distinct input types in all;
//   3. a budget on region inferences backs both up against pathological
//      graphs; once spent, regions keep the types they have.
struct RegionKey {
  std::vector<const Value *> values;
  std::vector<Type> types;
  bool operator==(const RegionKey &) const = default;
};

struct ReinferState {
  int depth = 0; // region-op inferences in progress
  int64_t budget = 0;
  std::unordered_map<const Graph *, RegionKey> inferred;
  std::unordered_map<const Graph *, std::vector<Type>> settled;
};
thread_local ReinferState tState;
constexpr int64_t kRegionBudget = 1 << 14;

// Marks one region op's inference; the outermost one owns the memo.
class ReinferScope {
public:
  ReinferScope() {
    if (tState.depth++ == 0) tState.budget = kRegionBudget;
  }
  ~ReinferScope() {
    if (--tState.depth == 0) {
      tState.inferred.clear();
      tState.settled.clear();
    }
  }
  ReinferScope(const ReinferScope &) = delete;
  ReinferScope &operator=(const ReinferScope &) = delete;
};

bool isWithin(const Graph *g, const Graph *region) {
  for (; g; g = g->parent())
    if (g == region) return true;
  return false;
}

// Region inputs, then every outer value read in the region or below it.
RegionKey regionKey(Graph &region) {
  RegionKey key;
  for (const Value *v : region.inputs()) key.values.push_back(v);
  region.walk([&](Graph &g) {
    for (auto &n : g.nodes())
      for (const Value *v : n->inputs())
        if (v && !isWithin(v->owner(), &region)) key.values.push_back(v);
  });
  for (const Value *v : key.values) key.types.push_back(v->type());
  return key;
}

// Step 3 of the header. Nested region ops re-infer their own regions when
// their node is inferred, so this does not descend itself. Errors are
// dropped: the region was already inferred once as declared, and a
// refinement must not turn a valid model into a rejected one.
void reinferRegion(Graph &region) {
  RegionKey key = regionKey(region);
  auto it = tState.inferred.find(&region);
  if (it != tState.inferred.end() && it->second == key) return;
  if (tState.budget <= 0) return;
  --tState.budget;
  for (auto &n : region.nodes()) (void)inferNode(*n);
  tState.inferred[&region] = std::move(key);
}

// Step 2 of the header: carried values enter the body as inputs
// [firstIn, firstIn + n) and leave it as outputs [firstOut, firstOut + n).
void settleCarried(Graph &body, size_t firstIn, size_t firstOut, std::vector<Type> types) {
  constexpr int kMaxRounds = 4;
  // Widen from the types the body was last settled with (see above).
  if (auto it = tState.settled.find(&body); it != tState.settled.end())
    for (size_t i = 0; i < types.size() && i < it->second.size(); ++i)
      if (it->second[i].kind() == types[i].kind()) types[i] = mergeTypes(it->second[i], types[i]);
  struct Remember {
    Graph &body;
    size_t firstIn, n;
    ~Remember() {
      std::vector<Type> &s = tState.settled[&body];
      s.clear();
      for (size_t i = 0; i < n; ++i) s.push_back(body.inputs()[firstIn + i]->type());
    }
  } remember{body, firstIn, types.size()};
  for (int round = 0;; ++round) {
    for (size_t i = 0; i < types.size(); ++i) setRegionInput(body, firstIn + i, types[i]);
    reinferRegion(body);
    bool widened = false;
    for (size_t i = 0; i < types.size(); ++i) {
      Type w = mergeTypes(types[i], body.outputs()[firstOut + i]->type());
      if (!(w == types[i])) {
        types[i] = std::move(w);
        widened = true;
      }
    }
    if (!widened) return;
    if (round + 1 == kMaxRounds) {
      for (size_t i = 0; i < types.size(); ++i)
        setRegionInput(body, firstIn + i, withoutShape(types[i]));
      reinferRegion(body);
      return;
    }
  }
}

// The type of a carried value after the loop: the body's output (what any
// iteration leaves), covering the initial value when the kinds agree.
Type carriedResultType(const Type &bodyInput, const Type &bodyOutput) {
  return bodyInput.kind() == bodyOutput.kind() ? mergeTypes(bodyOutput, bodyInput) : bodyOutput;
}

// A per-iteration type stacked along a new axis of extent `extent`.
Type stackedType(const Type &perIteration, int64_t axis, Dim extent) {
  if (!perIteration.isTensor() || !perIteration.shape().rankKnown)
    return unrankedLike(perIteration);
  Shape s = perIteration.shape();
  auto a = normalizeAxis(axis, s.rank() + 1);
  if (!a.ok()) return unrankedLike(perIteration);
  s.dims.insert(s.dims.begin() + *a, extent);
  return Type::tensor(perIteration.dtype(), s);
}

// Outputs of unknown rank, for region ops whose region does not fit the node
// (the kernel reports that at run time with a precise message).
Status unknownOutputs(InferContext &ctx) {
  DType d = ctx.numInputs() > 0 && ctx.has(0) ? ctx.inputDType(0) : DType::F32;
  for (int i = 0; i < ctx.numOutputs(); ++i) ctx.setOutput(i, d, Shape::unranked());
  return Status::success();
}

// ---- region ops --------------------------------------------------------------------

Status inferIf(InferContext &ctx) {
  ReinferScope scope;
  Graph *thenG = ctx.node().getGraph("then_branch");
  Graph *elseG = ctx.node().getGraph("else_branch");
  if (!thenG || !elseG) return unknownOutputs(ctx);
  reinferRegion(*thenG);
  reinferRegion(*elseG);
  for (int i = 0; i < ctx.numOutputs(); ++i) {
    const size_t k = static_cast<size_t>(i);
    const Value *t = k < thenG->outputs().size() ? thenG->outputs()[k] : nullptr;
    const Value *e = k < elseG->outputs().size() ? elseG->outputs()[k] : nullptr;
    if (t && e)
      ctx.setOutput(i, mergeTypes(t->type(), e->type()));
    else
      ctx.setOutput(i, t ? t->type() : e ? e->type() : Type::tensor(DType::F32, Shape::unranked()));
  }
  return Status::success();
}

// A fused group yields its region's outputs; the region's inputs mirror
// the node's, so their types are refreshed from them first.
Status inferFused(InferContext &ctx) {
  ReinferScope scope;
  Graph *body = ctx.node().getGraph("body");
  if (!body || body->outputs().size() != static_cast<size_t>(ctx.numOutputs()))
    return unknownOutputs(ctx);
  for (size_t i = 0; i < body->inputs().size() && i < ctx.node().inputs().size(); ++i)
    if (const Value *in = ctx.node().inputs()[i]) body->inputs()[i]->setType(in->type());
  reinferRegion(*body);
  for (int i = 0; i < ctx.numOutputs(); ++i)
    ctx.setOutput(i, body->outputs()[static_cast<size_t>(i)]->type());
  return Status::success();
}

// Body inputs: (iteration i64[], condition bool[], carried...); outputs:
// (condition, carried..., scan outputs...).
Status inferLoop(InferContext &ctx) {
  ReinferScope scope;
  Graph *body = ctx.node().getGraph("body");
  const int numCarried = std::max(0, ctx.numInputs() - 2);
  const int numScan = ctx.numOutputs() - numCarried;
  if (!body || numScan < 0 || body->inputs().size() != static_cast<size_t>(2 + numCarried) ||
      body->outputs().size() != static_cast<size_t>(1 + numCarried + numScan))
    return unknownOutputs(ctx);

  if (isVague(body->inputs()[0]->type()))
    setRegionInput(*body, 0, Type::tensor(DType::I64, Shape{}));
  if (isVague(body->inputs()[1]->type()))
    setRegionInput(*body, 1, Type::tensor(DType::Bool, Shape{}));
  std::vector<Type> carried;
  for (int i = 0; i < numCarried; ++i) {
    const Type &declared = body->inputs()[2 + i]->type();
    carried.push_back(ctx.has(2 + i) ? refinedInputType(declared, ctx.inputType(2 + i)) : declared);
  }
  settleCarried(*body, 2, 1, std::move(carried));

  for (int i = 0; i < numCarried; ++i)
    ctx.setOutput(i,
                  carriedResultType(body->inputs()[2 + i]->type(), body->outputs()[1 + i]->type()));
  // The trip count is only known at run time (the condition may stop early).
  for (int k = 0; k < numScan; ++k)
    ctx.setOutput(numCarried + k,
                  stackedType(body->outputs()[1 + numCarried + k]->type(), 0, Dim::unknown()));
  return Status::success();
}

// Per-scan-input (or output) axes, zeros when absent or malformed.
std::vector<int64_t> scanAxes(const Node &n, const char *name, int count) {
  std::vector<int64_t> v = n.getInts(name);
  if (static_cast<int>(v.size()) != count) v.assign(count, 0);
  return v;
}

// Body inputs: (states..., one slice of each scan input); outputs:
// (states..., per-iteration scan outputs...).
Status inferScan(InferContext &ctx) {
  ReinferScope scope;
  const Node &n = ctx.node();
  Graph *body = n.getGraph("body");
  const int numScanIn =
      n.hasAttr("num_scan_inputs") ? static_cast<int>(n.getInt("num_scan_inputs")) : 0;
  const int numState = ctx.numInputs() - numScanIn;
  const int numScanOut = ctx.numOutputs() - numState;
  if (!body || numScanIn < 1 || numState < 0 || numScanOut < 0 ||
      body->inputs().size() != static_cast<size_t>(numState + numScanIn) ||
      body->outputs().size() != static_cast<size_t>(numState + numScanOut))
    return unknownOutputs(ctx);

  const std::vector<int64_t> inAxes = scanAxes(n, "scan_input_axes", numScanIn);
  const std::vector<int64_t> outAxes = scanAxes(n, "scan_output_axes", numScanOut);
  Dim length = Dim::unknown();
  for (int j = 0; j < numScanIn; ++j) {
    const int input = numState + j;
    if (!ctx.has(input)) continue;
    Type slice = unrankedLike(ctx.inputType(input));
    const Shape &s = ctx.inputShape(input);
    if (ctx.inputType(input).isTensor() && s.rankKnown) {
      if (auto a = normalizeAxis(inAxes[j], s.rank()); a.ok()) {
        Shape sliced = s;
        if (j == 0) length = s.dims[*a];
        sliced.dims.erase(sliced.dims.begin() + *a);
        slice = Type::tensor(ctx.inputDType(input), sliced);
      }
    }
    setRegionInput(*body, input, refinedInputType(body->inputs()[input]->type(), slice));
  }
  std::vector<Type> states;
  for (int i = 0; i < numState; ++i) {
    const Type &declared = body->inputs()[i]->type();
    states.push_back(ctx.has(i) ? refinedInputType(declared, ctx.inputType(i)) : declared);
  }
  settleCarried(*body, 0, 0, std::move(states));

  for (int i = 0; i < numState; ++i)
    ctx.setOutput(i, carriedResultType(body->inputs()[i]->type(), body->outputs()[i]->type()));
  for (int k = 0; k < numScanOut; ++k)
    ctx.setOutput(numState + k,
                  stackedType(body->outputs()[numState + k]->type(), outAxes[k], length));
  return Status::success();
}

// Body inputs take one element of each sequence operand (tensor operands
// whole); each output is the sequence of the body's per-iteration values.
Status inferSequenceMap(InferContext &ctx) {
  ReinferScope scope;
  Graph *body = ctx.node().getGraph("body");
  if (!body || body->inputs().size() != static_cast<size_t>(ctx.numInputs()) ||
      body->outputs().size() != static_cast<size_t>(ctx.numOutputs()))
    return unknownOutputs(ctx);
  for (int j = 0; j < ctx.numInputs(); ++j) {
    if (!ctx.has(j)) continue;
    const Type &operand = ctx.inputType(j);
    const Type perIteration = operand.kind() == Type::Kind::Sequence ? operand.element() : operand;
    setRegionInput(*body, j, refinedInputType(body->inputs()[j]->type(), perIteration));
  }
  reinferRegion(*body);
  for (int k = 0; k < ctx.numOutputs(); ++k) {
    const Type &t = body->outputs()[k]->type();
    ctx.setOutput(k, Type::sequence(t.isTensor() ? t : unrankedLike(t)));
  }
  return Status::success();
}

// ---- sequences ------------------------------------------------------------------

// The element type of a sequence operand; an operand typed as something
// else (a loosely declared input) gives a tensor of unknown rank.
Type elementOf(const Type &t) {
  if (t.kind() == Type::Kind::Sequence) return t.element();
  return unrankedLike(t);
}

Status inferSequenceConstruct(InferContext &ctx) {
  Type elem = ctx.inputType(0);
  for (int i = 1; i < ctx.numInputs(); ++i)
    if (ctx.has(i)) elem = mergeTypes(elem, ctx.inputType(i));
  ctx.setOutput(0, Type::sequence(elem.isTensor() ? elem : unrankedLike(elem)));
  return Status::success();
}

Status inferSequenceEmpty(InferContext &ctx) {
  DType d = DType::F32;
  if (ctx.node().hasAttr("dtype")) {
    int64_t code = ctx.node().getInt("dtype");
    auto dt = dtypeFromOnnx(static_cast<int>(code));
    if (!dt) return ctx.error("dtype ", code, " is not a supported element type");
    d = *dt;
  }
  ctx.setOutput(0, Type::sequence(Type::tensor(d, Shape::unranked())));
  return Status::success();
}

Status inferSequenceAt(InferContext &ctx) {
  ctx.setOutput(0, elementOf(ctx.inputType(0)));
  return Status::success();
}

// An inserted tensor widens the element type; a sequence whose element
// shape is open (e.g. from SequenceEmpty) takes the tensor's dtype.
Status inferSequenceInsert(InferContext &ctx) {
  Type elem = elementOf(ctx.inputType(0));
  const Type &t = ctx.inputType(1);
  Type merged = isVague(elem) ? unrankedLike(t) : mergeTypes(elem, t);
  ctx.setOutput(0, Type::sequence(merged.isTensor() ? merged : unrankedLike(merged)));
  return Status::success();
}

Status inferSequenceErase(InferContext &ctx) {
  ctx.setOutput(0, Type::sequence(elementOf(ctx.inputType(0))));
  return Status::success();
}

Status inferSequenceLength(InferContext &ctx) {
  ctx.setOutput(0, DType::I64, Shape{});
  return Status::success();
}

// The extent of one piece of SplitToSequence along the split axis, when it
// is the same for every piece and known.
Dim splitPieceDim(const InferContext &ctx, const Dim &whole) {
  if (!ctx.has(1)) return Dim(1);
  auto split = ctx.constantInts(1);
  if (!split || split->empty()) return Dim::unknown();
  const Tensor *t = ctx.constantInput(1);
  int64_t first = (*split)[0];
  if (t->rank() == 0) {
    bool divides = whole.isStatic() && first > 0 && whole.value() % first == 0;
    return divides ? Dim(first) : Dim::unknown();
  }
  bool allEqual = std::all_of(split->begin(), split->end(), [&](int64_t v) { return v == first; });
  return allEqual ? Dim(first) : Dim::unknown();
}

Status inferSplitToSequence(InferContext &ctx) {
  const Type &x = ctx.inputType(0);
  const Shape &s = ctx.inputShape(0);
  if (!x.isTensor() || !s.rankKnown) {
    ctx.setOutput(0, Type::sequence(unrankedLike(x)));
    return Status::success();
  }
  auto resolved = normalizeAxis(ctx.node().getInt("axis"), s.rank());
  if (!resolved.ok()) return ctx.error(resolved.error().message);
  const int64_t axis = *resolved;
  Shape piece = s;
  if (!ctx.has(1) && ctx.node().getInt("keepdims") == 0)
    piece.dims.erase(piece.dims.begin() + axis);
  else
    piece.dims[axis] = splitPieceDim(ctx, s.dims[axis]);
  ctx.setOutput(0, Type::sequence(Type::tensor(x.dtype(), piece)));
  return Status::success();
}

Status inferConcatFromSequence(InferContext &ctx) {
  Type elem = elementOf(ctx.inputType(0));
  const bool newAxis = ctx.node().getInt("new_axis") != 0;
  const Shape &s = elem.shape();
  if (!s.rankKnown) {
    ctx.setOutput(0, unrankedLike(elem));
    return Status::success();
  }
  auto axis = normalizeAxis(ctx.node().getInt("axis"), s.rank() + (newAxis ? 1 : 0));
  if (!axis.ok()) { // declared element shapes are often loose: stay lenient
    ctx.setOutput(0, unrankedLike(elem));
    return Status::success();
  }
  Shape out = s;
  if (newAxis)
    out.dims.insert(out.dims.begin() + *axis, Dim::unknown());
  else
    out.dims[*axis] = Dim::unknown();
  ctx.setOutput(0, Type::tensor(elem.dtype(), out));
  return Status::success();
}

// ---- optionals ---------------------------------------------------------------------

Status inferOptional(InferContext &ctx) {
  if (ctx.numInputs() > 0 && ctx.has(0)) {
    ctx.setOutput(0, Type::optional(ctx.inputType(0)));
    return Status::success();
  }
  const Attribute *a = ctx.node().attr("type");
  bool typed = a && a->kind == AttrKind::Type;
  ctx.setOutput(0, Type::optional(typed ? a->type : Type::tensor(DType::F32, Shape::unranked())));
  return Status::success();
}

Status inferOptionalHasElement(InferContext &ctx) {
  ctx.setOutput(0, DType::Bool, Shape{});
  return Status::success();
}

// A non-optional operand passes through (opset 18).
Status inferOptionalGetElement(InferContext &ctx) {
  const Type &t = ctx.inputType(0);
  ctx.setOutput(0, t.kind() == Type::Kind::Optional ? t.element() : t);
  return Status::success();
}

} // namespace

void registerControlInference(InferTable &t) {
  t.add(OpKind::If, inferIf);
  t.add(OpKind::Fused, inferFused);
  t.add(OpKind::Loop, inferLoop);
  t.add(OpKind::Scan, inferScan);
  t.add(OpKind::SequenceMap, inferSequenceMap);
  t.add(OpKind::SequenceConstruct, inferSequenceConstruct);
  t.add(OpKind::SequenceEmpty, inferSequenceEmpty);
  t.add(OpKind::SequenceAt, inferSequenceAt);
  t.add(OpKind::SequenceInsert, inferSequenceInsert);
  t.add(OpKind::SequenceErase, inferSequenceErase);
  t.add(OpKind::SequenceLength, inferSequenceLength);
  t.add(OpKind::SplitToSequence, inferSplitToSequence);
  t.add(OpKind::ConcatFromSequence, inferConcatFromSequence);
  t.add(OpKind::Optional, inferOptional);
  t.add(OpKind::OptionalHasElement, inferOptionalHasElement);
  t.add(OpKind::OptionalGetElement, inferOptionalGetElement);
}

} // namespace kiln
