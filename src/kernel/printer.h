// The printer of the Kernel IR's text form, the inverse of kernel/parser.h
// (which holds the grammar). Text is how kernels are tested and dumped
// (DESIGN.md principle 2), so the output is canonical: one spelling per
// kernel, and printing, parsing and printing again gives the same bytes.
//
//   kernel @scale(%x: f32, %y: f32 out) params(%n) {
//     parallel %i0 = 0 to %n {
//       %0 = load %x[%i0]
//       %1 = const 0.5 : f32
//       %2 = mul %0, %1 : f32
//       store %y[%i0], %2
//     }
//   }
//
// SSA values and loop variables keep their numbers (%<N>, %i<N>), so a pass
// that deletes instructions leaves gaps rather than renumbering what a test
// refers to. Float constants print as the shortest text that reads back to
// the same value of the constant's type (the value the kernel computes with).
// The printer never fails: references out of range print as `%<bad buffer 7>`
// (text that does not parse), so invalid kernels can still be dumped.
#pragma once

#include "kernel/kernel_ir.h"

#include <string>
#include <string_view>
#include <vector>

namespace kiln {

// One kernel, ending in "}\n".
std::string printKernel(const kir::Kernel &kernel);
// Several kernels separated by blank lines; parseKernels reads it back.
std::string printKernels(const std::vector<kir::Kernel> &kernels);

// ---- Lexical conventions shared with the parser and the verifier -------------

// Names of kernels, buffers, params and vars: [A-Za-z_][A-Za-z0-9_.]*. A name
// of the form i<digits> would read as a loop variable, so it is not one
// (names starting with a digit, which would read as SSA values, already
// fail the first rule).
bool isKernelIrName(std::string_view s);

// The keyword of a schedule: "for", "parallel", "vector(8)", "unroll(4)".
std::string scheduleText(const kir::Schedule &schedule);

} // namespace kiln
