// The attention driver: splits the problems into tiles of Q rows, spreads
// them over the pool and runs the ISA's tile function on each.
#include "kernels/attention.h"

#include "kernels/attention_tile.h"
#include "runtime/thread_pool.h"

#include <algorithm>

namespace kiln::kernels {

namespace {

detail::AttentionTileFn tileFor(GemmIsa isa) {
  switch (resolveGemmIsa(isa)) {
  case GemmIsa::kAvx512:
    return detail::attentionTileAvx512();
  case GemmIsa::kAvx2:
    return detail::attentionTileAvx2();
  default:
    return detail::attentionTilePortable();
  }
}

// Tile height: the largest (K/V blocks are read once per tile) that still
// gives every thread a few tiles, so a batch-1 model with few heads
// scales too.
int64_t tileRows(const AttentionProblem &p, int threads) {
  int64_t rows = detail::kAttentionTileRows;
  while (rows > 8 && p.batches * ((p.sq + rows - 1) / rows) < 4 * int64_t(threads)) rows /= 2;
  return rows;
}

} // namespace

void attention(const AttentionProblem &p, runtime::ThreadPool &pool, GemmIsa isa) {
  if (p.batches <= 0 || p.sq <= 0 || p.dv <= 0) return;
  const detail::AttentionTileFn tile = tileFor(isa);
  const int64_t rows = tileRows(p, pool.threads());
  const int64_t tiles = (p.sq + rows - 1) / rows;
  pool.parallelFor(p.batches * tiles, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t b = t / tiles, row0 = (t % tiles) * rows;
      tile(p, b, row0, std::min(rows, p.sq - row0));
    }
  });
}

} // namespace kiln::kernels
