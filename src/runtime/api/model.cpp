#include "runtime/api/model.h"

#include "runtime/api/input_check.h"

#include "runtime/cpu/program_io.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <new>
#include <stdexcept>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <unordered_map>

namespace kiln::rt {

namespace {

template <class T> Result<T> failure(ErrorKind kind, std::string message) {
  Result<T> r;
  r.error = RtError{kind, std::move(message)};
  return r;
}

} // namespace

LoadedModel::~LoadedModel() {
  program_.reset(); // steps may point into code and storage
  code_.reset();
}

Result<LoadedModel> LoadedModel::openFile(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return failure<LoadedModel>(ErrorKind::Io, "cannot open '" + path + "': " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return failure<LoadedModel>(ErrorKind::Io, "'" + path + "' is not a regular file");
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (size == 0) {
    ::close(fd);
    return failure<LoadedModel>(ErrorKind::Corrupt, "'" + path + "' is empty, not a kiln artifact");
  }
  void *map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED)
    return failure<LoadedModel>(ErrorKind::Io, "cannot map '" + path + "': " + std::strerror(errno));
  std::shared_ptr<const void> storage(map, [size](const void *p) { ::munmap(const_cast<void *>(p), size); });
  return load(storage, static_cast<const uint8_t *>(map), size, path);
}

Result<LoadedModel> LoadedModel::fromMemory(const void *data, size_t size) {
  if (!data && size) return failure<LoadedModel>(ErrorKind::InvalidArgument, "data is null");
  // Page-aligned, so sections are aligned as in a mapped file.
  void *copy = std::aligned_alloc(4096, (size + 4095) / 4096 * 4096 + 4096);
  if (!copy) return failure<LoadedModel>(ErrorKind::Runtime, "out of memory");
  if (size) std::memcpy(copy, data, size);
  std::shared_ptr<const void> storage(copy, [](const void *p) { std::free(const_cast<void *>(p)); });
  return load(storage, static_cast<const uint8_t *>(copy), size, "artifact in memory");
}

Result<LoadedModel> LoadedModel::load(std::shared_ptr<const void> storage, const uint8_t *data,
                                      size_t size, std::string where) {
  auto model = std::unique_ptr<LoadedModel>(new LoadedModel());
  model->storage_ = storage;
  auto container = artifact::Container::open(data, size);
  if (!container.ok()) {
    const std::string &m = container.error().message;
    const bool version = m.find("format version") != std::string::npos;
    return failure<LoadedModel>(version ? ErrorKind::Version : ErrorKind::Corrupt, where + ": " + m);
  }
  model->container_ = std::move(*container);
  const artifact::Container &c = model->container_;
  for (auto kind : {artifact::SectionKind::Manifest, artifact::SectionKind::Program,
                    artifact::SectionKind::Weights})
    if (!c.has(kind))
      return failure<LoadedModel>(ErrorKind::Corrupt, where + ": no " +
                                                          std::string(artifact::sectionKindName(kind)) +
                                                          " section");
  auto manifest = artifact::Manifest::parse(c.section(artifact::SectionKind::Manifest));
  if (!manifest.ok()) {
    const bool version = manifest.error().message.find("version") != std::string::npos;
    return failure<LoadedModel>(version ? ErrorKind::Version : ErrorKind::Corrupt,
                                where + ": " + manifest.error().message);
  }
  model->manifest_ = std::move(*manifest);
  std::vector<std::string> missing = artifact::missingCpuFeatures(model->manifest_.cpuFeatures);
  if (!missing.empty()) {
    std::string list;
    for (const std::string &f : missing) list += (list.empty() ? "" : ", ") + f;
    return failure<LoadedModel>(ErrorKind::UnsupportedCpu,
                                where + ": compiled for --cpu " + model->manifest_.cpu + " (" +
                                    model->manifest_.llvmCpu + "), which needs CPU features this machine lacks: " +
                                    list + "; recompile with a lower --cpu level (e.g. x86-64-v3)");
  }
  if (!model->manifest_.kernelSymbols.empty()) {
    if (!c.has(artifact::SectionKind::CpuCode))
      return failure<LoadedModel>(ErrorKind::Corrupt, where + ": no cpu-code section");
    auto code = CodeModule::load(c.section(artifact::SectionKind::CpuCode), model->manifest_.modelName);
    if (!code.ok()) return failure<LoadedModel>(ErrorKind::Corrupt, where + ": " + code.error().message);
    model->code_ = std::move(*code);
  }
  const CodeModule *code = model->code_.get();
  auto resolve = [code](const std::string &symbol) -> void * {
    return code ? code->lookup(symbol) : nullptr;
  };
  Expected<std::unique_ptr<cpu::Program>> program = makeError("not loaded");
  try {
    program = cpu::loadProgram(c.section(artifact::SectionKind::Program),
                               c.section(artifact::SectionKind::Weights), storage, resolve);
  } catch (const std::bad_alloc &) {
    return failure<LoadedModel>(ErrorKind::Corrupt, where + ": program section: sizes out of range");
  } catch (const std::length_error &) {
    return failure<LoadedModel>(ErrorKind::Corrupt, where + ": program section: sizes out of range");
  }
  if (!program.ok()) return failure<LoadedModel>(ErrorKind::Corrupt, where + ": " + program.error().message);
  model->program_ = std::move(*program);
  if (model->program_->inputSlots.size() != model->manifest_.inputs.size() ||
      model->program_->outputSlots.size() != model->manifest_.outputs.size())
    return failure<LoadedModel>(ErrorKind::Corrupt, where + ": manifest and program disagree on inputs");
  Result<LoadedModel> r;
  r.value = std::move(model);
  return r;
}

std::string LoadedModel::describe() const {
  return manifest_.describe() + "sections:\n" + container_.describeSections();
}

Session::Session(const LoadedModel &model, int threads)
    : model_(model), pool_(threads), arenas_(cpu::createArenas(model.program())) {}

void Session::setProfiling(bool on) {
  profile_.clear();
  profiling_ = on;
}

std::string Session::profileReport() const { return cpu::profileReport(model_.program(), profile_); }

Session::MemoryReport Session::memoryReport() const {
  MemoryReport r;
  for (const cpu::ActivationArena &arena : arenas_) {
    r.arenaBytes += arena.arenaBytes();
    r.naiveBytes += arena.naiveBytes();
  }
  return r;
}

Expected<std::vector<RtValue>> Session::run(std::vector<RtValue> inputs) {
  std::vector<RtValue> outputs;
  if (auto error = runChecked(std::move(inputs), outputs)) return makeError(error->message);
  return outputs;
}

Expected<std::vector<RtValue>> Session::run(std::vector<Tensor> inputs) {
  return run(std::vector<RtValue>(std::make_move_iterator(inputs.begin()),
                                  std::make_move_iterator(inputs.end())));
}

std::optional<RtError> Session::runChecked(std::vector<RtValue> inputs,
                                           std::vector<RtValue> &outputs) {
  const artifact::Manifest &m = model_.manifest();
  if (inputs.size() != m.inputs.size())
    return RtError{ErrorKind::InvalidArgument, "the model takes " + std::to_string(m.inputs.size()) +
                                                   " inputs, got " + std::to_string(inputs.size())};
  if (std::string why = inputMismatch(m.inputs, inputs); !why.empty())
    return RtError{ErrorKind::Shape, why};
  const cpu::Program &main = model_.program();
  cpu::Frame frame;
  frame.slots.resize(main.numSlots);
  for (size_t i = 0; i < inputs.size(); ++i) frame.slots[main.inputSlots[i]] = std::move(inputs[i]);
  cpu::ExecContext ctx{&pool_, &arenas_, profiling_ ? &profile_ : nullptr};
  Expected<std::vector<RtValue>> out = makeError("not run");
  try {
    out = main.run(frame, ctx);
  } catch (const std::bad_alloc &) {
    return RtError{ErrorKind::Runtime, "out of memory"};
  } catch (const std::length_error &e) {
    return RtError{ErrorKind::Runtime, e.what()};
  }
  if (!out.ok()) return RtError{ErrorKind::Runtime, out.error().message};
  for (size_t i = 0; i < out->size(); ++i) {
    const RtValue &v = (*out)[i];
    if (m.outputs[i].isTensor() && (!v.isTensor() || !v.tensor.defined()))
      return RtError{ErrorKind::Runtime, "output '" + m.outputs[i].name + "' is " + v.describe() +
                                             ", not a tensor"};
  }
  outputs = std::move(*out);
  return std::nullopt;
}

} // namespace kiln::rt
