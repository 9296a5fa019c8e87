// Saving and loading CPU programs (the `.kiln` program section). A step
// lists its fields once, in a member template
//
//   template <class A> void io(A &a) { a(label_, in_, out_, shape_, weights_); }
//
// that a Saver (writing) and a Loader (reading) both run, so the two sides
// cannot drift apart. Fields are encoded with artifact::ByteWriter; tensors
// (constants, weights) go to a TensorTable and are written by index, so a
// weight shared by several steps is stored once, in the weights section
// (string tensors in the table itself).
//
// Loading trusts nothing: the reader is bounds-checked and sticky (bytes.h),
// counts are capped by the bytes left, and every slot index is checked
// against the program's slot count before a step may run.
#pragma once

#include "artifact/bytes.h"
#include "kernels/conv.h"
#include "kernels/pool.h"
#include "support/tensor.h"

#include <functional>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kiln::cpu {

// The tensors a program refers to; index i is stored in the weights section.
struct TensorTable {
  std::vector<Tensor> tensors;
  // Adds `t` (once per buffer and shape) and returns its index.
  int add(const Tensor &t);

private:
  std::unordered_map<std::string, int> index_;
};

// Resolves a generated kernel's symbol to its entry (JIT or loaded code).
using SymbolResolver = std::function<void *(const std::string &symbol)>;

template <class T, class A>
concept HasIo = requires(T &t, A &a) { t.io(a); };

class Saver {
public:
  Saver(artifact::ByteWriter &out, TensorTable &tensors) : out_(out), tensors_(tensors) {}
  static constexpr bool kLoading = false;

  template <class... T> void operator()(const T &...values) { (put(values), ...); }
  // Records that something cannot be saved (the first message wins).
  void fail(std::string message) {
    if (error_.empty()) error_ = std::move(message);
  }
  Status status() const { return error_.empty() ? Status::success() : Status(makeError(error_)); }
  artifact::ByteWriter &writer() { return out_; }

private:
  template <class T> void put(const T &v);
  artifact::ByteWriter &out_;
  TensorTable &tensors_;
  std::string error_;
};

class Loader {
public:
  Loader(artifact::ByteReader &in, const std::vector<Tensor> &tensors, SymbolResolver resolve)
      : in_(in), tensors_(tensors), resolve_(std::move(resolve)) {}
  static constexpr bool kLoading = true;

  template <class... T> void operator()(T &...values) { (get(values), ...); }
  void fail(std::string_view message) { in_.fail(message); }
  bool ok() const { return in_.ok(); }
  artifact::ByteReader &reader() { return in_; }
  // The entry of a generated kernel; null (and an error) when missing.
  void *resolve(const std::string &symbol);

private:
  template <class T> void get(T &v);
  artifact::ByteReader &in_;
  const std::vector<Tensor> &tensors_;
  SymbolResolver resolve_;
};

// ---- encodings ---------------------------------------------------------------

template <class T> void Saver::put(const T &v) {
  if constexpr (std::is_same_v<T, bool>) {
    out_.writeU8(v ? 1 : 0);
  } else if constexpr (std::is_same_v<T, DType>) {
    out_.writeI64(onnxCodeOf(v)); // ONNX's codes: stable across kiln versions
  } else if constexpr (std::is_enum_v<T>) {
    out_.writeI64(static_cast<int64_t>(v));
  } else if constexpr (std::is_integral_v<T>) {
    out_.writeI64(static_cast<int64_t>(v));
  } else if constexpr (std::is_same_v<T, float>) {
    out_.writeF32(v);
  } else if constexpr (std::is_same_v<T, double>) {
    out_.writeF64(v);
  } else if constexpr (std::is_same_v<T, std::string>) {
    out_.writeString(v);
  } else if constexpr (std::is_same_v<T, Tensor>) {
    out_.writeI64(v.defined() ? tensors_.add(v) : -1);
  } else if constexpr (requires { v.first; v.second; }) {
    put(v.first);
    put(v.second);
  } else if constexpr (requires { v.size(); v.begin(); }) { // vectors
    out_.writeCount(v.size());
    for (const auto &e : v) put(static_cast<typename T::value_type>(e));
  } else if constexpr (HasIo<T, Saver>) {
    const_cast<T &>(v).io(*this);
  } else {
    fields(*this, const_cast<T &>(v));
  }
}

template <class T> void Loader::get(T &v) {
  if constexpr (std::is_same_v<T, bool>) {
    v = in_.readU8() != 0;
  } else if constexpr (std::is_same_v<T, DType>) {
    const int64_t code = in_.readI64();
    std::optional<DType> d = dtypeFromOnnx(static_cast<int>(code));
    if (in_.ok() && !d) in_.fail("unknown dtype code " + std::to_string(code));
    v = d.value_or(DType::F32);
  } else if constexpr (std::is_enum_v<T> || std::is_integral_v<T>) {
    v = static_cast<T>(in_.readI64());
  } else if constexpr (std::is_same_v<T, float>) {
    v = in_.readF32();
  } else if constexpr (std::is_same_v<T, double>) {
    v = in_.readF64();
  } else if constexpr (std::is_same_v<T, std::string>) {
    v = in_.readString();
  } else if constexpr (std::is_same_v<T, Tensor>) {
    const int64_t i = in_.readI64();
    if (i == -1) {
      v = Tensor();
    } else if (i < 0 || i >= static_cast<int64_t>(tensors_.size())) {
      in_.fail("tensor index " + std::to_string(i) + " is out of range");
    } else {
      v = tensors_[i];
    }
  } else if constexpr (requires { v.first; v.second; }) {
    get(v.first);
    get(v.second);
  } else if constexpr (requires { v.size(); v.begin(); v.clear(); }) { // vectors
    v.clear();
    const uint64_t n = in_.readCount(uint64_t(1) << 32);
    for (uint64_t i = 0; i < n && in_.ok(); ++i) {
      typename T::value_type e{};
      get(e);
      v.push_back(std::move(e));
    }
  } else if constexpr (HasIo<T, Loader>) {
    v.io(*this);
  } else {
    fields(*this, v);
  }
}

} // namespace kiln::cpu

namespace kiln::kernels {

// Field lists of the microkernels' plain structs.
template <class A> void fields(A &a, ConvShape &s) {
  a(s.N, s.C, s.H, s.W, s.K, s.R, s.S, s.strideH, s.strideW, s.dilationH, s.dilationW, s.padTop,
    s.padLeft, s.padBottom, s.padRight, s.groups);
}
template <class A> void fields(A &a, PoolShape &s) {
  a(s.kernelH, s.kernelW, s.strideH, s.strideW, s.dilationH, s.dilationW, s.padTop, s.padLeft,
    s.padBottom, s.padRight);
}

} // namespace kiln::kernels
