// 16-bit floating-point storage types (IEEE half and bfloat16) with exact
// conversions to and from float. Arithmetic happens in float; these types only
// store. Conversions round to nearest even, as hardware and ONNX Runtime do.
#pragma once

#include <cstdint>
#include <cstring>

namespace kiln {

inline uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

struct Half {
  uint16_t bits = 0;

  Half() = default;
  explicit Half(float f) : bits(fromFloat(f)) {}
  operator float() const { return toFloat(bits); }

  static uint16_t fromFloat(float f) {
    uint32_t x = floatBits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u) // inf or nan
      return static_cast<uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0u));
    if (absx >= 0x477ff000u) // rounds to >= 65520: overflow to inf
      return static_cast<uint16_t>(sign | 0x7c00u);
    if (absx < 0x38800000u) { // subnormal or zero in half
      // Scale into the half subnormal range with float addition, which rounds
      // to nearest even for us.
      float magic = bitsToFloat(0x3f000000u); // 0.5
      float v = bitsToFloat(absx) + magic;
      return static_cast<uint16_t>(sign | (floatBits(v) - floatBits(magic)));
    }
    uint32_t mant_odd = (absx >> 13) & 1u;
    absx += 0xc8000fffu + mant_odd; // rebias exponent (-112 << 23) and round
    return static_cast<uint16_t>(sign | (absx >> 13));
  }

  static float toFloat(uint16_t h) {
    uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0x1f) return bitsToFloat(sign | 0x7f800000u | (mant << 13));
    if (exp == 0) {
      if (mant == 0) return bitsToFloat(sign);
      float v = static_cast<float>(mant) * (1.0f / 16777216.0f); // mant * 2^-24
      return sign ? -v : v;
    }
    return bitsToFloat(sign | ((exp + 112) << 23) | (mant << 13));
  }
};

struct BFloat16 {
  uint16_t bits = 0;

  BFloat16() = default;
  explicit BFloat16(float f) : bits(fromFloat(f)) {}
  operator float() const { return bitsToFloat(static_cast<uint32_t>(bits) << 16); }

  static uint16_t fromFloat(float f) {
    uint32_t x = floatBits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u); // nan
    uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
    return static_cast<uint16_t>((x + rounding) >> 16);
  }
};

} // namespace kiln
