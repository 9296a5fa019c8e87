#include "support/npy.h"

#include <cstring>
#include <fstream>
#include <sstream>

namespace kiln {

namespace {

// numpy descr ("<f4") for each dtype kiln writes natively.
const char *descrOf(DType d) {
  switch (d) {
  case DType::F32: return "<f4";
  case DType::F64: return "<f8";
  case DType::F16: return "<f2";
  case DType::I8: return "|i1";
  case DType::U8: return "|u1";
  case DType::I16: return "<i2";
  case DType::U16: return "<u2";
  case DType::I32: return "<i4";
  case DType::U32: return "<u4";
  case DType::I64: return "<i8";
  case DType::U64: return "<u8";
  case DType::Bool: return "|b1";
  default: return nullptr;
  }
}

std::optional<DType> dtypeOfDescr(std::string d) {
  if (d.size() == 3 && (d[0] == '<' || d[0] == '|' || d[0] == '=')) d[0] = '<';
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::I8, DType::U8, DType::I16, DType::U16,
                  DType::I32, DType::U32, DType::I64, DType::U64, DType::Bool}) {
    std::string mine = descrOf(t);
    mine[0] = '<';
    if (mine == d) return t;
  }
  return std::nullopt;
}

// Finds `'key': ` in the header dict and returns the text after it.
std::optional<std::string> dictValue(const std::string &header, const std::string &key) {
  size_t k = header.find("'" + key + "'");
  if (k == std::string::npos) return std::nullopt;
  size_t colon = header.find(':', k);
  if (colon == std::string::npos) return std::nullopt;
  size_t start = header.find_first_not_of(' ', colon + 1);
  if (start == std::string::npos) return std::nullopt;
  return header.substr(start);
}

} // namespace

Expected<Tensor> parseNpy(const std::string &bytes, const std::string &name) {
  auto fail = [&](const std::string &what) { return makeError(name, ": ", what); };
  if (bytes.size() < 10 || std::memcmp(bytes.data(), "\x93NUMPY", 6) != 0)
    return fail("not a .npy file (bad magic)");
  int major = static_cast<unsigned char>(bytes[6]);
  size_t headerLen, headerStart;
  if (major == 1) {
    headerLen = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
    headerStart = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return fail("truncated header");
    headerLen = 0;
    for (int i = 0; i < 4; ++i) headerLen |= static_cast<size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
    headerStart = 12;
  } else {
    return fail("unsupported .npy version " + std::to_string(major));
  }
  if (headerStart + headerLen > bytes.size()) return fail("truncated header");
  std::string header = bytes.substr(headerStart, headerLen);

  auto descr = dictValue(header, "descr");
  auto fortran = dictValue(header, "fortran_order");
  auto shapeText = dictValue(header, "shape");
  if (!descr || !fortran || !shapeText) return fail("malformed header: " + header);
  if (descr->size() < 2 || (*descr)[0] != '\'') return fail("malformed descr in header");
  std::string d = descr->substr(1, descr->find('\'', 1) - 1);
  auto dtype = dtypeOfDescr(d);
  if (!dtype) return fail("unsupported dtype '" + d + "'");
  if (fortran->rfind("True", 0) == 0) return fail("fortran-order arrays are not supported");

  if ((*shapeText)[0] != '(') return fail("malformed shape in header");
  size_t close = shapeText->find(')');
  if (close == std::string::npos) return fail("malformed shape in header");
  Shape64 shape;
  std::istringstream dims(shapeText->substr(1, close - 1));
  std::string tok;
  while (std::getline(dims, tok, ',')) {
    size_t s = tok.find_first_not_of(' ');
    if (s == std::string::npos) continue;
    char *end = nullptr;
    long long v = std::strtoll(tok.c_str() + s, &end, 10);
    if (end == tok.c_str() + s || v < 0) return fail("malformed shape in header");
    shape.push_back(v);
  }
  // Guard against absurd sizes before allocating.
  double elems = 1;
  for (int64_t v : shape) elems *= static_cast<double>(v);
  size_t dataStart = headerStart + headerLen;
  double need = elems * static_cast<double>(dtypeSize(*dtype));
  if (need > static_cast<double>(bytes.size() - dataStart))
    return fail("truncated data, expected " + std::to_string(static_cast<long long>(need)) +
                " bytes, found " + std::to_string(bytes.size() - dataStart));
  Tensor t(*dtype, shape);
  if (t.byteSize()) std::memcpy(t.mutableRaw(), bytes.data() + dataStart, t.byteSize());
  if (*dtype == DType::Bool) // any byte but 0 or 1 in a C++ bool is undefined
    for (int64_t i = 0; i < t.numel(); ++i) t.data<uint8_t>()[i] = t.data<uint8_t>()[i] != 0;
  return t;
}

Expected<Tensor> readNpy(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return makeError(path, ": cannot open file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parseNpy(ss.str(), path);
}

std::string serializeNpy(const Tensor &tensor) {
  Tensor t = tensor;
  if (t.dtype() == DType::BF16) {
    Tensor f(DType::F32, t.shape());
    for (int64_t i = 0; i < t.numel(); ++i) f.data<float>()[i] = t.data<BFloat16>()[i];
    t = f;
  }
  std::string header = "{'descr': '" + std::string(descrOf(t.dtype())) +
                       "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < t.shape().size(); ++i)
    header += std::to_string(t.shape()[i]) + (t.shape().size() == 1 || i + 1 < t.shape().size() ? "," : "");
  header += "), }";
  // Pad so that magic + len + header + '\n' is a multiple of 64.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>((header.size() >> 8) & 0xff);
  out += header;
  out.append(static_cast<const char *>(t.raw()), t.byteSize());
  return out;
}

Status writeNpy(const std::string &path, const Tensor &t) {
  if (t.dtype() == DType::String) return makeError(path, ": string tensors cannot be written as .npy");
  std::ofstream out(path, std::ios::binary);
  if (!out) return makeError(path, ": cannot open for writing");
  std::string bytes = serializeNpy(t);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) return makeError(path, ": write failed");
  return Status::success();
}

} // namespace kiln
