// Errors as values. Every fallible function in kiln returns Status or
// Expected<T>; nothing throws across a layer boundary. Messages are
// lower-case, without a trailing period, and name what is wrong and where
// ("node 'conv1' (Conv): input 1 has rank 3, expected 4").
#pragma once

#include <cassert>
#include <sstream>
#include <string>
#include <utility>
#include <variant>

namespace kiln {

struct Error {
  std::string message;
};

// Builds an Error from any streamable pieces: makeError("bad dim ", 3).
template <class... Args> Error makeError(const Args &...args) {
  std::ostringstream os;
  (os << ... << args);
  return Error{os.str()};
}

// Concatenates streamable pieces into a string (the same as makeError's text).
template <class... Args> std::string strCat(const Args &...args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

template <class T> class [[nodiscard]] Expected {
public:
  Expected(T value) : v_(std::move(value)) {}
  Expected(Error error) : v_(std::move(error)) {}

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T &value() & {
    assert(ok());
    return std::get<0>(v_);
  }
  const T &value() const & {
    assert(ok());
    return std::get<0>(v_);
  }
  T &&value() && {
    assert(ok());
    return std::get<0>(std::move(v_));
  }
  T &operator*() & { return value(); }
  const T &operator*() const & { return value(); }
  T &&operator*() && { return std::move(*this).value(); }
  T *operator->() { return &value(); }
  const T *operator->() const { return &value(); }

  const Error &error() const {
    assert(!ok());
    return std::get<1>(v_);
  }

private:
  std::variant<T, Error> v_;
};

class [[nodiscard]] Status {
public:
  Status() = default;
  Status(Error error) : error_(std::move(error)), failed_(true) {}
  static Status success() { return Status(); }

  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const Error &error() const {
    assert(failed_);
    return error_;
  }
  const std::string &message() const { return error_.message; }

private:
  Error error_;
  bool failed_ = false;
};

// Prefixes the message of an error with context ("while importing 'x': ...").
inline Error withContext(const std::string &context, const Error &e) {
  return Error{context + ": " + e.message};
}

} // namespace kiln

#define KILN_CONCAT_INNER(a, b) a##b
#define KILN_CONCAT(a, b) KILN_CONCAT_INNER(a, b)

// Returns the error of a Status or Expected from the enclosing function.
#define KILN_RETURN_IF_ERROR(expr)                                                                 \
  do {                                                                                             \
    auto &&kiln_status_ = (expr);                                                                  \
    if (!kiln_status_.ok()) return kiln_status_.error();                                           \
  } while (0)

// `KILN_ASSIGN_OR_RETURN(auto x, makeX());` declares x from an Expected or
// returns its error.
#define KILN_ASSIGN_OR_RETURN(lhs, expr)                                                           \
  KILN_ASSIGN_OR_RETURN_IMPL(KILN_CONCAT(kiln_expected_, __LINE__), lhs, expr)
#define KILN_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr)                                                 \
  auto tmp = (expr);                                                                               \
  if (!tmp.ok()) return tmp.error();                                                               \
  lhs = std::move(*tmp)
