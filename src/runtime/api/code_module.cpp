#include "runtime/api/code_module.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

namespace kiln::rt {

namespace {

bool writeAll(int fd, const uint8_t *data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

} // namespace

Expected<std::unique_ptr<CodeModule>> CodeModule::load(std::span<const uint8_t> so,
                                                       const std::string &name) {
  static const uint8_t kElfMagic[4] = {0x7f, 'E', 'L', 'F'};
  if (so.size() < 64 || std::memcmp(so.data(), kElfMagic, 4) != 0)
    return makeError("code section: not a shared object");
  std::string path;
  std::string tempPath;
  int fd = ::memfd_create(("kiln:" + name).c_str(), MFD_CLOEXEC);
  if (fd >= 0) {
    path = "/proc/self/fd/" + std::to_string(fd);
  } else {
    const char *dir = std::getenv("TMPDIR");
    tempPath = std::string(dir && *dir ? dir : "/tmp") + "/kiln-code-XXXXXX";
    fd = ::mkstemp(tempPath.data());
    if (fd < 0) return makeError("code section: cannot create a file for the code: ", std::strerror(errno));
    path = tempPath;
  }
  const bool written = writeAll(fd, so.data(), so.size());
  void *handle = written ? ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL) : nullptr;
  const std::string why = !written ? std::string("write failed: ") + std::strerror(errno)
                                   : handle ? "" : (::dlerror() ? ::dlerror() : "dlopen failed");
  if (!tempPath.empty()) ::unlink(tempPath.c_str());
  if (!handle) {
    ::close(fd);
    return makeError("code section: cannot load the kernels: ", why);
  }
  // The descriptor stays open while the library is loaded: dlopen matches
  // already-loaded libraries by path, so a recycled /proc/self/fd/N would
  // hand back another model's code.
  auto module = std::unique_ptr<CodeModule>(new CodeModule());
  module->handle_ = handle;
  module->fd_ = fd;
  return module;
}

CodeModule::~CodeModule() {
  if (handle_) ::dlclose(handle_);
  if (fd_ >= 0) ::close(fd_);
}

void *CodeModule::lookup(const std::string &symbol) const {
  return handle_ ? ::dlsym(handle_, symbol.c_str()) : nullptr;
}

} // namespace kiln::rt
