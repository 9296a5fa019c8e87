// The few ONNX ops that compiled CPU programs run on the host, outside the
// generated code, implemented without the IR or the interpreter: only
// support/ (Tensor, DType, Expected) and the C++ standard library, so that
// the runtime library can run an artifact on its own. Semantics are ONNX's
// (opset 13+ forms) and match the reference interpreter bit for bit; node
// attributes arrive as plain parameter structs that the compiler resolves.
//
// Conventions shared by every function:
//   - An optional input is passed as a `const Tensor &` that may be
//     undefined (Tensor{}): undefined means "not given".
//   - Integer inputs (shape, axes, pads, indices) may be i32 or i64.
//   - Reshape, Flatten, Squeeze, Unsqueeze and Identity return a view that
//     shares the input's buffer; every other result is a newly allocated
//     tensor the caller owns (inputs are never written).
//   - Errors are short, lower-case messages about the values ("axis 3 is out
//     of range for rank 2"); the caller prefixes the node's name. A result
//     too large to allocate is an error, not an exception.
//
// Thread safety: every function is pure; calls on shared inputs may run
// concurrently.
#pragma once

#include "support/status.h"
#include "support/tensor.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace kiln::runtime::host {

// ---- views (the result shares the input's buffer) ----------------------------

struct ReshapeParams {
  bool allowZero = false; // 0 in the shape is a real 0, not "copy the input dim"
};
// `shape`: rank 0 or 1; 0 copies the input dim (unless allowZero), one -1 is
// inferred from the element count.
Expected<Tensor> reshape(const Tensor &data, const Tensor &shape, const ReshapeParams &params);

struct FlattenParams {
  int64_t axis = 1; // in [-rank, rank]
};
Expected<Tensor> flatten(const Tensor &data, const FlattenParams &params);

struct SqueezeParams {
  // Used when the axes input is not given; empty removes every dim of size 1.
  std::vector<int64_t> axes;
};
// `axes` (optional) wins over params.axes; a given but empty axes tensor
// removes nothing (as the interpreter does).
Expected<Tensor> squeeze(const Tensor &data, const Tensor &axes, const SqueezeParams &params);

struct UnsqueezeParams {
  std::vector<int64_t> axes; // used when the axes input is not given
};
// Axes count in the output's rank; one of `axes` and params.axes must say
// which.
Expected<Tensor> unsqueeze(const Tensor &data, const Tensor &axes, const UnsqueezeParams &params);

Expected<Tensor> identity(const Tensor &data);

// ---- shape queries -------------------------------------------------------------

struct ShapeParams {
  int64_t start = 0;
  std::optional<int64_t> end; // absent: the rank
};
// Dims [start, end) as i64[n]; negative values count from the back and both
// clamp to [0, rank].
Expected<Tensor> shapeOf(const Tensor &data, const ShapeParams &params);
// The element count as an i64 scalar.
Expected<Tensor> sizeOf(const Tensor &data);

// ---- data movement (any dtype but string: elements are copied as bytes) -------

struct GatherParams {
  int64_t axis = 0;
};
// Slices of `data` along axis picked by `indices` (i32/i64, any shape,
// negative counts from the back); output shape = data dims before axis,
// indices dims, data dims after axis.
Expected<Tensor> gather(const Tensor &data, const Tensor &indices, const GatherParams &params);

struct ConstantOfShapeParams {
  Tensor value; // one element; undefined means f32 0
};
Expected<Tensor> constantOfShape(const Tensor &shape, const ConstantOfShapeParams &params);

enum class PadMode { Constant, Reflect, Edge, Wrap };
struct PadParams {
  PadMode mode = PadMode::Constant;
};
// `pads`: begins then ends, one pair per entry of `axes` (optional; default
// every axis); a negative pad crops. `constantValue` (optional, one element
// of data's dtype, or empty for 0) fills in constant mode.
Expected<Tensor> pad(const Tensor &data, const Tensor &pads, const Tensor &constantValue,
                     const Tensor &axes, const PadParams &params);

// ---- f32 math -------------------------------------------------------------------

struct ReduceMeanParams {
  std::vector<int64_t> axes; // used when the axes input is not given
  bool keepDims = true;
  bool noopWithEmptyAxes = false; // no axes: return data unchanged instead of reducing all
};
// Accumulates in float in row-major order of the reduced elements, then
// divides by their count (0/0 gives NaN for an empty set). With no axes and
// noopWithEmptyAxes the result is `data` itself (shares its buffer).
Expected<Tensor> reduceMean(const Tensor &data, const Tensor &axes, const ReduceMeanParams &params);

Expected<Tensor> relu(const Tensor &x);

} // namespace kiln::runtime::host
