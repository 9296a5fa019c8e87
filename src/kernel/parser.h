// The parser of the Kernel IR's text form, the inverse of kernel/printer.h.
// It checks what it needs to build the kernel (syntax, opcodes, element
// types, that every %name is a declared buffer, param or var of the right
// kind, number ranges); everything else (SSA scoping, operand types, loop
// placement) is the verifier's job, so tests can write invalid kernels as
// text. It is safe on any input: errors are values ("file:line:col:
// message"), loop nesting is bounded, and nothing is sized by a number read
// from the text beyond kMaxKernelNumbers.
//
// Grammar (EBNF; `//` starts a comment that runs to the end of the line):
//
//   file     ::= { kernel }
//   kernel   ::= 'kernel' KERNEL '(' [ buffer { ',' buffer } ] ')'
//                [ 'params' '(' [ NAME { ',' NAME } ] ')' ]
//                [ 'vars' '(' [ var { ',' var } ] ')' ] block
//   buffer   ::= NAME ':' DTYPE [ 'out' ]
//   var      ::= NAME ':' DTYPE
//   block    ::= '{' { stmt } '}'
//   stmt     ::= VALUE '=' expr
//              | 'store' NAME '[' affine ']' ',' VALUE
//              | 'write' NAME ',' VALUE
//              | schedule LOOPVAR '=' '0' 'to' affine block
//   schedule ::= 'for' | 'parallel' | 'vector' '(' INT ')' | 'unroll' '(' INT ')'
//   expr     ::= 'const' literal ':' DTYPE
//              | 'load' NAME '[' affine ']'
//              | 'read' NAME
//              | UNARY VALUE ':' DTYPE                      (neg, exp, not, ...)
//              | BINARY VALUE ',' VALUE ':' DTYPE           (add, max, xor, ...)
//              | COMPARE VALUE ',' VALUE ':' DTYPE          (lt, ...; the operands' type)
//              | 'select' VALUE ',' VALUE ',' VALUE ':' DTYPE
//              | 'cast' VALUE ':' DTYPE 'to' DTYPE
//   affine   ::= term { '+' term }                         (a lone `0`: no terms)
//   term     ::= factor { '*' factor }                     (at most one of each kind)
//   factor   ::= INT | LOOPVAR | NAME                      (NAME: a param)
//   literal  ::= INT | FLOAT | [ '-' ] 'inf' | 'nan' | 'true' | 'false'
//
//   KERNEL   ::= '@' ID            NAME ::= '%' ID       (ID not of the form i<digits>)
//   VALUE    ::= '%' DIGITS        LOOPVAR ::= '%i' DIGITS   (no leading zeros)
//   ID       ::= [A-Za-z_] [A-Za-z0-9_.]*
//   INT      ::= [ '-' ] DIGITS    FLOAT ::= decimal with a '.' or an exponent
//
// Meaning: buffers, params and vars share one namespace. A load's and a
// store's type is their buffer's element type, a read's and a write's their
// var's. Kernel::numValues and numLoopVars become one more than the highest
// SSA number and loop variable defined.
#pragma once

#include "kernel/kernel_ir.h"
#include "support/status.h"

#include <string_view>
#include <vector>

namespace kiln {

// Loops nested deeper than this are rejected.
inline constexpr int kMaxKernelLoopDepth = 64;

// Exactly one kernel.
Expected<kir::Kernel> parseKernel(std::string_view text, std::string_view fileNameForErrors);
// Any number of kernels (printKernels' output).
Expected<std::vector<kir::Kernel>> parseKernels(std::string_view text,
                                                std::string_view fileNameForErrors);

} // namespace kiln
