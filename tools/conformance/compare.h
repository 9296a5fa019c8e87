// Comparing run-time values against expected ones, ONNX backend-test style:
// floats pass when |actual - expected| <= atol + rtol * |expected| (NaN
// matches NaN, infinities must match exactly); integers, bools and strings
// must be equal.
#pragma once

#include "support/value.h"

#include <optional>
#include <string>

namespace kiln::conformance {

struct Tolerance {
  double rtol = 1e-3;
  double atol = 1e-5;
};

// Empty when they match; otherwise what differs first ("element 17: 0.5 vs 0.51").
std::optional<std::string> compareValues(const RtValue &actual, const RtValue &expected,
                                         const Tolerance &tol);

} // namespace kiln::conformance
