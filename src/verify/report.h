// What `kiln verify` shows of a VerifyResult: the terminal tables, the JSON
// document later tools read (schema "kiln-verify/1", documented in
// docs/verify.md and the README), and a self-contained HTML page with the
// per-layer error curve as inline SVG.
#pragma once

#include "verify/verify.h"

#include <ostream>
#include <string>

namespace kiln::verify {

// The per-output table, the per-layer table when bisection ran, the first
// divergence and a one-line verdict.
void printText(std::ostream &os, const VerifyResult &r);

// The JSON document; stable field names, non-finite numbers as null.
std::string toJson(const VerifyResult &r);

// One HTML page with no external resources: the relative-L2 curve by layer
// (log scale, inline SVG), the output table and the layer table.
std::string toHtml(const VerifyResult &r);

} // namespace kiln::verify
