// Reading and writing numpy .npy files (format version 1.0, also reads 2.0
// and 3.0 headers), the tensor file format everywhere in kiln. Little-endian,
// C order; bool, ints, f16, f32, f64 (bf16 is stored as u2 with a
// "bfloat16" note, which numpy cannot express, so kiln writes it as f32).
#pragma once

#include "support/tensor.h"
#include "support/status.h"

#include <string>

namespace kiln {

// Errors name the file and what is wrong ("x.npy: truncated data, expected
// 4096 bytes, found 100").
Expected<Tensor> readNpy(const std::string &path);
Expected<Tensor> parseNpy(const std::string &bytes, const std::string &nameForErrors);
Status writeNpy(const std::string &path, const Tensor &t);
std::string serializeNpy(const Tensor &t);

} // namespace kiln
