// Little-endian byte encoding for the sections of a .kiln artifact: a
// ByteWriter that the compiler appends to, and a bounds-checked ByteReader
// that the runtime deserializes with. Both use only the standard library and
// support/, so the runtime can link them without LLVM, protobuf or the IR.
//
// Encoding: integers and floats are fixed-width little-endian (floats by
// their IEEE-754 bits); strings and element counts are a u64 length followed
// by the bytes or elements. The reader never touches a byte outside the
// buffer it was given, whatever that buffer holds.
#pragma once

#include "support/status.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace kiln::artifact {

// Appends encoded values to a growing byte string. Not thread-safe; cheap
// to move.
class ByteWriter {
public:
  void writeU8(uint8_t v);
  void writeU16(uint16_t v);
  void writeU32(uint32_t v);
  void writeU64(uint64_t v);
  void writeI64(int64_t v);
  void writeF32(float v);
  void writeF64(double v);
  // A u64 element count; the matching read is ByteReader::readCount.
  void writeCount(uint64_t n) { writeU64(n); }
  // A u64 byte length, then the bytes.
  void writeString(std::string_view s);
  // Raw bytes, no length.
  void writeBytes(const void *data, size_t size);
  void writeBytes(std::string_view bytes) { writeBytes(bytes.data(), bytes.size()); }
  // Zero bytes up to the next multiple of `alignment` (a power of two),
  // counted from the start of this writer.
  void alignTo(size_t alignment);

  // Overwrites 4 or 8 bytes written earlier (a size or offset known only
  // later). [offset, offset + 4/8) must already be written.
  void patchU32(size_t offset, uint32_t v);
  void patchU64(size_t offset, uint64_t v);

  void reserve(size_t total) { bytes_.reserve(total); }
  size_t size() const { return bytes_.size(); }
  // The bytes so far, valid until the next write.
  std::string_view view() const { return bytes_; }
  // The bytes so far; leaves the writer empty.
  std::string take();

private:
  std::string bytes_;
};

// Reads encoded values from a buffer it does not own (the buffer must
// outlive the reader and every span it returns).
//
// Errors are sticky rather than one Expected per read, because a
// deserializer makes dozens of reads in a row and checking each would bury
// its logic. The first read that would run past the end records an error
// ("program section: truncated at byte 1234 reading a string of 99 bytes");
// from then on every read returns zero / empty and leaves the error as it
// was. Check ok() (or status()) once at the end, and before any value is used
// to index or allocate. readCount() caps element counts by the bytes left, so
// `for (i < readCount(...))` loops and reserve() calls stay small on corrupt
// input.
class ByteReader {
public:
  // `what` names the buffer in errors ("program section").
  ByteReader(const uint8_t *data, size_t size, std::string what);
  ByteReader(std::span<const uint8_t> bytes, std::string what)
      : ByteReader(bytes.data(), bytes.size(), std::move(what)) {}

  uint8_t readU8();
  uint16_t readU16();
  uint32_t readU32();
  uint64_t readU64();
  int64_t readI64();
  float readF32();
  double readF64();
  // A u64 length, then that many bytes.
  std::string readString();
  // `size` raw bytes, as a view into the buffer (empty after an error).
  std::span<const uint8_t> readBytes(uint64_t size);
  // A u64 element count, checked before the caller allocates: at most `max`,
  // and at most remaining() / minElementBytes (each element takes at least
  // that many bytes to encode). Returns 0 after an error.
  uint64_t readCount(uint64_t max, uint64_t minElementBytes = 1);
  // Skips the zero padding ByteWriter::alignTo wrote (offsets count from the
  // start of this reader's buffer).
  void alignTo(size_t alignment);

  // Records an error found by the caller at the current position
  // ("program section: at byte 40: unknown dtype 99"), unless one is already
  // recorded.
  void fail(std::string_view message);
  // Records an error unless every byte has been read.
  void expectEnd();

  bool ok() const { return !failed_; }
  Status status() const;
  size_t offset() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

private:
  // True when `n` more bytes can be read; otherwise records the truncation.
  bool need(uint64_t n, std::string_view reading);
  uint64_t readLE(size_t width, std::string_view reading);

  const uint8_t *data_;
  size_t size_;
  size_t pos_ = 0;
  std::string what_;
  std::string error_;
  bool failed_ = false;
};

} // namespace kiln::artifact
