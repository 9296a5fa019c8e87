// Element types of tensors. Defined once in KILN_DTYPES; the enum, names,
// sizes and ONNX codes all come from that table. Sub-byte and 8-bit float
// types (int4, fp8) get their own rows when they arrive: sizes are kept in
// bits for that reason.
#pragma once

#include "support/half.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kiln {

// X(Enum, text name, C++ storage type, size in bits, ONNX TensorProto code)
#define KILN_DTYPES(X)                                                                             \
  X(F32, "f32", float, 32, 1)                                                                      \
  X(U8, "u8", uint8_t, 8, 2)                                                                       \
  X(I8, "i8", int8_t, 8, 3)                                                                        \
  X(U16, "u16", uint16_t, 16, 4)                                                                   \
  X(I16, "i16", int16_t, 16, 5)                                                                    \
  X(I32, "i32", int32_t, 32, 6)                                                                    \
  X(I64, "i64", int64_t, 64, 7)                                                                    \
  X(String, "string", std::string, 0, 8)                                                           \
  X(Bool, "bool", bool, 8, 9)                                                                      \
  X(F16, "f16", ::kiln::Half, 16, 10)                                                              \
  X(F64, "f64", double, 64, 11)                                                                    \
  X(U32, "u32", uint32_t, 32, 12)                                                                  \
  X(U64, "u64", uint64_t, 64, 13)                                                                  \
  X(BF16, "bf16", ::kiln::BFloat16, 16, 16)

enum class DType : uint8_t {
#define KILN_DTYPE_ENUM(E, name, T, bits, onnx) E,
  KILN_DTYPES(KILN_DTYPE_ENUM)
#undef KILN_DTYPE_ENUM
};

std::string_view dtypeName(DType t);
std::optional<DType> dtypeFromName(std::string_view name);
// Size of one element in bytes (strings report sizeof(std::string): they are
// stored as objects, not bytes).
size_t dtypeSize(DType t);
int onnxCodeOf(DType t);
std::optional<DType> dtypeFromOnnx(int code);

inline bool isFloat(DType t) {
  return t == DType::F32 || t == DType::F64 || t == DType::F16 || t == DType::BF16;
}
inline bool isSignedInt(DType t) {
  return t == DType::I8 || t == DType::I16 || t == DType::I32 || t == DType::I64;
}
inline bool isUnsignedInt(DType t) {
  return t == DType::U8 || t == DType::U16 || t == DType::U32 || t == DType::U64;
}
inline bool isInt(DType t) { return isSignedInt(t) || isUnsignedInt(t); }
// The types of quantized tensors.
inline bool is8Bit(DType t) {
  return t == DType::U8 || t == DType::I8;
}
inline bool isNumeric(DType t) { return isFloat(t) || isInt(t); }

template <class T> struct DTypeOf;
#define KILN_DTYPE_OF(E, name, T, bits, onnx)                                                      \
  template <> struct DTypeOf<T> {                                                                 \
    static constexpr DType value = DType::E;                                                       \
  };
KILN_DTYPES(KILN_DTYPE_OF)
#undef KILN_DTYPE_OF

// Calls f(T{}) with a value of the C++ type that stores `t`:
//   visitDType(t, [&](auto tag) { using T = decltype(tag); ... });
template <class F> decltype(auto) visitDType(DType t, F &&f) {
  switch (t) {
#define KILN_DTYPE_VISIT(E, name, T, bits, onnx)                                                   \
  case DType::E:                                                                                   \
    return f(T{});
    KILN_DTYPES(KILN_DTYPE_VISIT)
#undef KILN_DTYPE_VISIT
  }
  return f(float{});
}

} // namespace kiln
