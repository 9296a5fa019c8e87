# Lets a build directory include the GEMM benchmark before the top-level
# CMakeLists.txt adds it itself:
#   cmake ... -DCMAKE_PROJECT_kiln_INCLUDE=<src>/bench/gemm/hook.cmake
# (targets are resolved at generation time, so kiln_kernels may come later).
add_subdirectory(${CMAKE_CURRENT_LIST_DIR} ${CMAKE_BINARY_DIR}/bench/gemm)
