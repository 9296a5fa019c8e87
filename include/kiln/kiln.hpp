// Header-only C++ wrapper over the kiln runtime C API (kiln.h): RAII owners
// for models and sessions, errors as kiln::Error exceptions carrying the
// status and the runtime's message.
//
//   kiln::Model model = kiln::Model::load("yolov8n.kiln");
//   kiln::Session session(model);
//   std::vector<kiln::Tensor> outputs = session.run({kiln::Tensor::f32({1, 3, 640, 640}, pixels)});
//
// Thread safety is the C API's: a Model may be shared across threads; a
// Session runs one inference at a time.
#pragma once

#include "kiln/kiln.h"

#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

// The inline namespace keeps these names apart, at link time, from kiln's
// internal classes of the same spelling (kiln::Tensor, kiln::Error) that a
// static libkiln_runtime.a also carries.
namespace kiln {
inline namespace api {

class Error : public std::runtime_error {
public:
  Error(kiln_status status, const std::string &message)
      : std::runtime_error(message), status_(status) {}
  kiln_status status() const { return status_; }

private:
  kiln_status status_;
};

namespace detail {
inline void check(kiln_status s) {
  if (s != KILN_OK) throw Error(s, kiln_last_error());
}
} // namespace detail

// Bytes of one element of `dtype` (0 for KILN_UNDEFINED).
inline size_t dtypeSize(kiln_dtype dtype) {
  switch (dtype) {
  case KILN_U8: case KILN_I8: case KILN_BOOL: return 1;
  case KILN_U16: case KILN_I16: case KILN_F16: case KILN_BF16: return 2;
  case KILN_F32: case KILN_I32: case KILN_U32: return 4;
  case KILN_I64: case KILN_F64: case KILN_U64: return 8;
  default: return 0;
  }
}

// A tensor that owns its bytes.
struct Tensor {
  kiln_dtype dtype = KILN_UNDEFINED;
  std::vector<int64_t> shape;
  std::vector<unsigned char> bytes;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  template <class T> T *data() { return reinterpret_cast<T *>(bytes.data()); }
  template <class T> const T *data() const { return reinterpret_cast<const T *>(bytes.data()); }

  // A tensor of `dtype` and `shape` holding a copy of `data` (numel elements).
  static Tensor of(kiln_dtype dtype, std::vector<int64_t> shape, const void *data) {
    Tensor t;
    t.dtype = dtype;
    t.shape = std::move(shape);
    t.bytes.resize(size_t(t.numel()) * dtypeSize(dtype));
    if (!t.bytes.empty()) std::memcpy(t.bytes.data(), data, t.bytes.size());
    return t;
  }
  static Tensor f32(std::vector<int64_t> shape, const float *data) {
    return of(KILN_F32, std::move(shape), data);
  }
};

struct ValueInfo {
  std::string name;
  kiln_dtype dtype = KILN_UNDEFINED;
  std::vector<int64_t> shape;         // -1 for symbolic dims
  std::vector<std::string> dimNames;  // "" for fixed dims
  kiln_value_kind kind = KILN_KIND_TENSOR; // sequences and optionals cannot be run here
};

class Model {
public:
  static Model load(const std::string &path) {
    kiln_model *m = nullptr;
    detail::check(kiln_model_load_file(path.c_str(), &m));
    return Model(m);
  }
  static Model fromMemory(const void *data, size_t size) {
    kiln_model *m = nullptr;
    detail::check(kiln_model_load_memory(data, size, &m));
    return Model(m);
  }

  std::vector<ValueInfo> inputs() const { return infos(true); }
  std::vector<ValueInfo> outputs() const { return infos(false); }
  kiln_model *get() const { return model_.get(); }

private:
  explicit Model(kiln_model *m) : model_(m, kiln_model_free) {}
  std::vector<ValueInfo> infos(bool inputs) const {
    size_t n = inputs ? kiln_model_num_inputs(get()) : kiln_model_num_outputs(get());
    std::vector<ValueInfo> out;
    for (size_t i = 0; i < n; ++i) {
      kiln_value_info info;
      detail::check(inputs ? kiln_model_input(get(), i, &info) : kiln_model_output(get(), i, &info));
      ValueInfo v{info.name, info.dtype, {}, {}, info.kind};
      for (int d = 0; d < info.rank; ++d) {
        v.shape.push_back(info.shape[d]);
        v.dimNames.push_back(info.dim_names[d] ? info.dim_names[d] : "");
      }
      out.push_back(std::move(v));
    }
    return out;
  }
  std::shared_ptr<kiln_model> model_;
};

class Session {
public:
  // `model` must outlive the session. threads: 0 for the physical cores.
  explicit Session(const Model &model, int threads = 0) : model_(model) {
    kiln_session_options options{threads};
    kiln_session *s = nullptr;
    detail::check(kiln_session_create(model.get(), &options, &s));
    session_.reset(s);
  }

  // Inputs in model order; returns the outputs in model order (copies).
  std::vector<Tensor> run(const std::vector<Tensor> &inputs) {
    std::vector<kiln_tensor> in(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].shape.size() > KILN_MAX_RANK)
        throw Error(KILN_ERROR_SHAPE, "input " + std::to_string(i) + " has rank over 8");
      in[i] = kiln_tensor{};
      in[i].dtype = inputs[i].dtype;
      in[i].rank = int32_t(inputs[i].shape.size());
      for (size_t d = 0; d < inputs[i].shape.size(); ++d) in[i].shape[d] = inputs[i].shape[d];
      in[i].data = const_cast<unsigned char *>(inputs[i].bytes.data());
      in[i].bytes = inputs[i].bytes.size();
    }
    std::vector<kiln_tensor> out(kiln_model_num_outputs(model_.get()), kiln_tensor{});
    detail::check(kiln_session_run(session_.get(), in.data(), in.size(), out.data(), out.size()));
    std::vector<Tensor> result;
    for (const kiln_tensor &t : out)
      result.push_back(Tensor::of(t.dtype, std::vector<int64_t>(t.shape, t.shape + t.rank), t.data));
    return result;
  }
  kiln_session *get() const { return session_.get(); }

private:
  struct Free {
    void operator()(kiln_session *s) const { kiln_session_free(s); }
  };
  Model model_; // shares ownership: the model outlives the session
  std::unique_ptr<kiln_session, Free> session_;
};

} // namespace api
} // namespace kiln
