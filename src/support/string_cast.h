// Cast between numbers and strings, as numpy does (str() of a value,
// float(text)): one implementation for the reference interpreter's Cast and
// the runtime's host op, so the two agree character for character.
//   - number -> string: the shortest digits that read back to the same
//     value, positional for 1e-4 <= |x| < 1e16 (always with a fraction part)
//     and scientific ("1e-05", "1.5e+16") otherwise; bools print True/False;
//   - string -> number: surrounding spaces, a leading '+', "nan", "inf",
//     "-Infinity" are accepted; "2.0" and "1e3" cast to integers as floats
//     (truncated, saturated); anything else is an error naming the element.
#pragma once

#include "support/status.h"
#include "support/tensor.h"

namespace kiln {

// Every element of `x` (any dtype) as text, into a string tensor of its shape.
Tensor numbersToStrings(const Tensor &x);
// Every string of `x` parsed as dtype `to` (not String).
Expected<Tensor> stringsToNumbers(const Tensor &x, DType to);

} // namespace kiln
