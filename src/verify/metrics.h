// Error metrics between a tensor computed by the target and the same tensor
// computed by a golden reference, and the per-dtype tolerances that decide
// whether they agree. Used by `kiln verify` for model outputs and, under
// --bisect, for every intermediate value both runs have.
//
// A float element agrees when |got - ref| <= atol + rtol * max(|ref|, rms),
// rms being the root mean square of the reference tensor's finite elements.
// That is numpy's allclose rule except for elements far smaller than the
// tensor's typical size: the rounding error of a sum scales with its terms,
// not with a result that cancelled to near zero, so there the tensor's scale
// stands in (plain allclose flags honest float reordering in nearly every
// layer of a deep convolutional model). NaN agrees only with NaN, +Inf only
// with +Inf, -Inf only with -Inf. Integer, bool and string tensors compare
// element by element (exactly, by default).
#pragma once

#include "support/tensor.h"

#include <cstdint>
#include <string>

namespace kiln::verify {

struct Tolerance {
  double rtol = 0;
  double atol = 0;
};

// The default for a dtype: f64 1e-7/1e-9, f32 5e-4/1e-5 (see metrics.cpp for
// why), f16 and bf16 1e-2/1e-3 and 2e-2/1e-2, everything else exact.
Tolerance defaultTolerance(DType dtype);

struct Metrics {
  // The comparison could not run (different dtypes or shapes, non-tensor
  // values); the other fields are meaningless then and the value fails.
  std::string error;
  int64_t numel = 0;
  double maxAbsErr = 0; // over elements finite on both sides
  double mae = 0;       // mean |got - ref| over the same elements
  double rmse = 0;
  double relL2 = 0;             // ||got - ref|| / ||ref|| (||got - ref|| when ||ref|| = 0)
  double cosine = 1;            // <got, ref> / (|got| |ref|); 1 when both are zero, 0 when one is
  int64_t outsideTolerance = 0; // elements that do not agree (NaN/Inf mismatches included)
  int64_t nanGot = 0, nanRef = 0, infGot = 0, infRef = 0;
  bool pass = false;
};

// Compares `got` with `ref` under `tol`.
Metrics compareTensors(const Tensor &got, const Tensor &ref, Tolerance tol);

} // namespace kiln::verify
