#include "frontend/onnx/proto_convert.h"

#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

namespace kiln::onnx_import {

namespace {

// Largest tensor the importer accepts (elements): far above real models, low
// enough that a corrupt dim cannot ask for terabytes.
constexpr int64_t kMaxElements = int64_t(1) << 34;

Expected<Shape64> checkedDims(const onnx::TensorProto &p) {
  Shape64 dims;
  int64_t n = 1;
  for (int64_t d : p.dims()) {
    if (d < 0) return makeError("tensor '", p.name(), "' has negative dim ", d);
    if (d > 0 && n > kMaxElements / d)
      return makeError("tensor '", p.name(), "' is implausibly large");
    n *= d;
    dims.push_back(d);
  }
  return dims;
}

Expected<std::string> readExternal(const onnx::TensorProto &p, const TensorSource &src,
                                   size_t expectedBytes) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto &kv : p.external_data()) {
    if (kv.key() == "location") location = kv.value();
    else if (kv.key() == "offset") offset = std::strtoll(kv.value().c_str(), nullptr, 10);
    else if (kv.key() == "length") length = std::strtoll(kv.value().c_str(), nullptr, 10);
  }
  std::filesystem::path rel(location);
  if (location.empty()) return makeError("tensor '", p.name(), "': external data has no location");
  if (rel.is_absolute())
    return makeError("tensor '", p.name(), "': external data location '", location,
                     "' must be relative to the model");
  for (const auto &part : rel)
    if (part == "..")
      return makeError("tensor '", p.name(), "': external data location '", location,
                       "' leaves the model's directory");
  std::filesystem::path full = std::filesystem::path(src.baseDir) / rel;
  std::ifstream in(full, std::ios::binary);
  if (!in)
    return makeError("tensor '", p.name(), "': cannot open external data file '", full.string(),
                     "'");
  in.seekg(0, std::ios::end);
  int64_t fileSize = in.tellg();
  if (length < 0) length = static_cast<int64_t>(expectedBytes);
  if (offset < 0 || length < 0 || offset + length > fileSize)
    return makeError("tensor '", p.name(), "': external data range [", offset, ", ",
                     offset + length, ") is outside '", full.string(), "' (", fileSize, " bytes)");
  std::string bytes(static_cast<size_t>(length), '\0');
  in.seekg(offset);
  in.read(bytes.data(), length);
  if (!in) return makeError("tensor '", p.name(), "': reading '", full.string(), "' failed");
  return bytes;
}

// Copies values from a repeated proto field into the tensor's storage.
template <class Dst, class Field> void copyField(Tensor &t, const Field &field) {
  Dst *out = t.data<Dst>();
  for (int i = 0; i < field.size(); ++i) {
    if constexpr (std::is_same_v<Dst, Half> || std::is_same_v<Dst, BFloat16>)
      out[i].bits = static_cast<uint16_t>(field.Get(i));
    else
      out[i] = static_cast<Dst>(field.Get(i));
  }
}

// "input.1", axis 0 -> "input_1_0": a plain identifier users can type in --dim.
std::string symbolFor(const std::string &inputName, int axis) {
  std::string s;
  for (char c : inputName) s += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return s + "_" + std::to_string(axis);
}

} // namespace

Expected<Tensor> convertTensor(const onnx::TensorProto &p, const TensorSource &src) {
  auto dtype = dtypeFromOnnx(p.data_type());
  if (!dtype)
    return makeError("tensor '", p.name(), "' has unsupported element type ", p.data_type());
  if (p.has_segment()) return makeError("tensor '", p.name(), "' is segmented (unsupported)");
  KILN_ASSIGN_OR_RETURN(Shape64 dims, checkedDims(p));
  int64_t n = numelOf(dims);

  if (*dtype == DType::String) {
    if (p.string_data_size() != n)
      return makeError("tensor '", p.name(), "' has ", p.string_data_size(), " strings for ", n,
                       " elements");
    Tensor t(DType::String, dims);
    for (int64_t i = 0; i < n; ++i) t.data<std::string>()[i] = p.string_data(static_cast<int>(i));
    return t;
  }

  size_t bytes = static_cast<size_t>(n) * dtypeSize(*dtype);
  const std::string *raw = nullptr;
  std::string external;
  if (p.data_location() == onnx::TensorProto::EXTERNAL) {
    KILN_ASSIGN_OR_RETURN(external, readExternal(p, src, bytes));
    raw = &external;
  } else if (p.has_raw_data()) {
    raw = &p.raw_data();
  }
  if (raw) {
    if (raw->size() != bytes)
      return makeError("tensor '", p.name(), "' of shape ", shapeToString(dims), " needs ", bytes,
                       " bytes of data, found ", raw->size());
    Tensor t(*dtype, dims);
    if (bytes) std::memcpy(t.mutableRaw(), raw->data(), bytes);
    if (*dtype == DType::Bool) // normalize any non-zero byte to true
      for (int64_t i = 0; i < n; ++i) t.data<uint8_t>()[i] = t.data<uint8_t>()[i] != 0;
    return t;
  }

  auto sizeCheck = [&](int have) -> Status {
    if (have != n)
      return makeError("tensor '", p.name(), "' of shape ", shapeToString(dims), " has ", have,
                       " values, expected ", n);
    return Status::success();
  };
  // Check the count of values before allocating: the dims alone may claim
  // terabytes that the file does not hold.
  int have = 0;
  switch (*dtype) {
  case DType::F32: have = p.float_data_size(); break;
  case DType::F64: have = p.double_data_size(); break;
  case DType::I64: have = p.int64_data_size(); break;
  case DType::U32:
  case DType::U64: have = p.uint64_data_size(); break;
  default: have = p.int32_data_size();
  }
  KILN_RETURN_IF_ERROR(sizeCheck(have));
  Tensor t(*dtype, dims);
  switch (*dtype) {
  case DType::F32:
    KILN_RETURN_IF_ERROR(sizeCheck(p.float_data_size()));
    copyField<float>(t, p.float_data());
    break;
  case DType::F64:
    KILN_RETURN_IF_ERROR(sizeCheck(p.double_data_size()));
    copyField<double>(t, p.double_data());
    break;
  case DType::I64:
    KILN_RETURN_IF_ERROR(sizeCheck(p.int64_data_size()));
    copyField<int64_t>(t, p.int64_data());
    break;
  case DType::U32:
    KILN_RETURN_IF_ERROR(sizeCheck(p.uint64_data_size()));
    copyField<uint32_t>(t, p.uint64_data());
    break;
  case DType::U64:
    KILN_RETURN_IF_ERROR(sizeCheck(p.uint64_data_size()));
    copyField<uint64_t>(t, p.uint64_data());
    break;
  default: // int32_data holds every narrower type (and f16/bf16 bit patterns)
    KILN_RETURN_IF_ERROR(sizeCheck(p.int32_data_size()));
    visitDType(*dtype, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, bool>) {
        for (int64_t i = 0; i < n; ++i) t.data<bool>()[i] = p.int32_data(static_cast<int>(i)) != 0;
      } else if constexpr (!std::is_same_v<T, std::string>) {
        copyField<T>(t, p.int32_data());
      }
    });
  }
  return t;
}

Expected<Type> convertType(const onnx::TypeProto &proto, const std::string &inputName) {
  switch (proto.value_case()) {
  case onnx::TypeProto::kTensorType: {
    const auto &tt = proto.tensor_type();
    auto dtype = dtypeFromOnnx(tt.elem_type());
    if (!dtype) return makeError("unsupported element type ", tt.elem_type());
    if (!tt.has_shape()) return Type::tensor(*dtype, Shape::unranked());
    Shape shape;
    for (int i = 0; i < tt.shape().dim_size(); ++i) {
      const auto &d = tt.shape().dim(i);
      if (d.has_dim_value() && d.dim_value() >= 0)
        shape.dims.emplace_back(d.dim_value());
      else if (d.has_dim_param() && !d.dim_param().empty())
        shape.dims.push_back(Dim::symbol(d.dim_param()));
      else if (!inputName.empty())
        shape.dims.push_back(Dim::symbol(symbolFor(inputName, i)));
      else
        shape.dims.push_back(Dim::unknown());
    }
    return Type::tensor(*dtype, std::move(shape));
  }
  case onnx::TypeProto::kSequenceType: {
    if (!proto.sequence_type().has_elem_type())
      return Type::sequence(Type::tensor(DType::F32, Shape::unranked()));
    KILN_ASSIGN_OR_RETURN(Type elem, convertType(proto.sequence_type().elem_type()));
    return Type::sequence(std::move(elem));
  }
  case onnx::TypeProto::kOptionalType: {
    if (!proto.optional_type().has_elem_type()) return makeError("optional type without element");
    KILN_ASSIGN_OR_RETURN(Type elem, convertType(proto.optional_type().elem_type()));
    return Type::optional(std::move(elem));
  }
  case onnx::TypeProto::kMapType:
    return makeError("map types are not supported");
  case onnx::TypeProto::kSparseTensorType:
    return makeError("sparse tensor types are not supported");
  default:
    return makeError("value has no type");
  }
}

} // namespace kiln::onnx_import
