#include "test_case.h"

#include "frontend/onnx/proto_convert.h"

#include <onnx/onnx-data_pb.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace kiln::conformance {

namespace fs = std::filesystem;

namespace {

std::vector<std::string> numbered(const fs::path &dir, const std::string &prefix) {
  std::vector<std::string> files;
  for (int i = 0;; ++i) {
    fs::path p = dir / (prefix + std::to_string(i) + ".pb");
    if (!fs::exists(p)) break;
    files.push_back(p.string());
  }
  return files;
}

TestCase loadCase(const fs::path &dir) {
  TestCase c;
  c.dir = dir.string();
  c.name = dir.parent_path().filename().string() + "/" + dir.filename().string();
  std::vector<fs::path> sets;
  for (auto &e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0)
      sets.push_back(e.path());
  std::sort(sets.begin(), sets.end());
  for (auto &s : sets)
    c.dataSets.push_back({s.string(), numbered(s, "input_"), numbered(s, "output_")});
  return c;
}

Expected<std::string> readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return makeError(path, ": cannot open file");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Expected<RtValue> fromSequence(const onnx::SequenceProto &seq, const std::string &path) {
  std::vector<Tensor> items;
  if (seq.elem_type() != onnx::SequenceProto::TENSOR && seq.tensor_values_size() == 0 &&
      seq.elem_type() != onnx::SequenceProto::UNDEFINED)
    return makeError(path, ": only sequences of tensors are supported");
  for (const auto &tp : seq.tensor_values()) {
    KILN_ASSIGN_OR_RETURN(Tensor t, onnx_import::convertTensor(tp, {}));
    items.push_back(std::move(t));
  }
  return RtValue::ofSequence(std::move(items));
}

} // namespace

Expected<std::vector<TestCase>> discoverCases(const std::string &dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return makeError(dir, ": not a directory");
  std::vector<TestCase> cases;
  if (fs::exists(fs::path(dir) / "model.onnx")) {
    cases.push_back(loadCase(fs::path(dir)));
    return cases;
  }
  std::vector<fs::path> dirs;
  for (auto &e : fs::directory_iterator(dir))
    if (e.is_directory() && fs::exists(e.path() / "model.onnx")) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  for (auto &d : dirs) cases.push_back(loadCase(d));
  return cases;
}

Expected<RtValue> readValueFile(const std::string &path, const Type &type) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, readFile(path));
  switch (type.kind()) {
  case Type::Kind::Tensor: {
    onnx::TensorProto tp;
    if (!tp.ParseFromString(bytes)) return makeError(path, ": not a TensorProto");
    // ONNX 1.12's test data stores bfloat16 values as uint16 bit patterns.
    if (type.dtype() == DType::BF16 && tp.data_type() == onnx::TensorProto::UINT16)
      tp.set_data_type(onnx::TensorProto::BFLOAT16);
    auto t = onnx_import::convertTensor(tp, {});
    if (!t.ok()) return withContext(path, t.error());
    return RtValue(std::move(*t));
  }
  case Type::Kind::Sequence: {
    onnx::SequenceProto sp;
    if (!sp.ParseFromString(bytes)) return makeError(path, ": not a SequenceProto");
    return fromSequence(sp, path);
  }
  case Type::Kind::Optional: {
    onnx::OptionalProto op;
    if (!op.ParseFromString(bytes)) return makeError(path, ": not an OptionalProto");
    if (op.has_tensor_value()) {
      auto t = onnx_import::convertTensor(op.tensor_value(), {});
      if (!t.ok()) return withContext(path, t.error());
      return RtValue::ofOptional(std::make_shared<RtValue>(std::move(*t)));
    }
    if (op.has_sequence_value()) {
      KILN_ASSIGN_OR_RETURN(RtValue s, fromSequence(op.sequence_value(), path));
      return RtValue::ofOptional(std::make_shared<RtValue>(std::move(s)));
    }
    return RtValue::ofOptional(nullptr);
  }
  }
  return makeError(path, ": unsupported value kind");
}

} // namespace kiln::conformance
