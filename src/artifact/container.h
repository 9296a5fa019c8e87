// The .kiln container: one file holding a fixed header, a section table and
// the sections themselves (manifest, program, code per target, weights). This
// layer knows only bytes: what a section means is the business of whoever
// reads it. It is runtime-side: it links nothing but support/.
//
// Layout (all integers little-endian):
//
//   header, 64 bytes
//     [0, 8)    magic "KILNART\0"
//     [8, 12)   u32 format version (kFormatVersion)
//     [12, 16)  u32 header size (64)
//     [16, 24)  u64 file size
//     [24, 32)  u64 checksum (checksum64, see below)
//     [32, 36)  u32 section count
//     [36, 64)  zero
//   section table at 64, one 24-byte entry per section
//     u32 kind (SectionKind), u32 alignment, u64 offset, u64 size
//   sections, each at a file offset that is a multiple of its alignment
//     (4096 for code and weights, so the runtime can mmap them in place;
//     8 for the others), with zero padding between them.
//
// The checksum covers every byte of the file except the checksum field: the
// body [64, fileSize) is hashed with the hash of the header (checksum field
// zeroed) as seed. Covering the header as well means flipping any byte of a
// file is reported, including a section count that would otherwise shrink
// the table without anything looking wrong.
#pragma once

#include "support/status.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace kiln::artifact {

// 2: general variants, dispatch steps; 3: loop steps, host ops with several
// outputs, sequence and optional constants, string tensors.
inline constexpr uint32_t kFormatVersion = 3;
inline constexpr size_t kHeaderSize = 64;
inline constexpr size_t kSectionEntrySize = 24;
inline constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'A', 'R', 'T', '\0'};
// The largest section alignment a file may ask for (64 KiB pages exist).
inline constexpr uint32_t kMaxSectionAlignment = 65536;

// What a section holds. Values are part of the file format: never renumber.
// Code sections for further targets take the next numbers (CudaCode = 5,
// VulkanCode = 6, ...); a runtime rejects kinds it does not know.
enum class SectionKind : uint32_t {
  Manifest = 1, // inputs, outputs, buffers, schedule, targets present
  Program = 2,  // the executable program description
  CpuCode = 3,  // native code for the CPU target
  Weights = 4,  // constant tensor data
};

bool isKnownSectionKind(uint32_t kind);
// "manifest", "program", "cpu-code", "weights"; "kind N" for unknown values.
std::string sectionKindName(uint32_t kind);
inline std::string sectionKindName(SectionKind kind) {
  return sectionKindName(static_cast<uint32_t>(kind));
}
// 4096 for sections the runtime maps in place (code, weights), 8 otherwise.
uint32_t defaultSectionAlignment(SectionKind kind);

// A fast 64-bit non-cryptographic hash, used as the file checksum (it
// detects corruption, not tampering). Four independent 64-bit lanes each
// take one 8-byte word of every 32-byte block:
//     lane = rotl((lane ^ word) * M_lane, 29)
// (xor, multiply by an odd lane constant, rotate: each step is a bijection
// of the lane for a fixed word and of the word for a fixed lane, so any
// change confined to one word always changes the hash). The
// 0-31 tail bytes go word by word into the lanes in order, the last partial
// word zero-padded. The lanes are then folded one at a time into an
// accumulator seeded with the length (again bijectively per lane), and the
// result goes through a xorshift-multiply avalanche. The four chains have no
// dependency on each other, so the CPU overlaps their multiplies (one per 8
// bytes): about 9 GB/s from cache and 3 GB/s from memory on the 2-core
// development machine, so 50 MB of weights cost about 15 ms. Words are read
// little-endian, so the value is the same on every host.
uint64_t checksum64(const void *data, size_t size, uint64_t seed = 0);

// One entry of the section table.
struct SectionInfo {
  SectionKind kind;
  uint32_t alignment;
  uint64_t offset; // from the start of the file
  uint64_t size;
};

// Builds a container. Sections are laid out in the order they were added;
// the same sections in the same order always give identical bytes.
class ContainerWriter {
public:
  // Errors: a kind added twice, an unknown kind, or an alignment that is not
  // a power of two up to kMaxSectionAlignment.
  Status addSection(SectionKind kind, std::string bytes, uint32_t alignment);
  Status addSection(SectionKind kind, std::string bytes) {
    return addSection(kind, std::move(bytes), defaultSectionAlignment(kind));
  }
  // The whole file. Leaves the writer empty.
  std::string finish();

private:
  struct Pending {
    SectionKind kind;
    uint32_t alignment;
    std::string bytes;
  };
  std::vector<Pending> sections_;
};

struct OpenOptions {
  // Hashing reads every byte once (milliseconds for 50 MB); callers that
  // have just verified the file, and the fuzzer, may skip it.
  bool verifyChecksum = true;
};

// A validated view of a container in memory (read into a buffer or mmapped).
// It does not own the bytes: they must outlive the Container and every span
// it hands out. Immutable after open, so safe to share between threads.
class Container {
public:
  // Checks the header (magic, version, header size, file size against
  // `size`, reserved bytes), the checksum, and every table entry (known kind,
  // no duplicate kind, power-of-two alignment, offset a multiple of it, in
  // bounds, not overlapping the header, the table or another section).
  // Reads nothing outside [data, data + size) whatever the bytes are. The
  // alignment is checked on file offsets: a section is aligned in memory
  // when `data` itself is page-aligned (as an mmap is).
  static Expected<Container> open(const void *data, size_t size, OpenOptions options = {});

  bool has(SectionKind kind) const { return find(kind) != nullptr; }
  // The section's bytes; empty when the file has none of that kind.
  std::span<const uint8_t> section(SectionKind kind) const;
  // The table in file order.
  const std::vector<SectionInfo> &sections() const { return sections_; }
  uint64_t fileSize() const { return size_; }

  // A small table for `kiln inspect`:
  //   section     offset       size  align
  //   manifest        88        120      8
  std::string describeSections() const;

private:
  const SectionInfo *find(SectionKind kind) const;

  const uint8_t *data_ = nullptr;
  size_t size_ = 0;
  std::vector<SectionInfo> sections_;
};

} // namespace kiln::artifact
