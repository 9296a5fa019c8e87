// The C API (include/kiln/kiln.h) over rt::LoadedModel and rt::Session.
// No exception crosses it: every entry point catches and reports.
#include "kiln/kiln.h"

#include "runtime/api/model.h"

#include <cstring>

struct kiln_model {
  std::unique_ptr<kiln::rt::LoadedModel> model;
};

struct kiln_session {
  std::unique_ptr<kiln::rt::Session> session;
  std::vector<kiln::RtValue> outputs; // runtime-allocated outputs live until the next run
};

namespace {

using kiln::rt::ErrorKind;

thread_local std::string lastError;

kiln_status statusOf(ErrorKind kind) {
  switch (kind) {
  case ErrorKind::InvalidArgument: return KILN_ERROR_INVALID_ARGUMENT;
  case ErrorKind::Io: return KILN_ERROR_IO;
  case ErrorKind::Corrupt: return KILN_ERROR_CORRUPT;
  case ErrorKind::Version: return KILN_ERROR_VERSION;
  case ErrorKind::UnsupportedCpu: return KILN_ERROR_UNSUPPORTED_CPU;
  case ErrorKind::Shape: return KILN_ERROR_SHAPE;
  case ErrorKind::OutputTooSmall: return KILN_ERROR_OUTPUT_TOO_SMALL;
  case ErrorKind::Runtime: return KILN_ERROR_RUNTIME;
  case ErrorKind::UnsupportedValue: return KILN_ERROR_UNSUPPORTED_VALUE;
  }
  return KILN_ERROR_RUNTIME;
}

kiln_status fail(kiln_status status, std::string message) {
  lastError = std::move(message);
  return status;
}

// Runs `body`, turning escaping exceptions into statuses.
template <class F> kiln_status guarded(F &&body) {
  try {
    return body();
  } catch (const std::bad_alloc &) {
    return fail(KILN_ERROR_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception &e) {
    return fail(KILN_ERROR_RUNTIME, e.what());
  } catch (...) {
    return fail(KILN_ERROR_RUNTIME, "unknown error");
  }
}

kiln_status finishLoad(kiln::rt::Result<kiln::rt::LoadedModel> r, kiln_model **out) {
  if (r.error) return fail(statusOf(r.error->kind), r.error->message);
  *out = new kiln_model{std::move(r.value)};
  return KILN_OK;
}

void fillInfo(const kiln::artifact::TensorInfo &t, kiln_value_info *info) {
  *info = kiln_value_info{};
  info->name = t.name.c_str();
  info->dtype = static_cast<kiln_dtype>(kiln::onnxCodeOf(t.dtype));
  info->kind = t.isTensor() ? KILN_KIND_TENSOR
               : t.containers[0] == kiln::artifact::ContainerKind::Sequence ? KILN_KIND_SEQUENCE
                                                                       : KILN_KIND_OPTIONAL;
  info->rank = t.rankKnown ? static_cast<int32_t>(std::min<size_t>(t.dims.size(), KILN_MAX_RANK))
                           : -1;
  for (int32_t d = 0; d < info->rank; ++d) {
    info->shape[d] = t.dims[d];
    info->dim_names[d] = t.dims[d] < 0 && !t.dimNames[d].empty() ? t.dimNames[d].c_str() : nullptr;
  }
}

// Fills `info` from list[index] ("input"/"output" names the list in errors).
kiln_status describeAt(const std::vector<kiln::artifact::TensorInfo> &list, size_t index,
                       const char *what, kiln_value_info *info) {
  if (index >= list.size())
    return fail(KILN_ERROR_INVALID_ARGUMENT, std::string(what) + " index " + std::to_string(index) +
                                                 " out of range (the model has " +
                                                 std::to_string(list.size()) + ")");
  fillInfo(list[index], info);
  return KILN_OK;
}

// The first input or output this API cannot carry (a string tensor, a
// sequence, an optional), as an error naming it; KILN_OK when none.
kiln_status checkCarriable(const kiln::artifact::Manifest &m) {
  for (const auto *list : {&m.inputs, &m.outputs})
    for (const kiln::artifact::TensorInfo &t : *list)
      if (!t.isTensor() || t.dtype == kiln::DType::String)
        return fail(KILN_ERROR_UNSUPPORTED_VALUE,
                    std::string(list == &m.inputs ? "input '" : "output '") + t.name + "' is " +
                        kiln::artifact::typeText(t) +
                        ": the C API carries only tensors of numbers and bools; run this model "
                        "with the C++ runtime (rt::Session) or `kiln run`");
  return KILN_OK;
}

int64_t indexOf(const std::vector<kiln::artifact::TensorInfo> &list, const char *name) {
  if (!name) return -1;
  for (size_t i = 0; i < list.size(); ++i)
    if (list[i].name == name) return static_cast<int64_t>(i);
  return -1;
}

} // namespace

extern "C" {

const char *kiln_last_error(void) { return lastError.c_str(); }

const char *kiln_version(void) { return "kiln 0.4.0 (artifact format 1)"; }

kiln_status kiln_model_load_file(const char *path, kiln_model **model) {
  if (!path || !model) return fail(KILN_ERROR_INVALID_ARGUMENT, "path and model must not be null");
  *model = nullptr;
  return guarded([&] { return finishLoad(kiln::rt::LoadedModel::openFile(path), model); });
}

kiln_status kiln_model_load_memory(const void *data, size_t size, kiln_model **model) {
  if (!data || !model) return fail(KILN_ERROR_INVALID_ARGUMENT, "data and model must not be null");
  *model = nullptr;
  return guarded([&] { return finishLoad(kiln::rt::LoadedModel::fromMemory(data, size), model); });
}

void kiln_model_free(kiln_model *model) { delete model; }

size_t kiln_model_num_inputs(const kiln_model *model) {
  return model ? model->model->manifest().inputs.size() : 0;
}

size_t kiln_model_num_outputs(const kiln_model *model) {
  return model ? model->model->manifest().outputs.size() : 0;
}

kiln_status kiln_model_input(const kiln_model *model, size_t index, kiln_value_info *info) {
  if (!model || !info) return fail(KILN_ERROR_INVALID_ARGUMENT, "model and info must not be null");
  return describeAt(model->model->manifest().inputs, index, "input", info);
}

kiln_status kiln_model_output(const kiln_model *model, size_t index, kiln_value_info *info) {
  if (!model || !info) return fail(KILN_ERROR_INVALID_ARGUMENT, "model and info must not be null");
  return describeAt(model->model->manifest().outputs, index, "output", info);
}

int64_t kiln_model_input_index(const kiln_model *model, const char *name) {
  return model ? indexOf(model->model->manifest().inputs, name) : -1;
}

int64_t kiln_model_output_index(const kiln_model *model, const char *name) {
  return model ? indexOf(model->model->manifest().outputs, name) : -1;
}

kiln_status kiln_session_create(kiln_model *model, const kiln_session_options *options,
                                kiln_session **session) {
  if (!model || !session) return fail(KILN_ERROR_INVALID_ARGUMENT, "model and session must not be null");
  *session = nullptr;
  const int threads = options ? options->threads : 0;
  if (threads < 0) return fail(KILN_ERROR_INVALID_ARGUMENT, "threads must be >= 0");
  return guarded([&] {
    *session = new kiln_session{std::make_unique<kiln::rt::Session>(*model->model, threads), {}};
    return KILN_OK;
  });
}

void kiln_session_free(kiln_session *session) { delete session; }

kiln_status kiln_session_run(kiln_session *session, const kiln_tensor *inputs, size_t num_inputs,
                             kiln_tensor *outputs, size_t num_outputs) {
  if (!session || (num_inputs && !inputs) || (num_outputs && !outputs))
    return fail(KILN_ERROR_INVALID_ARGUMENT, "session, inputs and outputs must not be null");
  return guarded([&]() -> kiln_status {
    session->outputs.clear();
    const kiln::artifact::Manifest &manifest = session->session->model().manifest();
    if (kiln_status s = checkCarriable(manifest); s != KILN_OK) return s;
    std::vector<kiln::RtValue> in;
    for (size_t i = 0; i < num_inputs; ++i) {
      const kiln_tensor &t = inputs[i];
      auto dtype = kiln::dtypeFromOnnx(static_cast<int>(t.dtype));
      if (!dtype || *dtype == kiln::DType::String)
        return fail(KILN_ERROR_SHAPE, "input " + std::to_string(i) +
                                          (dtype ? ": string tensors cannot be passed"
                                                 : ": unknown dtype " +
                                                       std::to_string(static_cast<int>(t.dtype))));
      if (t.rank < 0 || t.rank > KILN_MAX_RANK)
        return fail(KILN_ERROR_SHAPE, "input " + std::to_string(i) + ": rank " +
                                          std::to_string(t.rank) + " is out of range");
      kiln::Shape64 shape(t.shape, t.shape + t.rank);
      int64_t numel = 1;
      for (int64_t d : shape)
        if (d < 0 || __builtin_mul_overflow(numel, d, &numel))
          return fail(KILN_ERROR_SHAPE, "input " + std::to_string(i) + ": bad shape " +
                                            kiln::shapeToString(shape));
      const size_t need = static_cast<size_t>(numel) * kiln::dtypeSize(*dtype);
      if (t.bytes < need || (need && !t.data))
        return fail(KILN_ERROR_SHAPE, "input " + std::to_string(i) + ": " + std::to_string(t.bytes) +
                                          " bytes given, shape " + kiln::shapeToString(shape) +
                                          " needs " + std::to_string(need));
      // A view: inputs are only read.
      in.emplace_back(kiln::Tensor::view(*dtype, shape, nullptr, t.data));
    }
    std::vector<kiln::RtValue> out;
    if (auto error = session->session->runChecked(std::move(in), out))
      return fail(statusOf(error->kind), error->message);
    if (num_outputs != out.size())
      return fail(KILN_ERROR_INVALID_ARGUMENT, "the model has " + std::to_string(out.size()) +
                                                   " outputs, " + std::to_string(num_outputs) +
                                                   " given");
    kiln_status status = KILN_OK;
    for (size_t i = 0; i < out.size(); ++i) {
      const kiln::Tensor &t = out[i].tensor;
      kiln_tensor &o = outputs[i];
      if (t.rank() > KILN_MAX_RANK)
        return fail(KILN_ERROR_RUNTIME, "output " + std::to_string(i) + " has rank over 8");
      o.dtype = static_cast<kiln_dtype>(kiln::onnxCodeOf(t.dtype()));
      o.rank = static_cast<int32_t>(t.rank());
      for (int64_t d = 0; d < t.rank(); ++d) o.shape[d] = t.dim(d);
      if (o.data) {
        if (o.bytes < t.byteSize()) {
          status = fail(KILN_ERROR_OUTPUT_TOO_SMALL,
                        "output " + std::to_string(i) + ": " + std::to_string(o.bytes) +
                            " bytes given, shape " + kiln::shapeToString(t.shape()) + " needs " +
                            std::to_string(t.byteSize()));
          o.bytes = t.byteSize();
          continue;
        }
        if (t.byteSize()) std::memcpy(o.data, t.raw(), t.byteSize());
        o.bytes = t.byteSize();
      } else {
        o.data = const_cast<void *>(t.raw());
        o.bytes = t.byteSize();
      }
    }
    session->outputs = std::move(out);
    return status;
  });
}

} // extern "C"
