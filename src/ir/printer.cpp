// The Graph IR printer: names every value (see Namer), then writes the model
// header, the main graph and, inline in their nodes' attribute lists, the
// regions. The grammar is at the top of ir/parser.h.
#include "ir/printer.h"

#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>

namespace kiln {

// Hex tensor data is the raw in-memory bytes, documented as little-endian.
static_assert(std::endian::native == std::endian::little, "hex tensor data assumes little-endian");

bool isPlainName(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!isNameChar(c)) return false;
  return true;
}

bool isIdentifier(std::string_view s) {
  if (s.empty() || !isIdentStart(s[0])) return false;
  for (char c : s)
    if (!isIdentChar(c)) return false;
  return true;
}

std::string quoteString(std::string_view s) {
  static const char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\t':
      out += "\\t";
      break;
    case '\r':
      out += "\\r";
      break;
    default:
      if (u < 0x20 || u == 0x7f) {
        out += "\\x";
        out += kHex[u >> 4];
        out += kHex[u & 15];
      } else {
        out += c;
      }
    }
  }
  return out + "\"";
}

namespace {

std::string nameText(std::string_view sigil, const std::string &name) {
  return std::string(sigil) + (isPlainName(name) ? name : quoteString(name));
}

std::string dimText(const Dim &d) {
  if (!d.isSymbol()) return d.str();
  return isIdentifier(d.symbolName()) ? d.symbolName() : quoteString(d.symbolName());
}

// ---- Numbers -----------------------------------------------------------------

// Shortest text that parses back to the same value, always with a '.' or an
// exponent so that it reads as a float: 1.0, 0.1, 1e-05, -0.0, inf.
template <class F> std::string floatText(F v) {
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

// NaNs keep their bits: the quiet NaN a conversion produces is `nan`, any
// other (sign, payload) is nan(0x<bits of the storage type>).
std::string nanText(uint64_t bits, uint64_t canonical) {
  if (bits == canonical) return "nan";
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof(buf), bits, 16);
  return "nan(0x" + std::string(buf, r.ptr) + ")";
}

std::string f32Text(float v) {
  return std::isnan(v) ? nanText(std::bit_cast<uint32_t>(v), 0x7fc00000u) : floatText(v);
}
std::string f64Text(double v) {
  return std::isnan(v) ? nanText(std::bit_cast<uint64_t>(v), 0x7ff8000000000000ull) : floatText(v);
}
std::string f16Text(Half h) {
  bool nan = (h.bits & 0x7c00u) == 0x7c00u && (h.bits & 0x3ffu) != 0;
  return nan ? nanText(h.bits, 0x7e00u) : floatText(static_cast<float>(h));
}
std::string bf16Text(BFloat16 h) {
  bool nan = (h.bits & 0x7f80u) == 0x7f80u && (h.bits & 0x7fu) != 0;
  return nan ? nanText(h.bits, 0x7fc0u) : floatText(static_cast<float>(h));
}

template <class T> std::string elementText(const T &v) {
  if constexpr (std::is_same_v<T, std::string>)
    return quoteString(v);
  else if constexpr (std::is_same_v<T, bool>)
    return v ? "true" : "false";
  else if constexpr (std::is_same_v<T, float>)
    return f32Text(v);
  else if constexpr (std::is_same_v<T, double>)
    return f64Text(v);
  else if constexpr (std::is_same_v<T, Half>)
    return f16Text(v);
  else if constexpr (std::is_same_v<T, BFloat16>)
    return bf16Text(v);
  else if constexpr (std::is_signed_v<T>)
    return std::to_string(static_cast<int64_t>(v));
  else
    return std::to_string(static_cast<uint64_t>(v));
}

// ---- Names -------------------------------------------------------------------

// Decides the printed name of every value, walking the model in print order
// (inputs, then per node its regions, then its results; a region cannot see
// its own node's results). A value keeps its name unless it is empty or
// already visible (defined earlier in this graph or an enclosing one); then it
// gets a fresh name that no value in the model has. After one round trip
// every name is kept, which makes print -> parse -> print byte-identical.
class Namer {
public:
  explicit Namer(const Graph &root) { collect(root); }

  void nameGraph(const Graph &g) {
    scopes_.emplace_back();
    for (const Value *v : g.inputs()) define(v);
    for (const auto &n : g.nodes()) {
      for (const auto &[attrName, a] : n->attrs())
        if (a.kind == AttrKind::Graph && a.g) nameGraph(*a.g);
      for (const Value *v : n->outputs()) define(v);
    }
    scopes_.pop_back();
  }

  // Values not defined in the printed graphs (outer values of a region
  // printed alone, or dangling uses the verifier reports) keep their name if
  // no printed value has it, so the text stays readable and unambiguous.
  const std::string &nameOf(const Value *v) {
    auto it = names_.find(v);
    if (it != names_.end()) return it->second;
    std::string name = v->name();
    if (name.empty() || assigned_.count(name)) name = fresh(name);
    assigned_.insert(name);
    return names_[v] = std::move(name);
  }

private:
  void collect(const Graph &g) {
    for (const Value *v : g.inputs())
      if (v) raw_.insert(v->name());
    for (const auto &n : g.nodes()) {
      for (const Value *v : n->outputs()) raw_.insert(v->name());
      for (const Graph *r : n->regions()) collect(*r);
    }
  }

  bool visible(const std::string &name) const {
    for (const auto &scope : scopes_)
      if (scope.count(name)) return true;
    return false;
  }

  void define(const Value *v) {
    if (!v || names_.count(v)) return; // null, or a region shared by two nodes
    std::string name = v->name();
    if (name.empty() || visible(name)) name = fresh(name);
    scopes_.back().insert(name);
    assigned_.insert(name);
    names_[v] = std::move(name);
  }

  // "x" -> "x_1", "x_2", ...; "" -> "0", "1", ...; skipping every name in
  // the model and every fresh name already given.
  std::string fresh(const std::string &base) {
    int64_t &k = counters_[base];
    for (;;) {
      std::string candidate = base.empty() ? std::to_string(k) : base + "_" + std::to_string(k + 1);
      ++k;
      if (!raw_.count(candidate) && given_.insert(candidate).second) return candidate;
    }
  }

  std::unordered_set<std::string> raw_;
  std::unordered_set<std::string> given_;    // fresh names handed out
  std::unordered_set<std::string> assigned_; // every name handed out
  std::unordered_map<std::string, int64_t> counters_;
  std::vector<std::unordered_set<std::string>> scopes_;
  std::unordered_map<const Value *, std::string> names_;
};

// ---- Printer -----------------------------------------------------------------

class Printer {
public:
  Printer(const Graph &root, const PrintOptions &options) : namer_(root), options_(options) {
    namer_.nameGraph(root);
  }

  std::string take() { return std::move(out_); }

  void model(const Model &m) {
    out_ += "kiln.model";
    if (!m.opsets.empty()) {
      out_ += " opsets {";
      const char *sep = "";
      for (const auto &[domain, version] : m.opsets) {
        out_ += sep + quoteString(domain) + " = " + std::to_string(version);
        sep = ", ";
      }
      out_ += "}";
    }
    if (!m.producer.empty()) out_ += " producer " + quoteString(m.producer);
    out_ += "\n";
  }

  // `indent` is the indentation of the line the graph starts on; its nodes
  // go two spaces deeper.
  void graph(const Graph &g, int indent) {
    out_ += "graph " + nameText("@", g.name()) + "(";
    for (size_t i = 0; i < g.inputs().size(); ++i) {
      const Value *v = g.inputs()[i];
      out_ += (i ? ", " : "") + value(v) + ": " + (v ? printType(v->type()) : "f32[*]");
    }
    out_ += ") -> (";
    for (size_t i = 0; i < g.outputs().size(); ++i) out_ += (i ? ", " : "") + value(g.outputs()[i]);
    out_ += ") {\n";
    for (const auto &n : g.nodes()) node(*n, indent + 2);
    out_ += std::string(indent, ' ') + "}";
  }

private:
  std::string value(const Value *v) { return v ? nameText("%", namer_.nameOf(v)) : "_"; }

  void node(const Node &n, int indent) {
    out_ += std::string(indent, ' ');
    for (int i = 0; i < n.numOutputs(); ++i) out_ += (i ? ", " : "") + value(n.output(i));
    if (n.numOutputs()) out_ += " = ";
    out_ += std::string(opName(n.op())) + "(";
    for (int i = 0; i < n.numInputs(); ++i) out_ += (i ? ", " : "") + value(n.input(i));
    out_ += ")";
    if (!n.attrs().empty()) {
      out_ += " {";
      const char *sep = "";
      for (const auto &[name, a] : n.attrs()) {
        out_ += sep + (isIdentifier(name) ? name : quoteString(name)) + " = ";
        attribute(a, indent);
        sep = ", ";
      }
      out_ += "}";
    }
    if (!n.name().empty()) out_ += " name " + quoteString(n.name());
    for (int i = 0; i < n.numOutputs(); ++i)
      out_ += (i ? ", " : " : ") + printType(n.output(i)->type());
    out_ += "\n";
  }

  template <class T, class F> void list(const std::vector<T> &v, const char *kind, F &&text) {
    if (v.empty()) {
      out_ += std::string(kind) + " []"; // an empty list does not say its kind otherwise
      return;
    }
    out_ += "[";
    for (size_t i = 0; i < v.size(); ++i) out_ += (i ? ", " : "") + text(v[i]);
    out_ += "]";
  }

  void attribute(const Attribute &a, int indent) {
    switch (a.kind) {
    case AttrKind::Int:
      out_ += std::to_string(a.i);
      break;
    case AttrKind::Float:
      out_ += f32Text(a.f);
      break;
    case AttrKind::String:
      out_ += quoteString(a.s);
      break;
    case AttrKind::Tensor:
      tensor(a.t);
      break;
    case AttrKind::Type:
      out_ += printType(a.type);
      break;
    case AttrKind::Ints:
      list(a.ints, "ints", [](int64_t v) { return std::to_string(v); });
      break;
    case AttrKind::Floats:
      list(a.floats, "floats", f32Text);
      break;
    case AttrKind::Strings:
      list(a.strings, "strings", quoteString);
      break;
    case AttrKind::Graph:
      if (a.g)
        graph(*a.g, indent);
      else
        out_ += "<null graph>";
      break;
    }
  }

  void tensor(const Tensor &t) {
    if (!t.defined()) {
      out_ += "dense<undefined>";
      return;
    }
    out_ += "dense<" + std::string(dtypeName(t.dtype())) + shapeToString(t.shape()) + "> ";
    bool large = t.numel() > kMaxLiteralElements;
    if (large && options_.elideLargeConstants) {
      out_ += "elided";
    } else if (large && t.dtype() != DType::String) {
      hex(static_cast<const unsigned char *>(t.raw()), t.byteSize());
    } else {
      visitDType(t.dtype(), [&](auto tag) {
        using T = decltype(tag);
        out_ += "[";
        const T *data = t.data<T>();
        for (int64_t i = 0; i < t.numel(); ++i) out_ += (i ? ", " : "") + elementText(data[i]);
        out_ += "]";
      });
    }
  }

  void hex(const unsigned char *p, size_t n) {
    static const char kHex[] = "0123456789abcdef";
    size_t start = out_.size() + 4;
    out_ += "hex\"";
    out_.resize(start + 2 * n);
    for (size_t i = 0; i < n; ++i) {
      out_[start + 2 * i] = kHex[p[i] >> 4];
      out_[start + 2 * i + 1] = kHex[p[i] & 15];
    }
    out_ += "\"";
  }

  Namer namer_;
  PrintOptions options_;
  std::string out_;
};

} // namespace

std::string printType(const Type &type) {
  switch (type.kind()) {
  case Type::Kind::Sequence:
    return "seq<" + printType(type.element()) + ">";
  case Type::Kind::Optional:
    return "opt<" + printType(type.element()) + ">";
  case Type::Kind::Tensor:
    break;
  }
  std::string s(dtypeName(type.dtype()));
  const Shape &shape = type.shape();
  if (!shape.rankKnown) return s + "[*]";
  s += "[";
  for (size_t i = 0; i < shape.dims.size(); ++i) s += (i ? "," : "") + dimText(shape.dims[i]);
  return s + "]";
}

std::string printModel(const Model &model, const PrintOptions &options) {
  Printer p(*model.graph, options);
  p.model(model);
  p.graph(*model.graph, 0);
  return p.take() + "\n";
}

std::string printGraph(const Graph &graph, const PrintOptions &options) {
  Printer p(graph, options);
  p.graph(graph, 0);
  return p.take() + "\n";
}

} // namespace kiln
