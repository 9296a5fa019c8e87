// Type and shape inference for the recurrent layers RNN, GRU and LSTM.
// Y is [seq, dirs, batch, hidden] ([batch, seq, dirs, hidden] with layout 1);
// Y_h and Y_c are [dirs, batch, hidden] ([batch, dirs, hidden]). seq and
// batch come from X (symbols kept), dirs from the direction attribute, hidden
// from hidden_size or else R's last dim. Every output has X's dtype.
#include "ir/infer/families.h"
#include "ir/infer/infer.h"

namespace kiln {

namespace {

// Dim i of input `slot` when its rank is known and the dim exists.
Dim dimOf(const InferContext &ctx, int slot, int64_t i) {
  if (!ctx.has(slot)) return Dim::unknown();
  const Shape &s = ctx.inputShape(slot);
  if (!s.rankKnown || i >= s.rank()) return Dim::unknown();
  return s.dims[i];
}

Status inferRecurrent(InferContext &ctx) {
  const Node &node = ctx.node();
  DType dtype = ctx.inputDType(0);
  const Shape &x = ctx.inputShape(0);
  if (x.rankKnown && x.rank() != 3) return ctx.error("X must have rank 3, got ", x.str());
  bool batchFirst = node.getInt("layout") == 1;
  std::string direction = node.getString("direction");
  Dim dirs = direction == "bidirectional" ? Dim(2) : Dim(1);
  Dim seq = dimOf(ctx, 0, batchFirst ? 1 : 0);
  Dim batch = dimOf(ctx, 0, batchFirst ? 0 : 1);
  Dim hidden = node.hasAttr("hidden_size") ? Dim(node.getInt("hidden_size")) : dimOf(ctx, 2, 2);

  Shape y = batchFirst ? Shape({batch, seq, dirs, hidden}) : Shape({seq, dirs, batch, hidden});
  Shape state = batchFirst ? Shape({batch, dirs, hidden}) : Shape({dirs, batch, hidden});
  ctx.setOutput(0, dtype, y);
  for (int i = 1; i < ctx.numOutputs(); ++i) ctx.setOutput(i, dtype, state);
  return Status::success();
}

} // namespace

void registerRnnInference(InferTable &t) {
  t.add(OpKind::RNN, inferRecurrent);
  t.add(OpKind::GRU, inferRecurrent);
  t.add(OpKind::LSTM, inferRecurrent);
}

} // namespace kiln
