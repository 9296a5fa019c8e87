// The parameters the per-ISA kernel tests share: every kernel ISA this CPU
// can run (portable always), crossed with 1 and 2 threads, named
// "avx512_2threads" and so on.
#pragma once

#include "kernels/isa.h"

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

namespace kiln::kernels {

inline std::vector<GemmIsa> supportedIsas() {
  std::vector<GemmIsa> isas;
  for (GemmIsa isa : {GemmIsa::kPortable, GemmIsa::kAvx2, GemmIsa::kAvx512})
    if (gemmIsaSupported(isa)) isas.push_back(isa);
  return isas;
}

using IsaAndThreads = std::tuple<GemmIsa, int>;

inline auto isasAndThreads() {
  return ::testing::Combine(::testing::ValuesIn(supportedIsas()), ::testing::Values(1, 2));
}

inline std::string isaAndThreadsName(const ::testing::TestParamInfo<IsaAndThreads> &info) {
  return std::string(gemmIsaName(std::get<0>(info.param))) + "_" +
         std::to_string(std::get<1>(info.param)) + "threads";
}

} // namespace kiln::kernels
