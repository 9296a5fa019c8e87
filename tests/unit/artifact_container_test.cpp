// Tests of the .kiln container layer: the byte reader and writer, the
// checksum, and the container's writer and validating reader. The reader
// must turn every malformed input into an error, never a crash or a read out
// of bounds (the sanitizer build and the fuzzer check the latter).
#include "artifact/bytes.h"
#include "artifact/container.h"
#include "artifact/manifest.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>

namespace kiln::artifact {
namespace {

std::span<const uint8_t> asBytes(const std::string &s) {
  return {reinterpret_cast<const uint8_t *>(s.data()), s.size()};
}

std::string errorOf(const Expected<Container> &c) {
  return c.ok() ? std::string("(opened)") : c.error().message;
}

// ---------------------------------------------------------------- bytes

TEST(ByteReader, ReadsBackEverythingTheWriterWrote) {
  ByteWriter w;
  w.writeU8(0xab);
  w.writeU16(0xbeef);
  w.writeU32(0xdeadbeef);
  w.writeU64(0x0123456789abcdefull);
  w.writeI64(-42);
  w.writeF32(1.5f);
  w.writeF64(-0.25);
  w.writeString("hello");
  w.writeString("");
  w.writeCount(3);
  w.alignTo(16);
  w.writeBytes("raw", 3);
  EXPECT_EQ(w.size() % 16, 3u);
  std::string bytes = w.take();
  EXPECT_EQ(w.size(), 0u);

  ByteReader r(asBytes(bytes), "test");
  EXPECT_EQ(r.readU8(), 0xab);
  EXPECT_EQ(r.readU16(), 0xbeef);
  EXPECT_EQ(r.readU32(), 0xdeadbeefu);
  EXPECT_EQ(r.readU64(), 0x0123456789abcdefull);
  EXPECT_EQ(r.readI64(), -42);
  EXPECT_EQ(r.readF32(), 1.5f);
  EXPECT_EQ(r.readF64(), -0.25);
  EXPECT_EQ(r.readString(), "hello");
  EXPECT_EQ(r.readString(), "");
  EXPECT_EQ(r.readCount(10), 3u);
  r.alignTo(16);
  std::span<const uint8_t> raw = r.readBytes(3);
  ASSERT_EQ(raw.size(), 3u);
  EXPECT_EQ(std::memcmp(raw.data(), "raw", 3), 0);
  r.expectEnd();
  EXPECT_TRUE(r.ok()) << r.status().message();
}

TEST(ByteWriter, WritesLittleEndianAndPatches) {
  ByteWriter w;
  w.writeU32(0x01020304);
  w.writeU64(0);
  w.patchU64(4, 0x1122334455667788ull);
  EXPECT_EQ(w.take(), std::string("\x04\x03\x02\x01\x88\x77\x66\x55\x44\x33\x22\x11", 12));
}

TEST(ByteReader, TruncationNamesWhatAndWhere) {
  ByteWriter w;
  w.writeU32(7);
  w.writeU64(99); // a string length with only 10 bytes behind it
  w.writeBytes("0123456789", 10);
  std::string bytes = w.take();
  ByteReader r(asBytes(bytes), "program section");
  EXPECT_EQ(r.readU32(), 7u);
  EXPECT_EQ(r.readString(), "");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "program section: truncated at byte 12 reading a string of 99 bytes");
}

TEST(ByteReader, ErrorsAreStickyAndLaterReadsReturnZero) {
  std::string bytes("\x01\x02\x03", 3);
  ByteReader r(asBytes(bytes), "manifest section");
  EXPECT_EQ(r.readU32(), 0u);
  std::string first = r.status().message();
  EXPECT_EQ(first, "manifest section: truncated at byte 0 reading a u32");
  EXPECT_EQ(r.readU8(), 0u); // would fit, but the reader has failed
  EXPECT_EQ(r.readString(), "");
  EXPECT_TRUE(r.readBytes(1).empty());
  EXPECT_EQ(r.readCount(100), 0u);
  r.fail("something else");
  r.expectEnd();
  EXPECT_EQ(r.status().message(), first);
}

TEST(ByteReader, ReadCountRejectsCountsTheDataCannotHold) {
  ByteWriter w;
  w.writeCount(uint64_t(1) << 40);
  w.writeBytes(std::string(64, 'x'));
  std::string bytes = w.take();
  {
    ByteReader r(asBytes(bytes), "program section");
    EXPECT_EQ(r.readCount(std::numeric_limits<uint64_t>::max()), 0u);
    EXPECT_EQ(r.status().message(),
              "program section: at byte 0: count 1099511627776 cannot fit in the 64 bytes left");
  }
  {
    ByteReader r(asBytes(bytes), "program section");
    EXPECT_EQ(r.readCount(1000), 0u);
    EXPECT_EQ(r.status().message(),
              "program section: at byte 0: count 1099511627776 exceeds the limit of 1000");
  }
  ByteWriter w2;
  w2.writeCount(9);
  w2.writeBytes(std::string(64, 'x'));
  bytes = w2.take();
  ByteReader ok(asBytes(bytes), "program section");
  EXPECT_EQ(ok.readCount(100, 8), 0u); // 9 elements of >= 8 bytes need 72
  EXPECT_FALSE(ok.ok());
  ByteReader fits(asBytes(bytes), "program section");
  EXPECT_EQ(fits.readCount(100, 7), 9u);
  EXPECT_TRUE(fits.ok());
}

TEST(ByteReader, FailAndExpectEndReportTheOffset) {
  std::string bytes(12, '\0');
  ByteReader r(asBytes(bytes), "program section");
  r.readU64();
  r.expectEnd();
  EXPECT_EQ(r.status().message(),
            "program section: at byte 8: 4 unexpected bytes after the end of the data");
  ByteReader r2(asBytes(bytes), "program section");
  r2.readU32();
  r2.fail("unknown dtype 99");
  EXPECT_EQ(r2.status().message(), "program section: at byte 4: unknown dtype 99");
}

TEST(ByteReader, EmptyAndNullBuffersFailCleanly) {
  ByteReader r(nullptr, 100, "nothing");
  EXPECT_EQ(r.remaining(), 0u);
  EXPECT_EQ(r.readU8(), 0u);
  EXPECT_FALSE(r.ok());
}

// ---------------------------------------------------------------- checksum

TEST(Checksum, ValuesArePinnedBecauseTheyArePartOfTheFormat) {
  std::string text = "kiln artifact checksum, version 1: 0123456789abcdefghijklmnopqrstuv";
  // 67 bytes: two blocks and a 3-byte tail; 61 bytes: one block, three
  // tail words and a 5-byte partial word.
  EXPECT_EQ(checksum64(nullptr, 0), 0x5e7f1ec1b4aaa03bull);
  EXPECT_EQ(checksum64(text.data(), text.size()), 0xcdff60aa4cec60c7ull);
  EXPECT_EQ(checksum64(text.data(), text.size(), 7), 0xbf2fa6c96685e08cull);
  EXPECT_EQ(checksum64(text.data(), 61), 0x5b253498164a6400ull);
}

TEST(Checksum, EverySingleBitFlipAndEveryLengthChangesTheValue) {
  std::mt19937_64 rng(1);
  std::string buf(100, '\0');
  for (char &c : buf) c = char(rng());
  for (size_t size = 0; size <= buf.size(); ++size) {
    uint64_t base = checksum64(buf.data(), size);
    if (size < buf.size()) {
      std::string padded = buf.substr(0, size) + std::string(1, '\0');
      EXPECT_NE(checksum64(padded.data(), padded.size()), base) << "size " << size;
    }
    for (size_t bit = 0; bit < size * 8; ++bit) {
      std::string flipped = buf.substr(0, size);
      flipped[bit / 8] ^= char(1 << (bit % 8));
      ASSERT_NE(checksum64(flipped.data(), size), base) << "size " << size << " bit " << bit;
    }
  }
  EXPECT_NE(checksum64(buf.data(), buf.size(), 1), checksum64(buf.data(), buf.size(), 2));
}

TEST(Checksum, SpeedSanity) {
  // No assertion on time (machines differ); the number is for humans.
  std::string big(64 << 20, '\0');
  std::mt19937_64 rng(2);
  for (size_t i = 0; i + 8 <= big.size(); i += 8) {
    uint64_t v = rng();
    std::memcpy(&big[i], &v, 8);
  }
  auto start = std::chrono::steady_clock::now();
  uint64_t h = 0;
  for (int rep = 0; rep < 4; ++rep) h ^= checksum64(big.data(), big.size(), rep);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("checksum64: %.1f GB/s over 64 MiB (%016llx)\n", 4 * big.size() / seconds / 1e9,
              (unsigned long long)h);
}

// ---------------------------------------------------------------- container

std::string pattern(size_t n, uint8_t salt) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = char(i * 31 + salt);
  return s;
}

std::string makeFile(size_t weightBytes = 5000) {
  ContainerWriter w;
  EXPECT_TRUE(w.addSection(SectionKind::Manifest, pattern(37, 1)).ok());
  EXPECT_TRUE(w.addSection(SectionKind::Program, pattern(100, 2)).ok());
  EXPECT_TRUE(w.addSection(SectionKind::CpuCode, pattern(300, 3)).ok());
  EXPECT_TRUE(w.addSection(SectionKind::Weights, pattern(weightBytes, 4)).ok());
  return w.finish();
}

// A small file for exhaustive corruption: two sections, 8-byte aligned.
std::string makeSmallFile() {
  ContainerWriter w;
  EXPECT_TRUE(w.addSection(SectionKind::Manifest, pattern(13, 1)).ok());
  EXPECT_TRUE(w.addSection(SectionKind::Weights, pattern(21, 4), 8).ok());
  return w.finish();
}

// Recomputes the checksum field as the format documents it, so tests can
// make other fields wrong and still reach the checks behind the checksum.
void reseal(std::string &file) {
  std::string header = file.substr(0, kHeaderSize);
  std::memset(&header[24], 0, 8);
  uint64_t sum = checksum64(file.data() + kHeaderSize, file.size() - kHeaderSize,
                            checksum64(header.data(), header.size()));
  for (int i = 0; i < 8; ++i) file[24 + i] = char(sum >> (8 * i));
}

void putU32(std::string &file, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) file[at + i] = char(v >> (8 * i));
}
void putU64(std::string &file, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) file[at + i] = char(v >> (8 * i));
}
// Byte offset of field `field` (0 kind, 4 alignment, 8 offset, 16 size) of
// table entry `entry`.
size_t entryField(size_t entry, size_t field) {
  return kHeaderSize + entry * kSectionEntrySize + field;
}

Expected<Container> openString(const std::string &file, OpenOptions options = {}) {
  return Container::open(file.data(), file.size(), options);
}

TEST(Container, RoundTripsSectionsAtTheirAlignment) {
  std::string file = makeFile();
  auto c = openString(file);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->fileSize(), file.size());
  ASSERT_EQ(c->sections().size(), 4u);
  const std::pair<SectionKind, std::string> expected[] = {{SectionKind::Manifest, pattern(37, 1)},
                                                          {SectionKind::Program, pattern(100, 2)},
                                                          {SectionKind::CpuCode, pattern(300, 3)},
                                                          {SectionKind::Weights, pattern(5000, 4)}};
  for (const auto &[kind, bytes] : expected) {
    ASSERT_TRUE(c->has(kind));
    std::span<const uint8_t> s = c->section(kind);
    EXPECT_EQ(std::string(reinterpret_cast<const char *>(s.data()), s.size()), bytes);
  }
  for (const SectionInfo &s : c->sections()) {
    EXPECT_EQ(s.alignment, defaultSectionAlignment(s.kind));
    EXPECT_EQ(s.offset % s.alignment, 0u) << sectionKindName(s.kind);
  }
  EXPECT_EQ(c->sections()[3].offset % 4096, 0u);
  EXPECT_EQ(defaultSectionAlignment(SectionKind::Weights), 4096u);
  EXPECT_EQ(defaultSectionAlignment(SectionKind::CpuCode), 4096u);
  EXPECT_EQ(defaultSectionAlignment(SectionKind::Program), 8u);
}

TEST(Container, MissingSectionsAreEmptyAndAnEmptyContainerOpens) {
  ContainerWriter w;
  ASSERT_TRUE(w.addSection(SectionKind::Program, "").ok());
  std::string file = w.finish();
  auto c = openString(file);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_TRUE(c->has(SectionKind::Program));
  EXPECT_TRUE(c->section(SectionKind::Program).empty());
  EXPECT_FALSE(c->has(SectionKind::Weights));
  EXPECT_TRUE(c->section(SectionKind::Weights).empty());

  std::string empty = ContainerWriter().finish();
  EXPECT_EQ(empty.size(), kHeaderSize);
  auto e = openString(empty);
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_TRUE(e->sections().empty());
}

TEST(Container, WriterIsDeterministic) {
  EXPECT_EQ(makeFile(), makeFile());
  EXPECT_NE(makeFile(5000), makeFile(5001));
  std::string file = makeFile();
  // Everything the writer adds around the sections is zero padding.
  auto c = openString(file);
  ASSERT_TRUE(c.ok());
  std::vector<bool> covered(file.size(), false);
  for (size_t i = 0; i < kHeaderSize + 4 * kSectionEntrySize; ++i) covered[i] = true;
  for (const SectionInfo &s : c->sections())
    for (uint64_t i = 0; i < s.size; ++i) covered[s.offset + i] = true;
  for (size_t i = 0; i < file.size(); ++i)
    if (!covered[i] && file[i] != '\0') FAIL() << "byte " << i << " is not zero padding";
}

TEST(Container, WriterRejectsDuplicatesAndBadAlignments) {
  ContainerWriter w;
  ASSERT_TRUE(w.addSection(SectionKind::Weights, "x").ok());
  Status dup = w.addSection(SectionKind::Weights, "y");
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.message(), "the artifact already has a weights section");
  Status align = w.addSection(SectionKind::Program, "y", 12);
  ASSERT_FALSE(align.ok());
  EXPECT_EQ(align.message(), "program section: alignment 12 is not a power of two up to 65536");
  EXPECT_FALSE(w.addSection(SectionKind::Program, "y", 1 << 20).ok());
  EXPECT_FALSE(w.addSection(SectionKind(9), "y", 8).ok());
}

TEST(Container, DescribesItsSections) {
  std::string file = makeFile();
  auto c = openString(file);
  ASSERT_TRUE(c.ok());
  std::string table = c->describeSections();
  EXPECT_NE(table.find("section"), std::string::npos);
  EXPECT_NE(table.find("manifest"), std::string::npos);
  EXPECT_NE(table.find("cpu-code"), std::string::npos);
  EXPECT_NE(table.find(std::to_string(c->sections()[3].offset)), std::string::npos);
  EXPECT_NE(table.find("5000"), std::string::npos);
}

// ---------------------------------------------------------------- header errors

TEST(Container, RejectsBadMagic) {
  EXPECT_EQ(errorOf(Container::open(nullptr, 0)), "not a kiln artifact (bad magic)");
  EXPECT_EQ(errorOf(openString("KILN")), "not a kiln artifact (bad magic)");
  std::string file = makeFile();
  file[3] = 'X';
  EXPECT_EQ(errorOf(openString(file)), "not a kiln artifact (bad magic)");
  std::string elf = std::string("\177ELF") + std::string(100, '\x01');
  EXPECT_EQ(errorOf(openString(elf)), "not a kiln artifact (bad magic)");
}

TEST(Container, RejectsOtherVersionsAndHeaderSizes) {
  std::string file = makeFile();
  putU32(file, 8, 7);
  EXPECT_EQ(errorOf(openString(file)), "format version 7, this runtime reads version 3");
  file = makeFile();
  putU32(file, 12, 128);
  EXPECT_EQ(errorOf(openString(file)), "header size 128, expected 64");
  file = makeFile();
  file[40] = 1;
  EXPECT_EQ(errorOf(openString(file)), "header bytes [36, 64) are reserved and must be zero");
}

TEST(Container, RejectsTruncatedAndOverlongFiles) {
  std::string file = makeFile();
  size_t n = file.size();
  EXPECT_EQ(errorOf(Container::open(file.data(), n - 1)),
            strCat("truncated: header says ", n, " bytes, got ", n - 1));
  EXPECT_EQ(errorOf(Container::open(file.data(), 40)),
            "truncated: 40 bytes, less than the 64-byte header");
  std::string longer = file + "x";
  EXPECT_EQ(errorOf(openString(longer)),
            strCat("header says ", n, " bytes, got ", n + 1, " (trailing data)"));
}

TEST(Container, RejectsChecksumMismatch) {
  std::string file = makeFile();
  file[file.size() - 100] ^= 0x10; // inside the weights
  EXPECT_EQ(errorOf(openString(file)), "checksum mismatch: the file is corrupt");
  // The same file opens when the caller skips verification.
  EXPECT_TRUE(openString(file, {.verifyChecksum = false}).ok());
  reseal(file);
  EXPECT_TRUE(openString(file).ok());
}

// ---------------------------------------------------------------- table errors

// Each case corrupts the table of a 4-section file, reseals the checksum and
// expects this error.
struct TableCase {
  const char *name;
  void (*corrupt)(std::string &file);
  const char *error;
};

TEST(Container, RejectsBadSectionTables) {
  const TableCase cases[] = {
      {"unknown kind", [](std::string &f) { putU32(f, entryField(1, 0), 9); },
       "section 1: unknown kind 9"},
      {"kind zero", [](std::string &f) { putU32(f, entryField(0, 0), 0); },
       "section 0: unknown kind 0"},
      {"duplicate kind", [](std::string &f) { putU32(f, entryField(1, 0), 1); },
       "section 1 (manifest): a second manifest section (the first is section 0)"},
      {"alignment not a power of two", [](std::string &f) { putU32(f, entryField(1, 4), 24); },
       "section 1 (program): alignment 24 is not a power of two up to 65536"},
      {"alignment zero", [](std::string &f) { putU32(f, entryField(1, 4), 0); },
       "section 1 (program): alignment 0 is not a power of two up to 65536"},
      {"alignment too large", [](std::string &f) { putU32(f, entryField(3, 4), 1u << 31); },
       "section 3 (weights): alignment 2147483648 is not a power of two up to 65536"},
      {"misaligned offset", [](std::string &f) { putU64(f, entryField(3, 8), 4096 + 8); },
       "section 3 (weights): offset 4104 is not a multiple of its alignment 4096"},
      {"offset inside the table", [](std::string &f) { putU64(f, entryField(0, 8), 64); },
       "section 0 (manifest): offset 64 is inside the header or the section table (which end at "
       "160)"},
      {"offset inside the header", [](std::string &f) { putU64(f, entryField(0, 8), 0); },
       "section 0 (manifest): offset 0 is inside the header or the section table (which end at "
       "160)"},
      {"size past the end", [](std::string &f) { putU64(f, entryField(1, 16), 1u << 30); },
       nullptr},
      {"offset + size wraps around",
       [](std::string &f) { putU64(f, entryField(1, 16), ~uint64_t(0) - 100); }, nullptr},
      {"offset past the end",
       [](std::string &f) { putU64(f, entryField(1, 8), uint64_t(1) << 62); }, nullptr},
      {"overlap", [](std::string &f) { putU64(f, entryField(1, 8), 160); },
       "section 1 (program): bytes [160, 260) overlap section 0 (manifest) at [160, 197)"},
      {"section count too large", [](std::string &f) { putU32(f, 32, 1000000); }, nullptr},
  };
  for (const TableCase &tc : cases) {
    SCOPED_TRACE(tc.name);
    std::string file = makeFile();
    tc.corrupt(file);
    EXPECT_EQ(errorOf(openString(file)), "checksum mismatch: the file is corrupt");
    reseal(file);
    std::string error = errorOf(openString(file));
    if (tc.error) {
      EXPECT_EQ(error, tc.error);
    } else {
      EXPECT_NE(error, "(opened)");
      EXPECT_TRUE(error.find("past the end of the file") != std::string::npos) << error;
    }
  }
}

// ---------------------------------------------------------------- exhaustive corruption

TEST(Container, EveryTruncationIsAnError) {
  std::string file = makeSmallFile();
  ASSERT_TRUE(openString(file).ok());
  for (size_t n = 0; n < file.size(); ++n) {
    // A fresh allocation of exactly n bytes, so ASan sees any read past it.
    std::vector<uint8_t> prefix(file.begin(), file.begin() + n);
    EXPECT_FALSE(Container::open(prefix.data(), prefix.size()).ok()) << n;
    EXPECT_FALSE(Container::open(prefix.data(), prefix.size(), {.verifyChecksum = false}).ok())
        << n;
  }
}

TEST(Container, EveryByteFlipIsAnError) {
  std::string file = makeSmallFile();
  for (size_t i = 0; i < file.size(); ++i) {
    for (uint8_t mask : {0x01, 0x80, 0xff}) {
      std::vector<uint8_t> bad(file.begin(), file.end());
      bad[i] ^= mask;
      EXPECT_FALSE(Container::open(bad.data(), bad.size()).ok()) << "byte " << i;
      // Without the checksum some flips are legal files (a byte of section
      // data); none may crash, and whatever opens stays inside the buffer.
      auto c = Container::open(bad.data(), bad.size(), {.verifyChecksum = false});
      if (!c.ok()) continue;
      for (const SectionInfo &s : c->sections()) EXPECT_LE(s.offset + s.size, bad.size());
    }
  }
}

TEST(Container, RandomHeadersWithValidMagicNeverCrash) {
  std::mt19937_64 rng(3);
  std::string good = makeSmallFile();
  for (int iter = 0; iter < 20000; ++iter) {
    std::vector<uint8_t> buf(good.begin(), good.end());
    buf.resize(std::min<size_t>(buf.size(), rng() % (good.size() + 1)));
    // Scramble a few bytes past the magic (header, table, data).
    int flips = 1 + rng() % 4;
    for (int k = 0; k < flips && buf.size() > 8; ++k)
      buf[8 + rng() % (buf.size() - 8)] = uint8_t(rng());
    auto c = Container::open(buf.data(), buf.size(), {.verifyChecksum = false});
    if (!c.ok()) continue;
    for (const SectionInfo &s : c->sections()) {
      std::span<const uint8_t> bytes = c->section(s.kind);
      ASSERT_LE(bytes.data() + bytes.size(), buf.data() + buf.size());
    }
  }
}

} // namespace
} // namespace kiln::artifact

// The load-time CPU check (manifest.h): features this machine has pass,
// unknown or absent ones are reported by name.
TEST(ArtifactManifest, MissingCpuFeaturesNamesWhatTheMachineLacks) {
  using kiln::artifact::missingCpuFeatures;
  EXPECT_TRUE(missingCpuFeatures({"sse4.2"}).empty()); // every x86-64 machine kiln runs on
  EXPECT_EQ(missingCpuFeatures({"sse4.2", "no-such-feature"}),
            std::vector<std::string>{"no-such-feature"});
  if (!__builtin_cpu_supports("avx512f"))
    EXPECT_EQ(missingCpuFeatures({"avx512f"}), std::vector<std::string>{"avx512f"});
}
