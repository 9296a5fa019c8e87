// libFuzzer target for the ONNX importer: arbitrary bytes must give a model
// or an error, never a crash, a hang or a sanitizer report. A model that
// imports is also verified and printed, since both walk whatever the importer
// accepted.
#include "frontend/onnx/importer.h"
#include "ir/printer.h"
#include "ir/verifier.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string bytes(reinterpret_cast<const char *>(data), size);
  // External data is looked up in a directory that does not exist, so the
  // fuzzer cannot make the importer read arbitrary files.
  auto model = kiln::importOnnxBytes(bytes, "/nonexistent-kiln-fuzz-dir", "fuzz.onnx");
  if (model.ok()) {
    (void)kiln::verifyModel(*model);
    (void)kiln::printModel(*model);
  }
  return 0;
}
