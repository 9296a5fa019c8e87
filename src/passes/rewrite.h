// Small rewriting helpers shared by graph passes: replacing every use of a
// value and questions about ops that several passes ask (may it be merged or
// evaluated ahead of time?).
#pragma once

#include "ir/graph.h"

namespace kiln {

// Makes every node input and graph output that refers to `from` refer to `to`
// instead, in `graph` and every region below it. Regions may read values of
// enclosing graphs, so callers pass the graph that owns `from` (or the top).
// Returns the number of references replaced.
int replaceAllUsesWith(Graph &graph, Value *from, Value *to);

// False for ops whose result differs from run to run (random draws): they may
// be neither merged nor folded.
bool isDeterministic(OpKind op);

} // namespace kiln
