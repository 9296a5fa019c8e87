// Small questions that patterns ask about values while matching: is it a
// constant, which one, is it made by this op, are two shapes provably equal.
// They never change the IR. Shared by the pattern passes (canonicalize,
// fuse-batchnorm, the recognize-* passes) so each pattern reads as its rule.
#pragma once

#include "ir/graph.h"
#include "passes/rewrite.h"

#include <optional>
#include <string>
#include <vector>

namespace kiln {

// The single element of a constant with one element, as a double.
std::optional<double> scalarOf(const Value *v);
// Every element of an integer constant, else nullopt.
std::optional<std::vector<int64_t>> intsOf(const Value *v);
// Whether `c` is a one-element constant near `value` whose rank is not above
// x's, so that broadcasting it against x leaves x's shape as it is.
bool isScalarFor(const Value *c, const Value *x, double value, double tol = 1e-5);
// Whether every element of a numeric or bool constant equals `x`.
bool isSplat(const Value *v, double x);

// The producer of `v` when it is a node of op `op`, else null.
Node *producedBy(const Value *v, OpKind op);

// |a - b| <= tol * max(|a|, |b|): exporters write 1/6 or sqrt(2) with f32
// precision or fewer digits, so constants are compared loosely.
bool near(double a, double b, double tol = 1e-5);
// The relative tolerance for a constant stored in `t` to stand for an exact
// value: 1e-5 for f32/f64, half an f16 or bf16 ulp above that (an f16
// model's 1/sqrt(2) is 1.4140625, 1e-4 off).
double constantTolerance(DType t);

// Dims provably equal at run time: static and equal, or the same named
// symbol. Unknown dims are never provably equal.
bool sameDim(const Dim &a, const Dim &b);
bool sameShape(const Shape &a, const Shape &b);
// Whether broadcasting a tensor of static shape `small` against a value of
// shape `big` leaves `big` unchanged: rank(small) <= rank(big) and each dim
// of `small` is 1 or provably equal to big's dim it lines up with.
bool broadcastsInto(const Shape64 &small, const Shape &big);

// The rank of a value's type when known, else nullopt.
std::optional<int64_t> rankOf(const Value *v);

// Axes of a constant `axes` operand normalized against `rank` (negative ones
// count from the back) and sorted; nullopt when not constant or out of range.
std::optional<std::vector<int64_t>> normalizedAxes(const Value *axes, int64_t rank);

// `name` + `suffix`, or "" for an empty name: names of nodes a rewrite
// creates, derived from the node they stand for; unnamed stays unnamed.
std::string suffixed(const std::string &name, const char *suffix);

// A product read off a tree of Mul nodes (and Div by a one-element
// constant) under `v`'s producer: the one-element constants multiplied into
// `constant`, every other operand in `factors`. The tree descends only into
// operands that it alone reads (one use, same graph), so replacing `v`
// leaves the whole tree dead. `v` itself may have any number of uses; when
// its producer is neither Mul nor Div the product is v alone.
struct Product {
  double constant = 1;
  std::vector<Value *> factors;
  std::vector<const Value *> constants; // to check their ranks and dtypes
};
Product productOf(Value *v, const Rewriter &rw);
// Whether every constant of `p` has x's dtype and a rank not above x's, so
// that the product has x's shape when its factors do.
bool constantsBroadcastInto(const Product &p, const Value *x);

} // namespace kiln
