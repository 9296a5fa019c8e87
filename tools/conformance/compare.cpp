#include "compare.h"

#include <cmath>
#include <sstream>

namespace kiln::conformance {

namespace {

std::optional<std::string> compareTensors(const Tensor &a, const Tensor &e, const Tolerance &tol) {
  if (a.dtype() != e.dtype())
    return std::string("dtype ") + std::string(dtypeName(a.dtype())) + " vs expected " +
           std::string(dtypeName(e.dtype()));
  if (a.shape() != e.shape())
    return "shape " + shapeToString(a.shape()) + " vs expected " + shapeToString(e.shape());
  int64_t n = a.numel();
  if (a.dtype() == DType::String) {
    for (int64_t i = 0; i < n; ++i)
      if (a.data<std::string>()[i] != e.data<std::string>()[i])
        return "element " + std::to_string(i) + ": \"" + a.data<std::string>()[i] +
               "\" vs expected \"" + e.data<std::string>()[i] + "\"";
    return std::nullopt;
  }
  int64_t bad = 0, firstBad = -1;
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    bool ok;
    if (isFloat(a.dtype())) {
      double x = a.getDouble(i), y = e.getDouble(i);
      if (std::isnan(y) || std::isnan(x))
        ok = std::isnan(x) && std::isnan(y);
      else if (std::isinf(y) || std::isinf(x))
        ok = x == y;
      else {
        double diff = std::fabs(x - y);
        ok = diff <= tol.atol + tol.rtol * std::fabs(y);
        worst = std::max(worst, diff);
      }
    } else {
      ok = a.getInt(i) == e.getInt(i) &&
           (a.dtype() != DType::U64 || a.data<uint64_t>()[i] == e.data<uint64_t>()[i]);
    }
    if (!ok) {
      if (firstBad < 0) firstBad = i;
      ++bad;
    }
  }
  if (!bad) return std::nullopt;
  std::ostringstream os;
  os.precision(9);
  os << bad << " of " << n << " elements differ; first at " << firstBad << ": "
     << a.getDouble(firstBad) << " vs expected " << e.getDouble(firstBad);
  if (isFloat(a.dtype())) os << " (max abs diff " << worst << ")";
  return os.str();
}

} // namespace

std::optional<std::string> compareValues(const RtValue &a, const RtValue &e, const Tolerance &tol) {
  if (a.kind != e.kind) return "got " + a.describe() + ", expected " + e.describe();
  switch (a.kind) {
  case RtValue::Kind::Tensor:
    return compareTensors(a.tensor, e.tensor, tol);
  case RtValue::Kind::Sequence:
    if (a.sequence.size() != e.sequence.size())
      return "sequence of " + std::to_string(a.sequence.size()) + " vs expected " +
             std::to_string(e.sequence.size());
    for (size_t i = 0; i < a.sequence.size(); ++i)
      if (auto d = compareTensors(a.sequence[i], e.sequence[i], tol))
        return "sequence element " + std::to_string(i) + ": " + *d;
    return std::nullopt;
  case RtValue::Kind::Optional:
    if (!a.inner || !e.inner)
      return (!a.inner && !e.inner) ? std::nullopt
                                    : std::optional<std::string>("got " + a.describe() +
                                                                 ", expected " + e.describe());
    return compareValues(*a.inner, *e.inner, tol);
  }
  return std::nullopt;
}

} // namespace kiln::conformance
