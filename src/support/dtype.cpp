#include "support/dtype.h"

namespace kiln {

std::string_view dtypeName(DType t) {
  switch (t) {
#define KILN_CASE(E, name, T, bits, onnx)                                                          \
  case DType::E:                                                                                   \
    return name;
    KILN_DTYPES(KILN_CASE)
#undef KILN_CASE
  }
  return "?";
}

std::optional<DType> dtypeFromName(std::string_view s) {
#define KILN_CASE(E, name, T, bits, onnx)                                                          \
  if (s == name) return DType::E;
  KILN_DTYPES(KILN_CASE)
#undef KILN_CASE
  return std::nullopt;
}

size_t dtypeSize(DType t) {
  switch (t) {
#define KILN_CASE(E, name, T, bits, onnx)                                                          \
  case DType::E:                                                                                   \
    return sizeof(T);
    KILN_DTYPES(KILN_CASE)
#undef KILN_CASE
  }
  return 0;
}

int onnxCodeOf(DType t) {
  switch (t) {
#define KILN_CASE(E, name, T, bits, onnx)                                                          \
  case DType::E:                                                                                   \
    return onnx;
    KILN_DTYPES(KILN_CASE)
#undef KILN_CASE
  }
  return 0;
}

std::optional<DType> dtypeFromOnnx(int code) {
#define KILN_CASE(E, name, T, bits, onnx)                                                          \
  if (code == onnx) return DType::E;
  KILN_DTYPES(KILN_CASE)
#undef KILN_CASE
  return std::nullopt;
}

} // namespace kiln
