// The ONNX ops that compiled CPU programs run on the host, outside the
// generated code: shape arithmetic and views, what is inherently dynamic
// (outputs sized by values, strings, sequences and optionals) or tiny.
// They are implemented without the IR or the interpreter: only support/
// (Tensor, RtValue, DType, Expected) and the C++ standard library, so that
// the runtime library can run an artifact on its own. Semantics are ONNX's
// (opset 13+ forms) and match the reference interpreter bit for bit; node
// attributes arrive as plain parameter structs that the compiler resolves
// (each with an io() field list, so a step stores them in the artifact).
// The definitions are split by family: host_ops.cpp (views, shapes, data
// movement, f32 math), host_ops_select.cpp, host_ops_text.cpp,
// host_ops_math.cpp and host_ops_sequence.cpp.
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
#include "support/value.h"

#include <cstdint>
#include <optional>
#include <string>
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

// Determinant of each [..., M, M] float matrix, by LU decomposition with
// partial pivoting in f64; the result has the input's float dtype.
Expected<Tensor> det(const Tensor &x);

// ---- selection (host_ops_select.cpp): outputs whose size depends on values ---

// The indices of the non-zero (non-empty for strings) elements, i64
// [rank, count]; a scalar counts as rank 1.
Expected<Tensor> nonZero(const Tensor &x);

struct CompressParams {
  bool hasAxis = false; // no axis: the flattened input
  int64_t axis = 0;
  template <class A> void io(A &a) { a(hasAxis, axis); }
};
// The slices of `x` along the axis whose entry of the 1-d `condition` is
// non-zero; a condition longer than the axis may select only within it.
Expected<Tensor> compress(const Tensor &x, const Tensor &condition, const CompressParams &params);

struct TopKParams {
  int64_t axis = -1;
  bool largest = true;
  bool sorted = true; // false leaves the order open: sorted order is one valid choice
  template <class A> void io(A &a) { a(axis, largest, sorted); }
};
// {values, i64 indices} of the k (a one-element integer tensor) largest or
// smallest elements along the axis. NaN orders above every number; ties
// keep the lower index first.
Expected<std::vector<Tensor>> topK(const Tensor &x, const Tensor &k, const TopKParams &params);

struct UniqueParams {
  bool hasAxis = false; // no axis: the flattened elements are the items
  int64_t axis = 0;
  bool sorted = true; // false: items in order of first occurrence
  template <class A> void io(A &a) { a(hasAxis, axis, sorted); }
};
// {unique items, i64 first indices, i64 inverse indices, i64 counts}.
// Sorted order is numpy.unique's (NaN last, slices lexicographically).
Expected<std::vector<Tensor>> unique(const Tensor &x, const UniqueParams &params);

struct NonMaxSuppressionParams {
  bool centerPointBox = false; // boxes as [x_center, y_center, width, height]
  template <class A> void io(A &a) { a(centerPointBox); }
};
// i64 [selected, 3] (batch, class, box) triples. maxOutputBoxesPerClass,
// iouThreshold and scoreThreshold are optional (undefined or empty: absent;
// an absent max selects nothing).
Expected<Tensor> nonMaxSuppression(const Tensor &boxes, const Tensor &scores,
                                   const Tensor &maxOutputBoxesPerClass,
                                   const Tensor &iouThreshold, const Tensor &scoreThreshold,
                                   const NonMaxSuppressionParams &params);

// ---- text (host_ops_text.cpp) ---------------------------------------------------

// Cast where one side is a string: numbers print like numpy's str() (the
// shortest digits that read back, positional for 1e-4 <= |x| < 1e16), bools
// as True/False; strings parse like numpy (spaces, '+', nan, inf accepted).
Expected<Tensor> castStrings(const Tensor &x, DType to);

enum class CaseChange : uint8_t { None, Lower, Upper };
struct StringNormalizerParams {
  CaseChange caseChange = CaseChange::None;
  bool caseSensitive = false;
  std::vector<std::string> stopwords;
  template <class A> void io(A &a) { a(caseChange, caseSensitive, stopwords); }
};
// [C] or [1, C] strings without the stopwords, case changed (ASCII); one
// empty string when nothing is left.
Expected<Tensor> stringNormalizer(const Tensor &x, const StringNormalizerParams &params);

enum class TfIdfMode : uint8_t { TF, IDF, TFIDF };
struct TfIdfParams {
  TfIdfMode mode = TfIdfMode::TF;
  int64_t minGramLength = 1, maxGramLength = 1, maxSkipCount = 0;
  std::vector<int64_t> ngramCounts, ngramIndexes, poolInt64s;
  std::vector<std::string> poolStrings;
  std::vector<float> weights;
  template <class A> void io(A &a) {
    a(mode, minGramLength, maxGramLength, maxSkipCount, ngramCounts, ngramIndexes, poolInt64s,
      poolStrings, weights);
  }
};
// f32 [size] or [N, size] n-gram counts of int or string tokens, weighted.
Expected<Tensor> tfIdfVectorizer(const Tensor &x, const TfIdfParams &params);

// ---- random values (host_ops_math.cpp) ----------------------------------------------

enum class RandomKind : uint8_t { Uniform, Normal, Bernoulli };
struct RandomParams {
  RandomKind kind = RandomKind::Uniform;
  bool hasDType = false;
  DType dtype = DType::F32; // default: the input's
  float low = 0, high = 1;  // Uniform
  float mean = 0, scale = 1; // Normal
  bool hasSeed = false;
  float seed = 0; // its bits seed the engine; absent: seed 0 (the interpreter's default)
  template <class A> void io(A &a) {
    a(kind, hasDType, dtype, low, high, mean, scale, hasSeed, seed);
  }
};
// A tensor of x's shape drawn from a std::mt19937_64 seeded as the reference
// interpreter seeds it (so a run is reproducible and matches it): uniform in
// [low, high), normal, or Bernoulli with x's probabilities.
Expected<Tensor> randomLike(const Tensor &x, const RandomParams &params);

// ---- sequences and optionals (host_ops_sequence.cpp) ----------------------------------

// Every value is an RtValue; a sequence's tensors share one dtype.
Expected<RtValue> sequenceConstruct(const std::vector<Tensor> &tensors);
// `position` (one-element integer tensor) counts from the back when
// negative; insertion may append, and an undefined position means the end
// (insert) or the last element (erase).
Expected<RtValue> sequenceAt(const RtValue &seq, const Tensor &position);
Expected<RtValue> sequenceInsert(const RtValue &seq, const Tensor &t, const Tensor &position);
Expected<RtValue> sequenceErase(const RtValue &seq, const Tensor &position);
Expected<RtValue> sequenceLength(const RtValue &seq);

struct SplitToSequenceParams {
  int64_t axis = 0;
  bool keepDims = true; // false drops the axis, only when `split` is not given
  template <class A> void io(A &a) { a(axis, keepDims); }
};
// `split` (optional): a scalar chunk length (the last chunk shorter) or 1-d
// lengths summing to the axis; absent: chunks of one.
Expected<RtValue> splitToSequence(const Tensor &x, const Tensor &split,
                                  const SplitToSequenceParams &params);

struct ConcatFromSequenceParams {
  int64_t axis = 0;
  bool newAxis = false; // stack along a new axis at `axis` instead
  template <class A> void io(A &a) { a(axis, newAxis); }
};
Expected<RtValue> concatFromSequence(const RtValue &seq, const ConcatFromSequenceParams &params);

// Optional(x): `value` null is the empty optional. HasElement and
// GetElement also take a plain tensor or sequence (opset 18), which holds
// an element; a null value (absent input) holds none.
RtValue makeOptional(const RtValue *value);
RtValue optionalHasElement(const RtValue *value);
Expected<RtValue> optionalGetElement(const RtValue &value);

// ---- whole-tensor copies (host_ops_sequence.cpp; every dtype, strings too) -----

// Concatenates tensors of one dtype along an existing axis (other dims
// agree: the caller checks).
Expected<Tensor> concatAlongAxis(const std::vector<Tensor> &parts, int64_t axis);
// Stacks equal-shaped tensors along a new axis (0 <= axis <= rank).
Expected<Tensor> stackAlongNewAxis(const std::vector<Tensor> &parts, int64_t axis);
// Element `index` of `t` along `axis`, the axis removed (a view when it is
// the leading axis).
Expected<Tensor> sliceAt(const Tensor &t, int64_t axis, int64_t index);

} // namespace kiln::runtime::host
