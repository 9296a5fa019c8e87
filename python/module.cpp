// The `kiln` Python module: load a compiled `.kiln` artifact and run it on
// numpy arrays, or compile a model into one.
//
// Runs go through the runtime's C API via the C++ wrapper (kiln/kiln.hpp),
// the code path of C programs and of `kiln run OUT.kiln`, so the three give
// bitwise identical outputs. Inputs reach the runtime without a copy when
// they are C-contiguous and aligned (otherwise as a C-contiguous copy); they
// are never cast, a wrong dtype is an error. The GIL is released while the
// runtime runs and while the compiler compiles. Every error is a kiln.Error
// (a RuntimeError) carrying the runtime's message and a `status` name.
#include "compile.h"

#include "kiln/kiln.hpp"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>

namespace py = pybind11;

namespace kiln::python {
namespace {

// An error of the compiler (kiln.compile), raised as kiln.Error with status
// "compile"; the runtime's errors arrive as kiln::Error with their status.
struct CompileError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

const char *statusName(kiln_status s) {
  switch (s) {
  case KILN_OK: return "ok";
  case KILN_ERROR_INVALID_ARGUMENT: return "invalid_argument";
  case KILN_ERROR_IO: return "io";
  case KILN_ERROR_CORRUPT: return "corrupt";
  case KILN_ERROR_VERSION: return "version";
  case KILN_ERROR_UNSUPPORTED_CPU: return "unsupported_cpu";
  case KILN_ERROR_SHAPE: return "shape";
  case KILN_ERROR_OUTPUT_TOO_SMALL: return "output_too_small";
  case KILN_ERROR_RUNTIME: return "runtime";
  case KILN_ERROR_OUT_OF_MEMORY: return "out_of_memory";
  case KILN_ERROR_UNSUPPORTED_VALUE: return "unsupported_value";
  }
  return "unknown";
}

[[noreturn]] void fail(kiln_status status, const std::string &message) {
  throw kiln::Error(status, message);
}

// numpy's name for a kiln dtype; nullptr for bfloat16, which numpy lacks.
const char *numpyName(kiln_dtype dtype) {
  switch (dtype) {
  case KILN_F32: return "float32";
  case KILN_U8: return "uint8";
  case KILN_I8: return "int8";
  case KILN_U16: return "uint16";
  case KILN_I16: return "int16";
  case KILN_I32: return "int32";
  case KILN_I64: return "int64";
  case KILN_BOOL: return "bool";
  case KILN_F16: return "float16";
  case KILN_F64: return "float64";
  case KILN_U32: return "uint32";
  case KILN_U64: return "uint64";
  default: return nullptr;
  }
}

std::string describe(py::handle h) { return py::str(h).cast<std::string>(); }

// os.fspath(path): str and os.PathLike both work.
std::string fspath(py::handle path) {
  return py::module_::import("os").attr("fspath")(path).cast<std::string>();
}

struct Signature {
  std::vector<kiln::ValueInfo> inputs, outputs;
};

// What Model.inputs / Model.outputs hold: dtype a numpy dtype (None for
// bfloat16), shape a tuple of ints and, for symbolic dims, their names.
struct PyValueInfo {
  std::string name;
  py::object dtype;
  py::tuple shape;

  std::string repr() const {
    return "ValueInfo(name='" + name + "', dtype=" + describe(dtype) + ", shape=" +
           describe(py::repr(shape)) + ")";
  }
};

py::list toPython(const std::vector<kiln::ValueInfo> &infos) {
  py::list out;
  for (const kiln::ValueInfo &v : infos) {
    py::list shape;
    for (size_t d = 0; d < v.shape.size(); ++d) {
      if (v.shape[d] >= 0) shape.append(v.shape[d]);
      else shape.append(v.dimNames[d].empty() ? std::string("?") : v.dimNames[d]);
    }
    const char *dtype = numpyName(v.dtype);
    out.append(PyValueInfo{v.name, dtype ? py::object(py::dtype(dtype)) : py::object(py::none()),
                           py::tuple(shape)});
  }
  return out;
}

std::string nameList(const std::vector<kiln::ValueInfo> &infos) {
  std::string s;
  for (const kiln::ValueInfo &v : infos) s += (s.empty() ? "'" : ", '") + v.name + "'";
  return s;
}

// The inputs of one run as the C API takes them, in model order; `arrays`
// keeps their buffers alive.
struct Feeds {
  std::vector<py::array> arrays;
  std::vector<kiln_tensor> tensors;
};

// Checks the names first (every unknown and missing one in one message),
// then each input's dtype; shapes are the runtime's to check.
void checkNames(const std::vector<kiln::ValueInfo> &inputs, const py::dict &feeds) {
  std::string unknown, missing;
  for (auto item : feeds) {
    if (!py::isinstance<py::str>(item.first))
      fail(KILN_ERROR_INVALID_ARGUMENT,
           "input names must be str, got " + describe(py::repr(item.first)));
    std::string name = item.first.cast<std::string>();
    bool known = false;
    for (const kiln::ValueInfo &v : inputs) known = known || v.name == name;
    if (!known) unknown += (unknown.empty() ? "'" : ", '") + name + "'";
  }
  for (const kiln::ValueInfo &v : inputs)
    if (!feeds.contains(v.name)) missing += (missing.empty() ? "'" : ", '") + v.name + "'";
  if (unknown.empty() && missing.empty()) return;
  std::string message;
  if (!unknown.empty()) message = "unknown input " + unknown;
  if (!missing.empty()) message += (message.empty() ? "" : "; ") + ("missing input " + missing);
  fail(KILN_ERROR_INVALID_ARGUMENT, message + " (the model's inputs: " + nameList(inputs) + ")");
}

Feeds prepareFeeds(const std::vector<kiln::ValueInfo> &inputs, const py::dict &feeds) {
  checkNames(inputs, feeds);
  Feeds out;
  for (const kiln::ValueInfo &v : inputs) {
    const std::string where = "input '" + v.name + "'";
    py::object value = feeds[py::str(v.name)];
    py::array a = py::array::ensure(value);
    if (!a) fail(KILN_ERROR_INVALID_ARGUMENT, where + ": cannot make a numpy array of " +
                                                  describe(py::repr(py::type::of(value))));
    if (v.kind != KILN_KIND_TENSOR || v.dtype == KILN_STRING)
      fail(KILN_ERROR_UNSUPPORTED_VALUE,
           where + ": the model expects " +
               (v.dtype == KILN_STRING ? "strings" : "a sequence or optional") +
               ", which the runtime's C API cannot carry");
    const char *want = numpyName(v.dtype);
    if (!want) fail(KILN_ERROR_SHAPE, where + ": the model expects bfloat16, which numpy lacks");
    if (!a.dtype().equal(py::dtype(want)))
      fail(KILN_ERROR_SHAPE, where + ": dtype " + describe(a.dtype()) + ", the model expects " +
                                 want + " (kiln does not cast; use .astype(numpy." + want + "))");
    if (a.ndim() > KILN_MAX_RANK)
      fail(KILN_ERROR_SHAPE, where + ": rank " + std::to_string(a.ndim()) + " is over " +
                                 std::to_string(KILN_MAX_RANK));
    // A copy only when the array is not C-contiguous or not aligned.
    a = py::array::ensure(a, int(py::array::c_style) | int(py::detail::npy_api::NPY_ARRAY_ALIGNED_));
    if (!a) throw py::error_already_set();
    kiln_tensor t{};
    t.dtype = v.dtype;
    t.rank = int32_t(a.ndim());
    for (py::ssize_t d = 0; d < a.ndim(); ++d) t.shape[d] = a.shape(d);
    t.data = const_cast<void *>(a.data()); // the runtime only reads inputs
    t.bytes = size_t(a.nbytes());
    out.tensors.push_back(t);
    out.arrays.push_back(std::move(a));
  }
  return out;
}

// A kiln::Session and the lock that keeps its runs one at a time (the C API
// allows one kiln_session_run per session at once). Lock order: the lock is
// only ever waited for without the GIL, so a thread holding the lock may
// take the GIL back without deadlock.
class Runner {
public:
  Runner(const kiln::Model &model, int threads) : session_(model, threads) {}

  py::dict run(const Signature &sig, const py::dict &inputs) {
    Feeds feeds = prepareFeeds(sig.inputs, inputs);
    std::vector<kiln_tensor> outs(sig.outputs.size(), kiln_tensor{});
    std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
    kiln_status status;
    {
      py::gil_scoped_release nogil;
      lock.lock();
      status = kiln_session_run(session_.get(), feeds.tensors.data(), feeds.tensors.size(),
                                outs.data(), outs.size());
    }
    if (status != KILN_OK) fail(status, kiln_last_error());
    // The outputs live in the session's memory until its next run: copy them
    // out while holding the lock.
    py::dict result;
    for (size_t i = 0; i < outs.size(); ++i) {
      const kiln_tensor &t = outs[i];
      const std::string &name = sig.outputs[i].name;
      const char *dtype = numpyName(t.dtype);
      if (!dtype) fail(KILN_ERROR_RUNTIME, "output '" + name + "': bfloat16 has no numpy dtype");
      py::array a(py::dtype(dtype), std::vector<py::ssize_t>(t.shape, t.shape + t.rank));
      if (t.bytes < size_t(a.nbytes()))
        fail(KILN_ERROR_RUNTIME, "output '" + name + "': the runtime returned fewer bytes (" +
                                     std::to_string(t.bytes) + ") than its shape needs");
      if (a.nbytes() > 0) std::memcpy(a.mutable_data(), t.data, size_t(a.nbytes()));
      result[py::str(name)] = std::move(a);
    }
    return result;
  }

private:
  kiln::Session session_;
  std::mutex mu_;
};

class Session {
public:
  Session(const kiln::Model &model, std::shared_ptr<const Signature> sig, int threads)
      : sig_(std::move(sig)), runner_(model, threads) {}
  py::dict run(const py::dict &inputs) { return runner_.run(*sig_, inputs); }
  const Signature &signature() const { return *sig_; }

private:
  std::shared_ptr<const Signature> sig_;
  Runner runner_;
};

class Model {
public:
  explicit Model(kiln::Model model)
      : model_(std::move(model)),
        sig_(std::make_shared<Signature>(Signature{model_.inputs(), model_.outputs()})) {}

  const Signature &signature() const { return *sig_; }

  std::unique_ptr<Session> session(int threads) {
    if (threads < 0) fail(KILN_ERROR_INVALID_ARGUMENT, "threads must be >= 0");
    py::gil_scoped_release nogil; // creating the pool may take a moment
    return std::make_unique<Session>(model_, sig_, threads);
  }

  // Model.run: one internal session (threads: physical cores), created on
  // first use; concurrent calls take turns.
  py::dict run(const py::dict &inputs) {
    {
      py::gil_scoped_release nogil;
      std::call_once(once_, [&] { default_ = std::make_unique<Session>(model_, sig_, 0); });
    }
    return default_->run(inputs);
  }

  std::string repr() const {
    auto list = [](const std::vector<kiln::ValueInfo> &infos) {
      std::string s;
      for (const kiln::ValueInfo &v : infos) s += (s.empty() ? "" : ", ") + v.name;
      return s;
    };
    return "<kiln.Model inputs=[" + list(sig_->inputs) + "] outputs=[" + list(sig_->outputs) +
           "]>";
  }

private:
  kiln::Model model_;
  std::shared_ptr<const Signature> sig_;
  std::once_flag once_;
  std::unique_ptr<Session> default_;
};

// kiln.load(source): a path (str or os.PathLike), or the artifact's bytes
// (any object with the buffer protocol).
std::unique_ptr<Model> load(py::object source) {
  if (PyObject_CheckBuffer(source.ptr())) {
    py::buffer_info buf = py::reinterpret_borrow<py::buffer>(source).request();
    size_t size = size_t(buf.size * buf.itemsize);
    std::optional<kiln::Model> m;
    {
      py::gil_scoped_release nogil;
      m.emplace(kiln::Model::fromMemory(buf.ptr, size));
    }
    return std::make_unique<Model>(std::move(*m));
  }
  std::string path = fspath(source);
  std::optional<kiln::Model> m;
  {
    py::gil_scoped_release nogil;
    m.emplace(kiln::Model::load(path));
  }
  return std::make_unique<Model>(std::move(*m));
}

std::unique_ptr<Model> compile(py::object modelPath, py::object output, std::string target,
                               std::string cpu, int opt, py::object dims) {
  std::string model = fspath(modelPath);
  std::string out = output.is_none()
                        ? std::filesystem::path(model).replace_extension(".kiln").string()
                        : fspath(output);
  if (out == model)
    fail(KILN_ERROR_INVALID_ARGUMENT, model + ": the artifact would overwrite the model; pass output=");
  if (opt < 0 || opt > 3)
    fail(KILN_ERROR_INVALID_ARGUMENT, "opt must be 0..3, got " + std::to_string(opt));
  CompileOptions options{std::move(target), std::move(cpu), opt, {}};
  if (!dims.is_none()) {
    if (!py::isinstance<py::dict>(dims))
      fail(KILN_ERROR_INVALID_ARGUMENT, "dims must be a dict {name: size}");
    for (auto item : dims.cast<py::dict>()) {
      if (!py::isinstance<py::str>(item.first) || !py::isinstance<py::int_>(item.second) ||
          py::isinstance<py::bool_>(item.second))
        fail(KILN_ERROR_INVALID_ARGUMENT, "dims must map str names to int sizes, got " +
                                              describe(py::repr(item.first)) + ": " +
                                              describe(py::repr(item.second)));
      options.dims.emplace_back(item.first.cast<std::string>(), item.second.cast<int64_t>());
    }
  }
  std::string error;
  {
    py::gil_scoped_release nogil;
    error = compileModel(model, out, options);
  }
  if (!error.empty()) throw CompileError(error);
  return load(py::str(out));
}

} // namespace
} // namespace kiln::python

PYBIND11_MODULE(kiln, m) {
  using namespace kiln::python;
  m.doc() = "kiln: compile a model into a .kiln artifact, load it, run it on numpy arrays";

  // Leaked on purpose: the type must outlive every translation, even at exit.
  static py::object *errorType =
      new py::object(py::exception<kiln::Error>(m, "Error", PyExc_RuntimeError));
  errorType->attr("__doc__") =
      "An error of the kiln runtime or compiler. str(e) is the message (what and where); "
      "e.status names its kind: invalid_argument, io, corrupt, version, unsupported_cpu, "
      "shape, output_too_small, runtime, out_of_memory, or compile.";
  py::register_exception_translator([](std::exception_ptr p) {
    auto raise = [](const char *status, const char *message) {
      py::object e = (*errorType)(message);
      e.attr("status") = status;
      PyErr_SetObject(errorType->ptr(), e.ptr());
    };
    try {
      if (p) std::rethrow_exception(p);
    } catch (const kiln::Error &e) {
      raise(statusName(e.status()), e.what());
    } catch (const CompileError &e) {
      raise("compile", e.what());
    }
  });

  py::class_<PyValueInfo>(m, "ValueInfo", "An input or output the model declares.")
      .def_readonly("name", &PyValueInfo::name)
      .def_readonly("dtype", &PyValueInfo::dtype, "numpy dtype (None for bfloat16)")
      .def_readonly("shape", &PyValueInfo::shape, "tuple: ints, and names of symbolic dims")
      .def("__repr__", &PyValueInfo::repr);

  py::class_<Session>(m, "Session",
                      "Scratch memory and a thread pool for one inference at a time; separate "
                      "sessions of one model may run concurrently from different threads.")
      .def("run", &Session::run, py::arg("inputs"),
           "run({name: ndarray}) -> {name: ndarray}, outputs in model order")
      .def_property_readonly("inputs", [](const Session &s) { return toPython(s.signature().inputs); })
      .def_property_readonly("outputs",
                             [](const Session &s) { return toPython(s.signature().outputs); });

  py::class_<Model>(m, "Model", "A loaded .kiln artifact (immutable, shareable across threads).")
      .def("run", &Model::run, py::arg("inputs"),
           "run({name: ndarray}) -> {name: ndarray} on the model's internal session (one run "
           "at a time; use session() for concurrent runs). Inputs must have the declared "
           "dtype; they are never cast.")
      .def("session", &Model::session, py::arg("threads") = 0,
           "A new Session; threads: 0 for the physical cores")
      .def_property_readonly("inputs", [](const Model &mo) { return toPython(mo.signature().inputs); })
      .def_property_readonly("outputs",
                             [](const Model &mo) { return toPython(mo.signature().outputs); })
      .def("__repr__", &Model::repr);

  m.def("load", &load, py::arg("source"),
        "load(path or bytes) -> Model: a .kiln artifact from a file (mapped, weights used in "
        "place) or from its bytes");
  m.def("compile", &compile, py::arg("model_path"), py::arg("output") = py::none(),
        py::arg("target") = "cpu", py::arg("cpu") = "native", py::arg("opt") = 3,
        py::arg("dims") = py::none(),
        "compile(model_path, output=None, target='cpu', cpu='native', opt=3, dims=None) -> "
        "Model: writes the artifact (default: the model path with suffix .kiln) and loads it. "
        "dims pins symbolic dims: {name: size}.");
  m.def("version", [] { return std::string(kiln_version()); }, "the runtime's version string");
}
