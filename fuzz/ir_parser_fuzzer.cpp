// libFuzzer target for the Graph IR text parser: arbitrary text gives a model
// or an error, never a crash. Whatever parses must also verify without
// crashing and round-trip: print -> parse -> print is byte-identical.
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view text(reinterpret_cast<const char *>(data), size);
  auto model = kiln::parseModel(text, "fuzz.kir");
  if (!model.ok()) return 0;
  (void)kiln::verifyModel(*model);
  std::string first = kiln::printModel(*model);
  auto again = kiln::parseModel(first, "printed.kir");
  if (!again.ok()) {
    std::fprintf(stderr, "printed text does not parse: %s\n%s\n", again.error().message.c_str(),
                 first.c_str());
    std::abort();
  }
  if (kiln::printModel(*again) != first) {
    std::fprintf(stderr, "print -> parse -> print is not stable:\n%s\n", first.c_str());
    std::abort();
  }
  (void)kiln::printModel(*model, kiln::PrintOptions{true});
  return 0;
}
