// The printer of the Graph IR's text form (".kir"): a readable, MLIR-flavoured
// rendering of a model that the parser (ir/parser.h, which also holds the
// grammar) reads back. Printing, parsing and printing again gives the same
// bytes, so text is the interface of every IR test and of `kiln opt`.
//
//   kiln.model opsets {"" = 17} producer "pytorch 2.1"
//   graph @main(%x: f32[batch,3,224,224]) -> (%y) {
//     %w = Constant() {value = dense<f32[2]> [1.0, -2.5]} : f32[2]
//     %y = Conv(%x, %w, _) {pads = [1, 1, 1, 1]} name "conv1" : f32[batch,8,224,224]
//   }
//
// Value names are the IR's own names where they are unambiguous. A value with
// an empty name, or whose name is already visible in its scope (the graph and
// the graphs enclosing it), is printed with a fresh name that no value in the
// model has; names that are not plain ([A-Za-z0-9_.$/-]+) are quoted.
#pragma once

#include "ir/graph.h"

#include <string>
#include <string_view>

namespace kiln {

struct PrintOptions {
  // Prints tensors of more than kMaxLiteralElements elements as
  // `dense<f32[64,3,3,3]> elided`: for people reading dumps; does not parse.
  bool elideLargeConstants = false;
};

std::string printModel(const Model &model, const PrintOptions &options = {});
// A graph on its own (no model header); the parser reads it as a model with
// no opsets and no producer.
std::string printGraph(const Graph &graph, const PrintOptions &options = {});
// Type::str(), except that symbolic dimensions that are not identifiers are
// quoted (f32["batch size",3]) so that the text parses back.
std::string printType(const Type &type);

// ---- Lexical conventions shared with the parser ------------------------------

// Tensors with more elements than this print their bytes as hex.
inline constexpr int64_t kMaxLiteralElements = 16;

// Characters of an unquoted %value or @graph name.
inline bool isNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '$' || c == '/' || c == '-';
}
// Identifiers: op names, keywords, attribute names, symbolic dimensions.
inline bool isIdentStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
inline bool isIdentChar(char c) {
  return isIdentStart(c) || (c >= '0' && c <= '9') || c == '.' || c == '$';
}
bool isPlainName(std::string_view s);
bool isIdentifier(std::string_view s);
// "text" with \\ \" \n \t \r and \xHH for other control bytes; other bytes
// (UTF-8 included) are kept as they are.
std::string quoteString(std::string_view s);

} // namespace kiln
