// The pipelines, top to bottom. Why this order:
//  - decompose first, at every level (-O0 too): the backends compile the
//    ops it leaves, not the ones it rewrites (Gemm, Einsum, the losses);
//  - legalize-precision next, at every level: without it an f16 model does
//    not compile, and the casts it adds (around what decompose produced
//    too) are then folded and fused like any others;
//  - canonicalize first, so Identity/Cast noise and view ops in shape
//    subgraphs are gone before folding looks at them;
//  - fold-constants then folds what depends on constants and static dims;
//    dce drops what both left unread;
//  - at -O2, cse merges what the exporter duplicated (the same Shape or
//    constant computed per layer) before the pattern passes, so a shared
//    value counts as one use; fuse-batchnorm runs before the recognizers so
//    that their chains see plain Conv outputs; a second canonicalize cleans
//    up the x*1 and view ops that the rewrites expose, and a last dce
//    removes what cse and folding left.
#include "passes/pipeline.h"

#include <initializer_list>

namespace kiln {

std::vector<std::string> pipelineForLevel(int level) {
  std::vector<std::string> passes;
  auto add = [&](std::initializer_list<const char *> names) {
    for (const char *name : names) passes.emplace_back(name);
  };
  // Every level: the backend compiles only what decompose leaves, and
  // 16-bit float models need their f32-only ops widened to compile at all
  // (legalize-precision), so neither is an optimization.
  add({"decompose", "legalize-precision"});
  if (level <= 0) return passes;
  // -O1: cheap cleanups that every later stage relies on.
  add({"canonicalize", "fold-constants", "dce"});
  if (level == 1) return passes;
  // -O2: graph rewrites that raise the level of the ops.
  add({"cse", "fuse-batchnorm"});
  add({"recognize-layernorm", "recognize-gelu", "recognize-hardswish", "recognize-softmax"});
  add({"canonicalize", "fold-constants", "dce"});
  if (level == 2) return passes;
  // -O3: fusion, once the graph is in its final op vocabulary. Attention
  // first: its scale, mask add and softmax are elementwise and reduction
  // nodes that the later fusions would otherwise split between them.
  // Epilogues next, so a conv claims its activation before elementwise
  // chains form.
  add({"recognize-attention", "fuse-epilogues", "fuse-elementwise"});
  return passes;
}

} // namespace kiln
