// One ONNX backend test case on disk: a directory with model.onnx and
// test_data_set_*/{input,output}_*.pb files (TensorProto, or SequenceProto /
// OptionalProto for sequence- and optional-typed values).
#pragma once

#include "support/value.h"
#include "ir/type.h"
#include "support/status.h"

#include <string>
#include <vector>

namespace kiln::conformance {

struct DataSet {
  std::string dir;
  std::vector<std::string> inputFiles;  // input_0.pb, input_1.pb ... in order
  std::vector<std::string> outputFiles; // output_0.pb ...
};

struct TestCase {
  std::string name; // "<suite>/<case dir>", e.g. "node/test_abs"
  std::string dir;
  std::vector<DataSet> dataSets;
};

// Finds test cases: a DIR holding model.onnx is one case; otherwise each
// subdirectory holding one is. Sorted by name.
Expected<std::vector<TestCase>> discoverCases(const std::string &dir);

// Reads one .pb value, parsing it as the kind `type` says.
Expected<RtValue> readValueFile(const std::string &path, const Type &type);

} // namespace kiln::conformance
