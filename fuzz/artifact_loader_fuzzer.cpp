// libFuzzer target for the .kiln artifact loader: arbitrary bytes give a
// container or an error, never a crash or a read out of bounds. Random bytes
// almost never carry a matching checksum, so each input is also opened with
// verification off, which lets the fuzzer reach the section table checks and
// the readers behind them. Every section of a container that opens is read
// to the end with a ByteReader, and the manifest and program are loaded as
// the runtime loads them (with every kernel symbol resolving to a stub: the
// code section itself is only ever dlopened after the checksum passed).
#include "artifact/bytes.h"
#include "artifact/container.h"
#include "artifact/manifest.h"
#include "runtime/cpu/program_io.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace {

using namespace kiln::artifact;

void readAllSections(const Container &c, size_t size) {
  for (const SectionInfo &info : c.sections()) {
    std::span<const uint8_t> bytes = c.section(info.kind);
    if (bytes.size() != info.size || info.offset + info.size > size) {
      std::fprintf(stderr, "section %s is not where the table says\n",
                   sectionKindName(info.kind).c_str());
      std::abort();
    }
    ByteReader r(bytes, sectionKindName(info.kind) + " section");
    // Mixed reads, as a deserializer would make them, until the data runs out.
    while (r.ok() && r.remaining() > 0) {
      uint64_t n = r.readCount(1 << 20, 8);
      for (uint64_t i = 0; i < n && r.ok(); ++i) (void)r.readU64();
      (void)r.readString();
      (void)r.readF32();
      r.alignTo(8);
    }
    (void)r.status();
  }
  (void)c.describeSections();
}

void stubKernel(void *const *, const int64_t *, int64_t, int64_t) {}

void loadAsRuntime(const Container &c) {
  (void)Manifest::parse(c.section(SectionKind::Manifest));
  auto resolve = [](const std::string &) { return reinterpret_cast<void *>(&stubKernel); };
  try {
    (void)kiln::cpu::loadProgram(c.section(SectionKind::Program), c.section(SectionKind::Weights),
                                 nullptr, resolve);
  } catch (const std::bad_alloc &) { // the runtime reports these as corrupt files
  } catch (const std::length_error &) {
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto verified = Container::open(data, size);
  auto unverified = Container::open(data, size, {.verifyChecksum = false});
  if (verified.ok() && !unverified.ok()) {
    std::fprintf(stderr, "opens with the checksum verified but not without: %s\n",
                 unverified.error().message.c_str());
    std::abort();
  }
  if (unverified.ok()) {
    readAllSections(*unverified, size);
    loadAsRuntime(*unverified);
  }
  return 0;
}
