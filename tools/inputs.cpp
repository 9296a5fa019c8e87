#include "inputs.h"

#include "cli.h"

#include "interp/interpreter.h"
#include "support/npy.h"

#include <cmath>
#include <iomanip>
#include <random>
#include <sstream>
#include <unordered_map>

namespace kiln::cli {

Tensor randomTensor(DType dtype, const Shape64 &shape, uint64_t seed) {
  Tensor t(dtype, shape);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::uniform_int_distribution<int64_t> small(0, 9);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (isFloat(dtype))
      t.setDouble(i, uniform(rng));
    else if (dtype == DType::Bool)
      t.setInt(i, small(rng) & 1);
    else if (dtype != DType::String)
      t.setInt(i, small(rng));
  }
  return t;
}

namespace {

Expected<Shape64> concreteShape(const Value &input, const std::map<std::string, int64_t> &dims) {
  const Shape &shape = input.type().shape();
  if (!shape.rankKnown)
    return makeError("input '", input.name(), "' has unknown rank: give it with --input");
  Shape64 out;
  for (const Dim &d : shape.dims) {
    if (d.isStatic()) {
      out.push_back(d.value());
    } else if (d.isSymbol()) {
      auto it = dims.find(d.symbolName());
      out.push_back(it == dims.end() ? 1 : it->second);
    } else {
      out.push_back(1);
    }
  }
  return out;
}

} // namespace

Expected<std::vector<RtValue>> prepareInputs(const Graph &graph, const InputSpec &spec) {
  for (auto &[name, file] : spec.files) {
    bool found = false;
    for (Value *in : graph.inputs()) found |= in->name() == name;
    if (!found) {
      std::string known;
      for (Value *in : graph.inputs()) known += (known.empty() ? "" : ", ") + in->name();
      return makeError("the model has no input named '", name, "' (inputs: ", known, ")");
    }
  }
  std::vector<RtValue> values;
  std::unordered_map<std::string, int64_t> bindings;
  uint64_t index = 0;
  for (Value *in : graph.inputs()) {
    ++index;
    RtValue v;
    if (auto it = spec.files.find(in->name()); it != spec.files.end()) {
      KILN_ASSIGN_OR_RETURN(Tensor t, readNpy(it->second));
      v = RtValue(std::move(t));
    } else {
      if (!in->type().isTensor())
        return makeError("input '", in->name(), "' is a ", in->type().str(),
                         ": give it with --input");
      KILN_ASSIGN_OR_RETURN(Shape64 shape, concreteShape(*in, spec.dims));
      v = RtValue(randomTensor(in->type().dtype(), shape, spec.seed * 1000003u + index));
    }
    if (Status s = checkInputAgainstType(*in, v, bindings); !s.ok()) {
      auto it = spec.files.find(in->name());
      return it == spec.files.end() ? s.error() : withContext(it->second, s.error());
    }
    values.push_back(std::move(v));
  }
  return values;
}

Expected<InputSpec> inputSpecFrom(const Args &args) {
  InputSpec spec;
  for (const std::string &s : args.values("input")) {
    KILN_ASSIGN_OR_RETURN(auto kv, splitAssignment(s, "input"));
    spec.files[kv.first] = kv.second;
  }
  for (const std::string &s : args.values("dim")) {
    KILN_ASSIGN_OR_RETURN(auto kv, splitAssignment(s, "dim"));
    char *end = nullptr;
    long long v = std::strtoll(kv.second.c_str(), &end, 10);
    if (kv.second.empty() || *end || v < 0)
      return makeError("--dim ", kv.first, ": '", kv.second, "' is not a non-negative integer");
    spec.dims[kv.first] = v;
  }
  if (auto seed = args.value("seed")) {
    char *end = nullptr;
    spec.seed = std::strtoull(seed->c_str(), &end, 10);
    if (seed->empty() || *end) return makeError("--seed: '", *seed, "' is not an integer");
  }
  return spec;
}

std::string summarize(const Tensor &t) {
  std::ostringstream os;
  int64_t n = t.numel();
  if (t.dtype() == DType::String) {
    os << "[";
    for (int64_t i = 0; i < std::min<int64_t>(n, 4); ++i)
      os << (i ? ", " : "") << '"' << t.data<std::string>()[i] << '"';
    os << (n > 4 ? ", ...]" : "]");
    return os.str();
  }
  if (n == 0) return "(empty)";
  double lo = INFINITY, hi = -INFINITY, sum = 0;
  int64_t nans = 0;
  for (int64_t i = 0; i < n; ++i) {
    double v = t.getDouble(i);
    if (std::isnan(v)) {
      ++nans;
      continue;
    }
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    sum += v;
  }
  os << std::setprecision(6) << "min=" << lo << " max=" << hi
     << " mean=" << (n > nans ? sum / static_cast<double>(n - nans) : NAN);
  if (nans) os << " nan=" << nans;
  os << " [";
  for (int64_t i = 0; i < std::min<int64_t>(n, 6); ++i) os << (i ? ", " : "") << t.getDouble(i);
  os << (n > 6 ? ", ...]" : "]");
  return os.str();
}

} // namespace kiln::cli
