// Small JSON helpers for the tools' --json outputs.
#pragma once

#include <string>

namespace kiln {

// `s` as a JSON string literal, quotes included (control characters escaped).
std::string jsonString(const std::string &s);

} // namespace kiln
