// Which instruction set the handwritten kernels (GEMM, epilogues, conv,
// pooling) use. Each kernel family has one implementation per ISA, compiled
// with that ISA's flags in its own file and only called after a run-time
// check of the CPU; kAuto picks the fastest supported one. Tests pin each
// ISA in turn so every path is checked on one machine.
#pragma once

namespace kiln::kernels {

enum class GemmIsa { kAuto, kPortable, kAvx2, kAvx512 };
const char *gemmIsaName(GemmIsa isa);
// True when this CPU can run `isa` (kAuto and kPortable always can).
bool gemmIsaSupported(GemmIsa isa);
// The fastest ISA this CPU supports.
GemmIsa bestGemmIsa();
// `isa` itself when supported, else bestGemmIsa() (kAuto included).
GemmIsa resolveGemmIsa(GemmIsa isa);

} // namespace kiln::kernels
