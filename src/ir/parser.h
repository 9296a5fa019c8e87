// The parser of the Graph IR's text form (".kir"), the inverse of
// ir/printer.h. It builds the graph and checks what it needs for that
// (syntax, op names, that every name refers to a value in scope); everything
// else (arity, attribute kinds, ...) is the verifier's job, so tests can also
// write invalid graphs as text. It is safe on any input: errors are values
// ("file:line:col: message"), region and type nesting are bounded, and no
// tensor is allocated before the text holding its data has been read.
//
// Grammar (EBNF; `//` starts a comment that runs to the end of the line):
//
//   model      ::= [ 'kiln.model' [ 'opsets' '{' [ opset { ',' opset } ] '}' ]
//                                 [ 'producer' STRING ] ] graph
//   opset      ::= STRING '=' INT
//   graph      ::= 'graph' GRAPHNAME '(' [ param { ',' param } ] ')'
//                  '->' '(' [ VALUE { ',' VALUE } ] ')' '{' { node } '}'
//   param      ::= VALUE ':' type
//   node       ::= [ VALUE { ',' VALUE } '=' ] IDENT '(' [ operand { ',' operand } ] ')'
//                  [ '{' [ attr { ',' attr } ] '}' ] [ 'name' STRING ]
//                  [ ':' type { ',' type } ]           (one type per result, required)
//   operand    ::= VALUE | '_'                          ('_': absent optional input)
//   attr       ::= ( IDENT | STRING ) '=' attrvalue
//   attrvalue  ::= INT | float | STRING | list | tensor | graph | type
//   list       ::= [ 'ints' | 'floats' | 'strings' ] '[' [ scalar { ',' scalar } ] ']'
//   tensor     ::= 'dense' '<' ( 'undefined' | DTYPE '[' [ INT { ',' INT } ] ']' ) '>'
//                  ( '[' [ scalar { ',' scalar } ] ']' | 'hex' STRING | 'elided' )
//   scalar     ::= INT | float | STRING | 'true' | 'false'
//   float      ::= FLOAT | [ '-' ] 'inf' | [ '-' ] 'nan' [ '(' HEXINT ')' ]
//   type       ::= DTYPE '[' ( '*' | [ dim { ',' dim } ] ) ']'
//                | 'seq' '<' type '>' | 'opt' '<' type '>'
//   dim        ::= INT | '?' | IDENT | STRING
//
//   VALUE      ::= '%' ( NAMECHAR+ | STRING )          NAMECHAR: [A-Za-z0-9_.$/-]
//   GRAPHNAME  ::= '@' ( NAMECHAR+ | STRING )
//   IDENT      ::= [A-Za-z_] [A-Za-z0-9_.$]*
//   STRING     ::= '"' { char | '\\' ( '"' | '\\' | 'n' | 't' | 'r' | 'x' HEX HEX ) } '"'
//   INT, FLOAT ::= decimal numbers; a FLOAT has a '.' or an exponent
//
// Meaning:
// - Names are scoped: a graph sees its own values and those of the graphs
//   enclosing it that were defined before the node holding it; a name may not
//   be defined twice in one scope chain (sibling regions may reuse names).
//   Graph outputs are resolved at the end of the graph's body.
// - A list's kind is ints when every element is an integer, floats when one
//   is a float, strings when they are strings; `[]` and integers for a float
//   attribute take their kind from the op table, where it declares one.
// - Tensor `hex` data is the raw little-endian bytes of the elements; NaN
//   payloads are nan(0x<bits of the element type>); `elided` does not parse.
#pragma once

#include "ir/graph.h"
#include "support/status.h"

#include <string_view>

namespace kiln {

// Regions nested deeper than this are rejected (the importer uses the same
// bound), as are types nested deeper than kMaxTypeDepth.
inline constexpr int kMaxParseRegionDepth = 64;
inline constexpr int kMaxTypeDepth = 64;

Expected<Model> parseModel(std::string_view text, std::string_view fileNameForErrors);

} // namespace kiln
