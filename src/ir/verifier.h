// The Graph IR verifier: checks the invariants every pass may assume and must
// keep. Tests run it after every pass; the importer and the parser's callers
// run it on what they build. The rules:
//
//  1. A node's input and output counts are within its op's table row.
//  2. Every attribute is declared for the op, with the declared kind, and
//     holds something (a defined tensor, a graph); required ones are present.
//  3. Every input is defined before its use: by an earlier node or input of
//     the same graph, or of an enclosing graph before the node that holds the
//     region. Values of sibling or inner regions are not visible.
//  4. Every value is defined once (a region held by two nodes defines its
//     values twice).
//  5. A region's parent() is the graph of the node holding it; regions are
//     verified recursively with the same rules.
//  6. Every graph output is a value visible at the end of the graph.
//
// Errors name the place: "node 'conv1' (Conv): has 1 input, expected 2 to 3";
// inside regions the path leads in: "node 'if' (If): region then_branch: ...".
#pragma once

#include "ir/graph.h"
#include "support/status.h"

namespace kiln {

// Verifies a graph. For a region verified on its own, values of its enclosing
// graphs are accepted without checking where they are defined (that needs
// the enclosing graph: verify from the top instead).
Status verifyGraph(const Graph &graph);
Status verifyModel(const Model &model);

} // namespace kiln
