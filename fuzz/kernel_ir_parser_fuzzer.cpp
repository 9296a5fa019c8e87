// libFuzzer target for the Kernel IR text parser: arbitrary text gives
// kernels or an error, never a crash. Whatever parses must verify without
// crashing and round-trip: print -> parse -> print is byte-identical.
#include "kernel/parser.h"
#include "kernel/printer.h"
#include "kernel/verifier.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view text(reinterpret_cast<const char *>(data), size);
  auto kernels = kiln::parseKernels(text, "fuzz.kir");
  if (!kernels.ok()) return 0;
  for (const kiln::kir::Kernel &k : *kernels) (void)kiln::verifyKernel(k);
  std::string first = kiln::printKernels(*kernels);
  auto again = kiln::parseKernels(first, "printed.kir");
  if (!again.ok()) {
    std::fprintf(stderr, "printed text does not parse: %s\n%s\n", again.error().message.c_str(),
                 first.c_str());
    std::abort();
  }
  if (kiln::printKernels(*again) != first) {
    std::fprintf(stderr, "print -> parse -> print is not stable:\n%s\n", first.c_str());
    std::abort();
  }
  return 0;
}
