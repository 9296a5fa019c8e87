// The op table. Every op is defined once, in one of the ops/*.def files, as
// KILN_OP(Name, min inputs, max inputs, min outputs, max outputs, attributes,
// summary). The enum, name lookup, arity checks, attribute schemas with their
// defaults, and the op reference doc all come from those rows.
//
// Op names and semantics follow the latest ONNX opset: the importer rewrites
// older opsets' forms (attributes that later became inputs, changed defaults)
// into this one form, so every later layer knows exactly one meaning per op.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

enum class OpKind : uint16_t {
#define KILN_OP(Name, ...) Name,
#include "ir/ops/elementwise.def"
#include "ir/ops/reduce.def"
#include "ir/ops/nn.def"
#include "ir/ops/tensor.def"
#include "ir/ops/control.def"
#include "ir/ops/signal.def"
#include "ir/ops/compiler.def"
#undef KILN_OP
  NumOps
};

enum class AttrKind : uint8_t { Int, Float, String, Tensor, Graph, Ints, Floats, Strings, Type };

std::string_view attrKindName(AttrKind k);

struct AttrSpec {
  std::string name;
  AttrKind kind;
  bool required = false;
  std::optional<std::string> defaultText; // scalar default as written in the table
};

struct OpSchema {
  OpKind kind;
  std::string_view name;
  int minInputs, maxInputs; // maxInputs < 0: unbounded
  int minOutputs, maxOutputs;
  std::vector<AttrSpec> attrs;
  std::string_view summary;

  const AttrSpec *findAttr(std::string_view attr) const;
};

const OpSchema &opSchema(OpKind kind);
std::string_view opName(OpKind kind);
std::optional<OpKind> opFromName(std::string_view name);
// All schemas in table order (for docs and tests).
const std::vector<OpSchema> &allOpSchemas();
// Ops of ops/compiler.def: made by passes, never imported.
inline bool isCompilerOp(OpKind kind) { return kind == OpKind::Fused; }

} // namespace kiln
