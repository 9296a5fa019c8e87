// Native code from an artifact, made callable without a compiler: the
// artifact carries a shared object (the generated kernels, linked by
// `kiln compile`), which is written to an anonymous in-memory file
// (memfd_create) and opened with dlopen. The system loader then does what
// it does for any library: maps the segments with the right protections,
// applies relocations, resolves the few libm/libc symbols kernels call.
// Nothing touches the disk, no code is generated at run time, and tools
// (perf, gdb) see an ordinary library. Where memfd_create is unavailable a
// temporary file (unlinked right after dlopen) does the same.
#pragma once

#include "support/status.h"

#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace kiln::rt {

class CodeModule {
public:
  // `name` labels the memfd (seen in /proc/self/maps).
  static Expected<std::unique_ptr<CodeModule>> load(std::span<const uint8_t> sharedObject,
                                                    const std::string &name);
  ~CodeModule();
  // The address of `symbol`, or null.
  void *lookup(const std::string &symbol) const;

private:
  void *handle_ = nullptr;
  int fd_ = -1; // the memfd (or temporary file) the library was opened from
};

} // namespace kiln::rt
