#include "artifact/container.h"

#include "artifact/bytes.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <iomanip>
#include <numeric>
#include <sstream>

namespace kiln::artifact {

// ---------------------------------------------------------------- kinds

bool isKnownSectionKind(uint32_t kind) {
  return kind >= uint32_t(SectionKind::Manifest) && kind <= uint32_t(SectionKind::Weights);
}

std::string sectionKindName(uint32_t kind) {
  switch (SectionKind(kind)) {
  case SectionKind::Manifest:
    return "manifest";
  case SectionKind::Program:
    return "program";
  case SectionKind::CpuCode:
    return "cpu-code";
  case SectionKind::Weights:
    return "weights";
  }
  return strCat("kind ", kind);
}

uint32_t defaultSectionAlignment(SectionKind kind) {
  return kind == SectionKind::CpuCode || kind == SectionKind::Weights ? 4096 : 8;
}

// ---------------------------------------------------------------- checksum

namespace {

// Odd constants with about half their bits set, drawn at random; nothing
// depends on their exact values beyond that, but they are part of the
// format.
constexpr uint64_t kLaneMul0 = 0xde6f33d199b1d245ull;
constexpr uint64_t kLaneMul1 = 0xd452341f19d9de2bull;
constexpr uint64_t kLaneMul2 = 0xad36101faf4ef617ull;
constexpr uint64_t kLaneMul3 = 0xb58708926c65a6f1ull;
constexpr uint64_t kFoldMul = 0xc5cd34a9c134d60bull;
constexpr uint64_t kAvalancheMul1 = 0x88b2695eb5bc964dull;
constexpr uint64_t kAvalancheMul2 = 0xf69d17d38a27c10full;

inline uint64_t load64LE(const uint8_t *p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  if constexpr (std::endian::native == std::endian::big) {
    uint64_t r = 0;
    for (int i = 0; i < 8; ++i) r = (r << 8) | ((v >> (8 * i)) & 0xff);
    v = r;
  }
  return v;
}

inline uint64_t laneStep(uint64_t lane, uint64_t word, uint64_t mul) {
  return std::rotl((lane ^ word) * mul, 29);
}

// Every step is invertible, so distinct inputs stay distinct.
inline uint64_t avalanche(uint64_t x) {
  x ^= x >> 32;
  x *= kAvalancheMul1;
  x ^= x >> 29;
  x *= kAvalancheMul2;
  x ^= x >> 32;
  return x;
}

} // namespace

uint64_t checksum64(const void *data, size_t size, uint64_t seed) {
  const uint8_t *p = static_cast<const uint8_t *>(data);
  uint64_t lanes[4] = {seed ^ kLaneMul3, seed ^ kLaneMul2, seed ^ kLaneMul1, seed ^ kLaneMul0};
  constexpr uint64_t muls[4] = {kLaneMul0, kLaneMul1, kLaneMul2, kLaneMul3};
  size_t n = size;
  // Named locals rather than the array keep the four chains in registers.
  uint64_t a = lanes[0], b = lanes[1], c = lanes[2], d = lanes[3];
  for (; n >= 32; n -= 32, p += 32) {
    a = laneStep(a, load64LE(p), kLaneMul0);
    b = laneStep(b, load64LE(p + 8), kLaneMul1);
    c = laneStep(c, load64LE(p + 16), kLaneMul2);
    d = laneStep(d, load64LE(p + 24), kLaneMul3);
  }
  lanes[0] = a, lanes[1] = b, lanes[2] = c, lanes[3] = d;
  // The tail: whole words into lanes 0, 1, 2, then a zero-padded last word.
  int lane = 0;
  for (; n >= 8; n -= 8, p += 8, ++lane)
    lanes[lane] = laneStep(lanes[lane], load64LE(p), muls[lane]);
  if (n) {
    uint64_t word = 0;
    for (size_t i = 0; i < n; ++i) word |= uint64_t(p[i]) << (8 * i);
    lanes[lane] = laneStep(lanes[lane], word, muls[lane]);
  }
  // The length tells a zero-padded tail from real zero bytes.
  uint64_t h = seed ^ (uint64_t(size) * kFoldMul);
  for (uint64_t l : lanes) h = std::rotl(h ^ avalanche(l), 31) * kFoldMul;
  return avalanche(h);
}

// ---------------------------------------------------------------- layout

namespace {

constexpr size_t kVersionOffset = 8;
constexpr size_t kChecksumOffset = 24;
constexpr size_t kReservedOffset = 36;

uint64_t alignUp(uint64_t v, uint64_t alignment) {
  return (v + alignment - 1) & ~(alignment - 1);
}

bool validAlignment(uint32_t a) {
  return std::has_single_bit(a) && a <= kMaxSectionAlignment;
}

// The file's checksum: the body hashed with the header's hash as seed, the
// checksum field counted as zero. `file` holds at least kHeaderSize bytes.
uint64_t fileChecksum(const uint8_t *file, size_t size) {
  uint8_t header[kHeaderSize];
  std::memcpy(header, file, kHeaderSize);
  std::memset(header + kChecksumOffset, 0, 8);
  return checksum64(file + kHeaderSize, size - kHeaderSize, checksum64(header, kHeaderSize));
}

std::string sectionLabel(size_t index, uint32_t kind) {
  if (!isKnownSectionKind(kind)) return strCat("section ", index);
  return strCat("section ", index, " (", sectionKindName(kind), ")");
}

} // namespace

// ---------------------------------------------------------------- writer

Status ContainerWriter::addSection(SectionKind kind, std::string bytes, uint32_t alignment) {
  if (!isKnownSectionKind(uint32_t(kind)))
    return makeError("cannot add a section of unknown kind ", uint32_t(kind));
  for (const Pending &s : sections_)
    if (s.kind == kind)
      return makeError("the artifact already has a ", sectionKindName(kind), " section");
  if (!validAlignment(alignment))
    return makeError(sectionKindName(kind), " section: alignment ", alignment,
                     " is not a power of two up to ", kMaxSectionAlignment);
  sections_.push_back({kind, alignment, std::move(bytes)});
  return Status::success();
}

std::string ContainerWriter::finish() {
  // Place the sections: each at the first offset after the previous one
  // that is a multiple of its alignment.
  uint64_t cursor = kHeaderSize + sections_.size() * kSectionEntrySize;
  std::vector<uint64_t> offsets;
  for (const Pending &s : sections_) {
    cursor = alignUp(cursor, s.alignment);
    offsets.push_back(cursor);
    cursor += s.bytes.size();
  }
  const uint64_t fileSize = cursor;

  ByteWriter w;
  w.reserve(fileSize);
  w.writeBytes(kMagic, sizeof(kMagic));
  w.writeU32(kFormatVersion);
  w.writeU32(kHeaderSize);
  w.writeU64(fileSize);
  w.writeU64(0); // the checksum, patched below
  w.writeU32(uint32_t(sections_.size()));
  w.alignTo(kHeaderSize); // the reserved bytes
  for (size_t i = 0; i < sections_.size(); ++i) {
    w.writeU32(uint32_t(sections_[i].kind));
    w.writeU32(sections_[i].alignment);
    w.writeU64(offsets[i]);
    w.writeU64(sections_[i].bytes.size());
  }
  for (size_t i = 0; i < sections_.size(); ++i) {
    w.alignTo(sections_[i].alignment);
    w.writeBytes(sections_[i].bytes);
  }
  sections_.clear();
  std::string_view file = w.view();
  w.patchU64(kChecksumOffset,
             fileChecksum(reinterpret_cast<const uint8_t *>(file.data()), file.size()));
  return w.take();
}

// ---------------------------------------------------------------- reader

namespace {

// Reads and checks the section table (the header is already checked).
Expected<std::vector<SectionInfo>> readSectionTable(const uint8_t *file, uint64_t fileSize,
                                                    uint32_t count) {
  if (count > (fileSize - kHeaderSize) / kSectionEntrySize)
    return makeError("section table of ", count, " entries runs past the end of the file (",
                     fileSize, " bytes)");
  const uint64_t tableEnd = kHeaderSize + uint64_t(count) * kSectionEntrySize;
  ByteReader r(file + kHeaderSize, tableEnd - kHeaderSize, "section table");
  std::vector<SectionInfo> sections;
  sections.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t kind = r.readU32(), alignment = r.readU32();
    uint64_t offset = r.readU64(), size = r.readU64();
    std::string label = sectionLabel(i, kind);
    if (!isKnownSectionKind(kind)) return makeError(label, ": unknown kind ", kind);
    for (size_t j = 0; j < sections.size(); ++j)
      if (uint32_t(sections[j].kind) == kind)
        return makeError(label, ": a second ", sectionKindName(kind),
                         " section (the first is section ", j, ")");
    if (!validAlignment(alignment))
      return makeError(label, ": alignment ", alignment, " is not a power of two up to ",
                       kMaxSectionAlignment);
    if (offset % alignment != 0)
      return makeError(label, ": offset ", offset, " is not a multiple of its alignment ",
                       alignment);
    if (offset < tableEnd)
      return makeError(label, ": offset ", offset,
                       " is inside the header or the section table (which end at ", tableEnd, ")");
    if (offset > fileSize || size > fileSize - offset)
      return makeError(label, ": ", size, " bytes at offset ", offset,
                       " run past the end of the file (", fileSize, " bytes)");
    sections.push_back({SectionKind(kind), alignment, offset, size});
  }
  KILN_RETURN_IF_ERROR(r.status()); // cannot fail: the table fits, checked above

  // Overlaps: sorted by offset, each section must end before the next starts.
  std::vector<size_t> order(sections.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    return std::pair(sections[x].offset, sections[x].size) <
           std::pair(sections[y].offset, sections[y].size);
  });
  for (size_t k = 1; k < order.size(); ++k) {
    const SectionInfo &prev = sections[order[k - 1]], &cur = sections[order[k]];
    if (prev.offset + prev.size > cur.offset)
      return makeError(sectionLabel(order[k], uint32_t(cur.kind)), ": bytes [", cur.offset, ", ",
                       cur.offset + cur.size, ") overlap ",
                       sectionLabel(order[k - 1], uint32_t(prev.kind)), " at [", prev.offset, ", ",
                       prev.offset + prev.size, ")");
  }
  return sections;
}

} // namespace

Expected<Container> Container::open(const void *data, size_t size, OpenOptions options) {
  const uint8_t *file = static_cast<const uint8_t *>(data);
  if (!file) size = 0;
  if (size < sizeof(kMagic) || std::memcmp(file, kMagic, sizeof(kMagic)) != 0)
    return makeError("not a kiln artifact (bad magic)");
  if (size < kHeaderSize)
    return makeError("truncated: ", size, " bytes, less than the ", kHeaderSize, "-byte header");

  ByteReader h(file + kVersionOffset, kHeaderSize - kVersionOffset, "header");
  uint32_t version = h.readU32(), headerSize = h.readU32();
  uint64_t fileSize = h.readU64(), checksum = h.readU64();
  uint32_t count = h.readU32();
  std::span<const uint8_t> reserved = h.readBytes(kHeaderSize - kReservedOffset);
  KILN_RETURN_IF_ERROR(h.status()); // cannot fail: the header is all there

  if (version != kFormatVersion)
    return makeError("format version ", version, ", this runtime reads version ", kFormatVersion);
  if (headerSize != kHeaderSize)
    return makeError("header size ", headerSize, ", expected ", kHeaderSize);
  if (std::any_of(reserved.begin(), reserved.end(), [](uint8_t b) { return b != 0; }))
    return makeError("header bytes [", kReservedOffset, ", ", kHeaderSize,
                     ") are reserved and must be zero");
  if (fileSize > size) return makeError("truncated: header says ", fileSize, " bytes, got ", size);
  if (fileSize < size)
    return makeError("header says ", fileSize, " bytes, got ", size, " (trailing data)");
  if (options.verifyChecksum && fileChecksum(file, size) != checksum)
    return makeError("checksum mismatch: the file is corrupt");

  KILN_ASSIGN_OR_RETURN(std::vector<SectionInfo> sections, readSectionTable(file, fileSize, count));
  Container c;
  c.data_ = file;
  c.size_ = size;
  c.sections_ = std::move(sections);
  return c;
}

const SectionInfo *Container::find(SectionKind kind) const {
  for (const SectionInfo &s : sections_)
    if (s.kind == kind) return &s;
  return nullptr;
}

std::span<const uint8_t> Container::section(SectionKind kind) const {
  const SectionInfo *s = find(kind);
  if (!s) return {};
  return {data_ + s->offset, size_t(s->size)};
}

std::string Container::describeSections() const {
  std::ostringstream os;
  os << std::left << std::setw(10) << "section" << std::right << std::setw(12) << "offset"
     << std::setw(12) << "size" << std::setw(7) << "align"
     << "\n";
  for (const SectionInfo &s : sections_)
    os << std::left << std::setw(10) << sectionKindName(s.kind) << std::right << std::setw(12)
       << s.offset << std::setw(12) << s.size << std::setw(7) << s.alignment << "\n";
  return os.str();
}

} // namespace kiln::artifact
