// Conversions of ONNX protobuf pieces (TensorProto, TypeProto) into kiln's
// Tensor and Type. Every size claimed by the file is checked against the data
// that backs it before anything is allocated, so a corrupt model gets an error
// instead of a crash or a huge allocation.
#pragma once

#include "ir/type.h"
#include "support/status.h"
#include "support/tensor.h"

#include <onnx/onnx_pb.h>

#include <string>

namespace kiln::onnx_import {

// Directory of the model file, for tensors whose data lives in external files.
struct TensorSource {
  std::string baseDir;
};

Expected<Tensor> convertTensor(const onnx::TensorProto &proto, const TensorSource &src);

// `inputNameForSymbols`: for top-level graph inputs, dims that are neither a
// number nor named get the symbol "<input>_<axis>" so that users can set them
// with --dim; elsewhere such dims stay unknown.
Expected<Type> convertType(const onnx::TypeProto &proto, const std::string &inputNameForSymbols = "");

} // namespace kiln::onnx_import
