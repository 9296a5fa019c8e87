// Registration of the per-op legalizers (legalize_opsets.cpp).
#pragma once

#include "frontend/onnx/legalize.h"

#include <string>
#include <unordered_map>

namespace kiln::onnx_import {

void registerOpsetRules(std::unordered_map<std::string, Legalizer> &table);

} // namespace kiln::onnx_import
