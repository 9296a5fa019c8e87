// GLSL compute shaders -> SPIR-V (glslang's C API; libshaderc does not link
// on Debian 12) and SPIR-V validation (SPIRV-Tools' spvValidate), for the
// Vulkan target. Modules target Vulkan 1.2 (SPIR-V 1.5): 8- and 16-bit
// storage, int64 and the explicit arithmetic types are core or standard
// extensions there, on lavapipe and on NVIDIA's driver alike.
#pragma once

#include "support/status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::codegen {

// Compiles one GLSL compute shader; the error carries glslang's log.
Expected<std::vector<uint32_t>> compileGlslCompute(const std::string &glsl);

// Validates a module for the Vulkan 1.2 environment; the error carries the
// validator's message.
Status validateSpirv(const std::vector<uint32_t> &words);

} // namespace kiln::codegen
