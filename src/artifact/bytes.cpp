#include "artifact/bytes.h"

#include <bit>
#include <cassert>
#include <cstring>

namespace kiln::artifact {

// ---------------------------------------------------------------- writer

namespace {
// Appends the low `width` bytes of v, least significant first.
void appendLE(std::string &out, uint64_t v, size_t width) {
  char buf[8];
  for (size_t i = 0; i < width; ++i) buf[i] = static_cast<char>(v >> (8 * i));
  out.append(buf, width);
}
void storeLE(std::string &out, size_t offset, uint64_t v, size_t width) {
  assert(offset + width <= out.size());
  for (size_t i = 0; i < width; ++i) out[offset + i] = static_cast<char>(v >> (8 * i));
}
} // namespace

void ByteWriter::writeU8(uint8_t v) {
  appendLE(bytes_, v, 1);
}
void ByteWriter::writeU16(uint16_t v) {
  appendLE(bytes_, v, 2);
}
void ByteWriter::writeU32(uint32_t v) {
  appendLE(bytes_, v, 4);
}
void ByteWriter::writeU64(uint64_t v) {
  appendLE(bytes_, v, 8);
}
void ByteWriter::writeI64(int64_t v) {
  appendLE(bytes_, static_cast<uint64_t>(v), 8);
}
void ByteWriter::writeF32(float v) {
  appendLE(bytes_, std::bit_cast<uint32_t>(v), 4);
}
void ByteWriter::writeF64(double v) {
  appendLE(bytes_, std::bit_cast<uint64_t>(v), 8);
}

void ByteWriter::writeString(std::string_view s) {
  writeU64(s.size());
  bytes_.append(s);
}

void ByteWriter::writeBytes(const void *data, size_t size) {
  if (size) bytes_.append(static_cast<const char *>(data), size);
}

void ByteWriter::alignTo(size_t alignment) {
  assert(alignment && (alignment & (alignment - 1)) == 0);
  bytes_.resize((bytes_.size() + alignment - 1) & ~(alignment - 1), '\0');
}

void ByteWriter::patchU32(size_t offset, uint32_t v) {
  storeLE(bytes_, offset, v, 4);
}
void ByteWriter::patchU64(size_t offset, uint64_t v) {
  storeLE(bytes_, offset, v, 8);
}

std::string ByteWriter::take() {
  std::string out = std::move(bytes_);
  bytes_.clear();
  return out;
}

// ---------------------------------------------------------------- reader

ByteReader::ByteReader(const uint8_t *data, size_t size, std::string what)
    : data_(data), size_(data ? size : 0), what_(std::move(what)) {}

bool ByteReader::need(uint64_t n, std::string_view reading) {
  if (failed_) return false;
  if (n <= remaining()) return true;
  error_ = strCat(what_, ": truncated at byte ", pos_, " reading ", reading);
  failed_ = true;
  return false;
}

uint64_t ByteReader::readLE(size_t width, std::string_view reading) {
  if (!need(width, reading)) return 0;
  uint64_t v = 0;
  for (size_t i = 0; i < width; ++i) v |= uint64_t(data_[pos_ + i]) << (8 * i);
  pos_ += width;
  return v;
}

uint8_t ByteReader::readU8() {
  return static_cast<uint8_t>(readLE(1, "a u8"));
}
uint16_t ByteReader::readU16() {
  return static_cast<uint16_t>(readLE(2, "a u16"));
}
uint32_t ByteReader::readU32() {
  return static_cast<uint32_t>(readLE(4, "a u32"));
}
uint64_t ByteReader::readU64() {
  return readLE(8, "a u64");
}
int64_t ByteReader::readI64() {
  return static_cast<int64_t>(readLE(8, "an i64"));
}
float ByteReader::readF32() {
  return std::bit_cast<float>(static_cast<uint32_t>(readLE(4, "an f32")));
}
double ByteReader::readF64() {
  return std::bit_cast<double>(readLE(8, "an f64"));
}

std::string ByteReader::readString() {
  uint64_t n = readLE(8, "the length of a string");
  if (!need(n, strCat("a string of ", n, " bytes"))) return {};
  std::string s(reinterpret_cast<const char *>(data_ + pos_), n);
  pos_ += n;
  return s;
}

std::span<const uint8_t> ByteReader::readBytes(uint64_t size) {
  if (!need(size, strCat(size, " raw bytes"))) return {};
  std::span<const uint8_t> out(data_ + pos_, size);
  pos_ += size;
  return out;
}

uint64_t ByteReader::readCount(uint64_t max, uint64_t minElementBytes) {
  size_t at = pos_;
  uint64_t n = readLE(8, "an element count");
  if (failed_) return 0;
  uint64_t fits = minElementBytes ? remaining() / minElementBytes : UINT64_MAX;
  if (n > max) {
    error_ = strCat(what_, ": at byte ", at, ": count ", n, " exceeds the limit of ", max);
  } else if (n > fits) {
    error_ = strCat(what_, ": at byte ", at, ": count ", n, " cannot fit in the ", remaining(),
                    " bytes left");
  } else {
    return n;
  }
  failed_ = true;
  return 0;
}

void ByteReader::alignTo(size_t alignment) {
  assert(alignment && (alignment & (alignment - 1)) == 0);
  size_t aligned = pos_ + ((alignment - pos_ % alignment) % alignment);
  if (need(aligned - pos_, "alignment padding")) pos_ = aligned;
}

void ByteReader::fail(std::string_view message) {
  if (failed_) return;
  error_ = strCat(what_, ": at byte ", pos_, ": ", message);
  failed_ = true;
}

void ByteReader::expectEnd() {
  if (!failed_ && remaining() != 0)
    fail(strCat(remaining(), " unexpected bytes after the end of the data"));
}

Status ByteReader::status() const {
  if (!failed_) return Status::success();
  return makeError(error_);
}

} // namespace kiln::artifact
