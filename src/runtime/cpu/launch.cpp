#include "runtime/cpu/launch.h"

#include <algorithm>

namespace kiln::cpu {

Status ElementwiseLaunch::checkShapes(const std::vector<Shape64> &inputShapes,
                                      const Shape64 &outShape) const {
  if (static_cast<int>(outShape.size()) != outRank)
    return makeError("kernel '", symbol, "': output rank ", outShape.size(), ", compiled for ",
                     outRank);
  for (size_t j = 0; j < inputShapes.size(); ++j) {
    const Shape64 &in = inputShapes[j];
    const int offset = outRank - static_cast<int>(in.size());
    if (offset < 0)
      return makeError("kernel '", symbol, "': input ", j, " has rank ", in.size(),
                       " > output rank ", outRank);
    for (size_t loop = 0; loop < loopDims.size(); ++loop)
      for (int k : loopDims[loop]) {
        const int64_t d = k < offset ? 1 : in[k - offset];
        const int64_t want = full[j][loop] ? outShape[k] : 1;
        if (d != want)
          return makeError("kernel '", symbol, "': input ", j, " has shape ", shapeToString(in),
                           ", which does not broadcast to ", shapeToString(outShape),
                           " as compiled");
      }
  }
  return Status::success();
}

bool ElementwiseLaunch::shapesHold(const std::vector<Shape64> &inputShapes,
                                   const Shape64 &outShape) const {
  std::vector<Shape64> values(inputShapes);
  for (const std::vector<int> &operands : nodeOperands) {
    // Elementwise ops broadcast all their inputs (numpy rules).
    size_t rank = 0;
    for (int v : operands) rank = std::max(rank, values[v].size());
    Shape64 shape(rank, 1);
    for (int v : operands) {
      const Shape64 &s = values[v];
      for (size_t i = 0; i < s.size(); ++i) {
        int64_t &d = shape[rank - s.size() + i];
        if (s[i] == d || s[i] == 1) continue;
        if (d != 1) return false;
        d = s[i];
      }
    }
    values.push_back(std::move(shape));
  }
  for (int v : outputValues)
    if (values[v] != outShape) return false;
  return checkShapes(inputShapes, outShape).ok();
}

std::vector<int64_t> ElementwiseLaunch::loopExtents(const Shape64 &outShape) const {
  std::vector<int64_t> extents;
  for (const std::vector<int> &dims : loopDims) {
    int64_t e = 1;
    for (int k : dims) e *= outShape[k];
    extents.push_back(e);
  }
  return extents;
}

std::vector<int64_t> ElementwiseLaunch::params(const std::vector<int64_t> &extents) const {
  std::vector<int64_t> p(extents);
  const size_t nl = extents.size();
  for (const std::vector<bool> &f : kernelFull)
    for (size_t k = 0; k + 1 < nl; ++k) {
      if (!f[k]) continue;
      int64_t stride = 1;
      for (size_t m = k + 1; m < nl; ++m)
        if (f[m]) stride *= extents[m];
      p.push_back(stride);
    }
  for (int64_t o = 0; o < numOutputs; ++o)
    for (size_t k = 0; k + 1 < nl; ++k) {
      int64_t stride = 1;
      for (size_t m = k + 1; m < nl; ++m) stride *= extents[m];
      p.push_back(stride);
    }
  return p;
}

Status ElementwiseLaunch::validate(size_t numInputs) const {
  auto bad = [&](const char *what) { return makeError("kernel '", symbol, "': corrupt ", what); };
  if (outRank < 0 || outRank > 64 || loopDims.empty() || numOutputs < 1) return bad("loop nest");
  for (const auto &dims : loopDims)
    for (int k : dims)
      if (k < 0 || k >= outRank) return bad("loop dims");
  if (full.size() != numInputs || kernelFull.size() != numInputs) return bad("input patterns");
  for (const auto &f : full)
    if (f.size() != loopDims.size()) return bad("input patterns");
  const size_t kernelLoops = flat() ? 2 : loopDims.size();
  for (const auto &f : kernelFull)
    if (f.size() != kernelLoops) return bad("input patterns");
  size_t values = numInputs;
  for (const auto &operands : nodeOperands) {
    for (int v : operands)
      if (v < 0 || size_t(v) >= values) return bad("shape program");
    ++values;
  }
  for (int v : outputValues)
    if (v < 0 || size_t(v) >= values) return bad("shape program");
  return Status::success();
}

Status ReductionLaunch::view(const Shape64 &in, int64_t &outer, int64_t &red, int64_t &inner,
                             Shape64 &outShape) const {
  if (static_cast<int>(in.size()) != rank)
    return makeError("kernel '", symbol, "': input rank ", in.size(), ", compiled for ", rank);
  outer = red = inner = 1;
  for (int i = 0; i < rank; ++i) (i < axisBegin ? outer : i < axisEnd ? red : inner) *= in[i];
  outShape = in;
  if (kind == Kind::Reduce) {
    if (keepdims) {
      for (int i = axisBegin; i < axisEnd; ++i) outShape[i] = 1;
    } else {
      outShape.erase(outShape.begin() + axisBegin, outShape.begin() + axisEnd);
    }
  }
  if (!columns && inner != 1)
    return makeError("kernel '", symbol, "': compiled for a unit inner size, got ", inner);
  return Status::success();
}

Status ReductionLaunch::validate() const {
  if (rank < 0 || rank > 64 || axisBegin < 0 || axisBegin > axisEnd || axisEnd > rank ||
      static_cast<int>(kind) < 0 || static_cast<int>(kind) > 3)
    return makeError("kernel '", symbol, "': corrupt reduction");
  return Status::success();
}

} // namespace kiln::cpu
