// kiln's sgemm vs oneDNN's dnnl_sgemm vs OpenBLAS's cblas_sgemm, square
// row-major shapes, 1 and 2 threads; then kiln's u8 x s8 -> s32 igemm vs
// oneDNN's dnnl_gemm_u8s8s32 (both packing per call, as the comparator
// does; kiln also with B pre-packed, the weights case). Libraries are interleaved per size and
// the best of several repeats is kept, so a noisy shared machine hurts all
// three alike. The comparators are linked into this executable only; kiln
// itself never depends on them.
//
// Usage: OPENBLAS_CORETYPE=SkylakeX gemm_bench [--sizes 256,1024,2048] [--threads 1,2] [--repeats
// 5] [--only f32|int8]
#include "kernels/gemm.h"
#include "kernels/igemm.h"
#include "runtime/thread_pool.h"

#include <cblas.h>
#include <dlfcn.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::vector<int> parseList(const char *s) {
  std::vector<int> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(std::atoi(item.c_str()));
  return out;
}

// oneDNN runs on OpenMP; its thread count is set through libgomp, which
// libdnnl already loaded (no -fopenmp needed here).
void setOmpThreads(int n) {
  using Fn = void (*)(int);
  if (auto fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"))) fn(n);
}

// Best seconds per call: each repeat times enough calls to last >= 50 ms.
double bestSeconds(const std::function<void()> &call, int repeats) {
  call(); // warm up: packing buffers, thread start-up, page faults
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    int iters = 0;
    auto start = std::chrono::steady_clock::now();
    double elapsed = 0;
    do {
      call();
      ++iters;
      elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    } while (elapsed < 0.05);
    best = std::min(best, elapsed / iters);
  }
  return best;
}

void runF32(const std::vector<int> &sizes, const std::vector<int> &threadCounts, int repeats);
void runInt8(const std::vector<int> &sizes, const std::vector<int> &threadCounts, int repeats);

} // namespace

int main(int argc, char **argv) {
  std::vector<int> sizes{256, 1024, 2048}, threadCounts{1, 2};
  int repeats = 5;
  std::string only;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--sizes"))
      sizes = parseList(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--threads"))
      threadCounts = parseList(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--repeats"))
      repeats = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--only"))
      only = argv[i + 1];
  }
  if (only != "int8") runF32(sizes, threadCounts, repeats);
  if (only != "f32") runInt8(sizes, threadCounts, repeats);
  return 0;
}

namespace {

void runF32(const std::vector<int> &sizes, const std::vector<int> &threadCounts, int repeats) {
  std::printf("kiln isa: %s\n", kiln::kernels::gemmIsaName(kiln::kernels::bestGemmIsa()));
  std::printf("%7s %7s %12s %12s %12s %11s %11s\n", "size", "threads", "kiln GF/s", "oneDNN GF/s",
              "OpenBLAS GF/s", "kiln/oneDNN", "kiln/OBLAS");
  for (int threads : threadCounts) {
    kiln::runtime::ThreadPool pool(threads);
    setOmpThreads(threads);
    openblas_set_num_threads(threads);
    for (int n : sizes) {
      std::mt19937 rng(7);
      std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
      std::vector<float> A(size_t(n) * n), B(size_t(n) * n), C(size_t(n) * n);
      for (float &x : A) x = dist(rng);
      for (float &x : B) x = dist(rng);
      kiln::kernels::GemmOptions opts;
      opts.pool = &pool;
      auto kiln = [&] {
        kiln::kernels::sgemm(false, false, n, n, n, 1.0f, A.data(), n, B.data(), n, 0.0f, C.data(),
                             n, opts);
      };
      auto dnnl = [&] {
        dnnl_sgemm('N', 'N', n, n, n, 1.0f, A.data(), n, B.data(), n, 0.0f, C.data(), n);
      };
      auto oblas = [&] {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, A.data(), n, B.data(),
                    n, 0.0f, C.data(), n);
      };
      double tk = 1e30, td = 1e30, to = 1e30;
      for (int round = 0; round < 3; ++round) { // interleave the libraries
        tk = std::min(tk, bestSeconds(kiln, repeats));
        td = std::min(td, bestSeconds(dnnl, repeats));
        to = std::min(to, bestSeconds(oblas, repeats));
      }
      double flops = 2.0 * n * n * double(n);
      double gk = flops / tk * 1e-9, gd = flops / td * 1e-9, go = flops / to * 1e-9;
      std::printf("%7d %7d %12.1f %12.1f %12.1f %10.1f%% %10.1f%%\n", n, threads, gk, gd, go,
                  100 * gk / gd, 100 * gk / go);
      std::fflush(stdout);
    }
  }
}

void runInt8(const std::vector<int> &sizes, const std::vector<int> &threadCounts, int repeats) {
  namespace k = kiln::kernels;
  std::printf("\nu8 x s8 -> s32, kiln isa: %s\n", k::igemmIsaName(k::resolveIgemmIsa(k::IgemmIsa::kAuto)));
  std::printf("%7s %7s %12s %14s %12s %11s %15s\n", "size", "threads", "kiln GOP/s",
              "kiln pkB GOP/s", "oneDNN GOP/s", "kiln/oneDNN", "kiln pkB/oneDNN");
  for (int threads : threadCounts) {
    kiln::runtime::ThreadPool pool(threads);
    setOmpThreads(threads);
    for (int n : sizes) {
      std::mt19937 rng(7);
      std::uniform_int_distribution<int> byte(0, 255);
      std::vector<uint8_t> A(size_t(n) * n);
      std::vector<int8_t> B(size_t(n) * n);
      std::vector<int32_t> C(size_t(n) * n);
      for (auto &x : A) x = uint8_t(byte(rng));
      for (auto &x : B) x = int8_t(byte(rng) - 128);
      const k::PackedInt8 packed = k::PackedInt8::packB(n, n, {B.data(), n, true, false});
      k::StoreI32 store{C.data(), n};
      k::IgemmProblem p;
      p.M = p.N = p.K = n;
      p.a = {A.data(), n, false, false};
      p.b = {B.data(), n, true, false};
      p.finish = k::storeI32(&store);
      p.pool = &pool;
      k::IgemmProblem pp = p;
      pp.packedB = &packed;
      auto kiln = [&] { k::igemm(p); };
      auto kilnPacked = [&] { k::igemm(pp); };
      const int32_t co = 0;
      auto dnnl = [&] {
        dnnl_gemm_u8s8s32('N', 'N', 'F', n, n, n, 1.0f, A.data(), n, 0, B.data(), n, 0, 0.0f,
                          C.data(), n, &co);
      };
      double tk = 1e30, tp = 1e30, td = 1e30;
      for (int round = 0; round < 3; ++round) { // interleave
        tk = std::min(tk, bestSeconds(kiln, repeats));
        tp = std::min(tp, bestSeconds(kilnPacked, repeats));
        td = std::min(td, bestSeconds(dnnl, repeats));
      }
      const double ops = 2.0 * n * n * double(n);
      const double gk = ops / tk * 1e-9, gp = ops / tp * 1e-9, gd = ops / td * 1e-9;
      std::printf("%7d %7d %12.1f %14.1f %12.1f %10.1f%% %14.1f%%\n", n, threads, gk, gp, gd,
                  100 * gk / gd, 100 * gp / gd);
      std::fflush(stdout);
    }
  }
}

} // namespace
