#include "ir/infer/infer.h"

#include "ir/infer/families.h"

namespace kiln {

const Type &InferContext::inputType(int i) const {
  static const Type kAbsent = Type::tensor(DType::F32, Shape::unranked());
  Value *v = node_.input(i);
  return v ? v->type() : kAbsent;
}

const Tensor *InferContext::constantInput(int i) const {
  Value *v = node_.input(i);
  if (!v || !v->producer() || v->producer()->op() != OpKind::Constant) return nullptr;
  const Attribute *a = v->producer()->attr("value");
  return a && a->kind == AttrKind::Tensor ? &a->t : nullptr;
}

std::optional<std::vector<int64_t>> InferContext::constantInts(int i) const {
  const Tensor *t = constantInput(i);
  if (!t || !(isInt(t->dtype()))) return std::nullopt;
  std::vector<int64_t> v(t->numel());
  for (int64_t k = 0; k < t->numel(); ++k) v[k] = t->getInt(k);
  return v;
}

const InferTable &inferTable() {
  static const InferTable table = [] {
    InferTable t;
    registerElementwiseInference(t);
    registerReduceInference(t);
    registerNnInference(t);
    registerShapeOpsInference(t);
    registerTensorInference(t);
    registerControlInference(t);
    registerSignalInference(t);
    registerRnnInference(t);
    registerSamplingInference(t);
    return t;
  }();
  return table;
}

Status inferNode(Node &node) {
  if (InferFn fn = inferTable().find(node.op())) {
    InferContext ctx(node);
    return fn(ctx);
  }
  DType d = node.input(0) ? node.input(0)->type().dtype() : DType::F32;
  for (Value *o : node.outputs())
    if (o) o->setType(Type::tensor(d, Shape::unranked()));
  return Status::success();
}

Status inferGraph(Graph &graph) {
  // Ops with regions (If, Loop, Scan, SequenceMap) infer their regions
  // themselves, after typing the region inputs: descending here as well
  // would redo that work at every level of nesting.
  for (auto &n : graph.nodes()) KILN_RETURN_IF_ERROR(inferNode(*n));
  return Status::success();
}

Expected<Shape> broadcastShapes(const Shape &a, const Shape &b) {
  if (!a.rankKnown || !b.rankKnown) return Shape::unranked();
  int64_t rank = std::max(a.rank(), b.rank());
  Shape out;
  out.dims.resize(rank);
  for (int64_t i = 0; i < rank; ++i) {
    int64_t ia = i - (rank - a.rank()), ib = i - (rank - b.rank());
    Dim da = ia >= 0 ? a.dims[ia] : Dim(1);
    Dim db = ib >= 0 ? b.dims[ib] : Dim(1);
    if (da.isStatic() && da.value() == 1)
      out.dims[i] = db;
    else if (db.isStatic() && db.value() == 1)
      out.dims[i] = da;
    else if (da == db)
      out.dims[i] = da;
    else if (da.isStatic() && db.isStatic())
      return makeError("shapes ", a.str(), " and ", b.str(), " do not broadcast (dim ", i, ": ",
                       da.value(), " vs ", db.value(), ")");
    else if (da.isStatic())
      out.dims[i] = da; // the other must be 1 or equal at run time
    else if (db.isStatic())
      out.dims[i] = db;
    else
      out.dims[i] = Dim::unknown();
  }
  return out;
}

Expected<int64_t> normalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return makeError("axis ", axis, " is out of range for rank ", rank);
  return axis < 0 ? axis + rank : axis;
}

std::optional<int64_t> staticNumel(const Shape &s) {
  if (!s.isStatic()) return std::nullopt;
  int64_t n = 1;
  for (const Dim &d : s.dims) n *= d.value();
  return n;
}

} // namespace kiln
