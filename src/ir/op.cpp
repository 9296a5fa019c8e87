#include "ir/op.h"

#include <cassert>
#include <sstream>
#include <unordered_map>

namespace kiln {

std::string_view attrKindName(AttrKind k) {
  switch (k) {
  case AttrKind::Int: return "i";
  case AttrKind::Float: return "f";
  case AttrKind::String: return "s";
  case AttrKind::Tensor: return "t";
  case AttrKind::Graph: return "g";
  case AttrKind::Ints: return "ints";
  case AttrKind::Floats: return "floats";
  case AttrKind::Strings: return "strings";
  case AttrKind::Type: return "type";
  }
  return "?";
}

namespace {

struct RawRow {
  const char *name;
  int minIn, maxIn, minOut, maxOut;
  const char *attrs;
  const char *summary;
};

constexpr RawRow kRows[] = {
#define KILN_OP(Name, minIn, maxIn, minOut, maxOut, attrs, summary)                                \
  {#Name, minIn, maxIn, minOut, maxOut, attrs, summary},
#include "ir/ops/elementwise.def"
#include "ir/ops/reduce.def"
#include "ir/ops/nn.def"
#include "ir/ops/tensor.def"
#include "ir/ops/control.def"
#include "ir/ops/signal.def"
#include "ir/ops/compiler.def"
#undef KILN_OP
};
static_assert(sizeof(kRows) / sizeof(kRows[0]) == static_cast<size_t>(OpKind::NumOps));

AttrKind parseAttrKind(const std::string &s) {
  for (AttrKind k : {AttrKind::Int, AttrKind::Float, AttrKind::String, AttrKind::Tensor,
                     AttrKind::Graph, AttrKind::Ints, AttrKind::Floats, AttrKind::Strings,
                     AttrKind::Type})
    if (attrKindName(k) == s) return k;
  assert(false && "bad attribute kind in op table");
  return AttrKind::Int;
}

// Parses "name:kind[=default]" entries; '!' after the name marks required.
std::vector<AttrSpec> parseAttrSpecs(const char *text) {
  std::vector<AttrSpec> specs;
  std::istringstream in(text);
  std::string tok;
  while (in >> tok) {
    AttrSpec spec;
    size_t colon = tok.find(':');
    assert(colon != std::string::npos);
    spec.name = tok.substr(0, colon);
    if (!spec.name.empty() && spec.name.back() == '!') {
      spec.required = true;
      spec.name.pop_back();
    }
    std::string rest = tok.substr(colon + 1);
    size_t eq = rest.find('=');
    if (eq != std::string::npos) {
      spec.defaultText = rest.substr(eq + 1);
      rest = rest.substr(0, eq);
    }
    spec.kind = parseAttrKind(rest);
    specs.push_back(std::move(spec));
  }
  return specs;
}

std::vector<OpSchema> buildSchemas() {
  std::vector<OpSchema> out;
  for (size_t i = 0; i < std::size(kRows); ++i) {
    const RawRow &r = kRows[i];
    out.push_back(OpSchema{static_cast<OpKind>(i), r.name, r.minIn, r.maxIn, r.minOut, r.maxOut,
                           parseAttrSpecs(r.attrs), r.summary});
  }
  return out;
}

} // namespace

const AttrSpec *OpSchema::findAttr(std::string_view attr) const {
  for (const AttrSpec &s : attrs)
    if (s.name == attr) return &s;
  return nullptr;
}

const std::vector<OpSchema> &allOpSchemas() {
  static const std::vector<OpSchema> schemas = buildSchemas();
  return schemas;
}

const OpSchema &opSchema(OpKind kind) { return allOpSchemas()[static_cast<size_t>(kind)]; }

std::string_view opName(OpKind kind) { return opSchema(kind).name; }

std::optional<OpKind> opFromName(std::string_view name) {
  static const auto *index = [] {
    auto *m = new std::unordered_map<std::string_view, OpKind>();
    for (const OpSchema &s : allOpSchemas()) (*m)[s.name] = s.kind;
    return m;
  }();
  auto it = index->find(name);
  if (it == index->end()) return std::nullopt;
  return it->second;
}

} // namespace kiln
