// The Kernel IR lowerings of graph ops, by op (DESIGN.md, "How an op gets
// compiled", way 1). Each lowering fills a DispatchBuilder (dispatch.h) for
// one node: its output shapes as shape values and its kernels. A lowering
// covers every form of its op that the op table allows (attributes, ranks,
// dtypes), or returns an error naming the form it does not cover, which the
// compiler reports as a compile error at that node.
//
// One family of ops per file (index_ops.cpp, ...); registry.cpp lists them.
#pragma once

#include "ir/op.h"
#include "lower/dispatch.h"
#include "support/status.h"

namespace kiln::lower {

using LowerFn = Status (*)(DispatchBuilder &d);

// The lowering of `op`, or null when the op is compiled another way (a
// microkernel, a host op, a decomposition) or not at all.
LowerFn kernelLoweringOf(OpKind op);

// ---- the lowerings, by family (one file each) ----------------------------------

// index_ops.cpp: computed and data-dependent indices.
Status lowerTrilu(DispatchBuilder &d);

} // namespace kiln::lower
