#include "package/package.h"

#include "artifact/container.h"
#include "artifact/manifest.h"
#include "backend/cpu/compiler.h"
#include "codegen/cpu/cpu_target.h"
#include "frontend/onnx/importer.h"
#include "ir/infer/infer.h"
#include "runtime/cpu/program_io.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

namespace kiln::package {

namespace {

constexpr const char *kKilnVersion = "0.4.0";

// Replaces the symbolic input dims named in `dims` by their sizes and infers
// the graph again, so shapes downstream become static where they can.
Status pinDims(Graph &g, const std::vector<std::pair<std::string, int64_t>> &dims) {
  if (dims.empty()) return Status::success();
  std::map<std::string, int64_t> sizes;
  for (const auto &[name, value] : dims) {
    if (value < 0) return makeError("--dim ", name, ": size must be >= 0");
    sizes[name] = value;
  }
  std::map<std::string, bool> used;
  for (Value *in : g.inputs()) {
    if (!in->type().isTensor()) continue;
    Shape shape = in->type().shape();
    for (Dim &d : shape.dims)
      if (d.isSymbol() && sizes.count(d.symbolName())) {
        used[d.symbolName()] = true;
        d = Dim(sizes[d.symbolName()]);
      }
    in->setType(Type::tensor(in->type().dtype(), shape));
  }
  for (const auto &[name, value] : sizes)
    if (!used.count(name)) return makeError("--dim ", name, ": no input has a dim called '", name, "'");
  return inferGraph(g);
}

// The ISA features of an LLVM feature string that the runtime can check.
std::vector<std::string> neededFeatures(const std::string &llvmFeatures) {
  std::vector<std::string> out;
  std::stringstream ss(llvmFeatures);
  std::string f;
  const auto &known = artifact::checkableCpuFeatures();
  while (std::getline(ss, f, ','))
    if (f.size() > 1 && f[0] == '+' && std::find(known.begin(), known.end(), f.substr(1)) != known.end())
      out.push_back(f.substr(1));
  std::sort(out.begin(), out.end());
  return out;
}

// ld.lld from PATH (Debian's lld package), or the versioned name.
std::string findLinker() {
  for (const char *name : {"ld.lld", "ld.lld-19"}) {
    const char *path = std::getenv("PATH");
    std::stringstream dirs(path ? path : "/usr/bin");
    std::string dir;
    while (std::getline(dirs, dir, ':'))
      if (!dir.empty() && ::access((dir + "/" + name).c_str(), X_OK) == 0) return dir + "/" + name;
  }
  return "";
}

// Links the generated kernels' object into a shared object (see
// runtime/api/code_module.h for why a shared object). No build id and
// sorted inputs keep the bytes identical from one compile to the next.
Expected<std::string> linkSharedObject(const std::vector<char> &object) {
  const std::string linker = findLinker();
  if (linker.empty()) return makeError("cannot find ld.lld (Debian package lld) to link the kernels");
  char dirTemplate[] = "/tmp/kiln-link-XXXXXX";
  if (!::mkdtemp(dirTemplate)) return makeError("cannot create a temporary directory");
  const std::filesystem::path dir(dirTemplate);
  const std::string obj = (dir / "kernels.o").string(), so = (dir / "kernels.so").string();
  {
    std::ofstream f(obj, std::ios::binary);
    f.write(object.data(), static_cast<std::streamsize>(object.size()));
    if (!f) return makeError("cannot write '", obj, "'");
  }
  std::vector<std::string> args = {linker, "-shared", "--build-id=none", "-z", "noexecstack",
                                   "--hash-style=gnu", "-O1", "-o", so, obj};
  std::vector<char *> argv;
  for (std::string &a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::filesystem::remove_all(dir);
    return makeError("linking the kernels with ", linker, " failed");
  }
  std::ifstream f(so, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::filesystem::remove_all(dir);
  if (bytes.empty()) return makeError("the linker wrote no shared object");
  return bytes;
}

} // namespace

Expected<std::unique_ptr<cpu::CompiledModel>> compileForArtifact(Model model,
                                                                  const PackageOptions &options) {
  if (options.target != "cpu") return makeError("unknown target '", options.target, "' (only cpu)");
  KILN_RETURN_IF_ERROR(pinDims(*model.graph, options.dims));
  cpu::CompileOptions co;
  co.optLevel = options.optLevel;
  co.cpu = options.cpu;
  co.exposeIntermediates = options.exposeIntermediates;
  co.perturbNode = options.perturbNode;
  co.dumpDir = options.dumpDir;
  co.passOptions = options.passOptions;
  co.specializedSteps = options.specializedSteps;
  return cpu::CompiledModel::compile(std::move(model), co);
}

Expected<std::string> packageCompiled(const cpu::CompiledModel &compiled,
                                      const PackageOptions &options) {
  const Model &model = compiled.model();
  artifact::Manifest m;
  m.kilnVersion = kKilnVersion;
  m.modelName = options.modelName;
  m.producer = model.producer;
  m.cpu = options.cpu;
  for (const Value *v : model.graph->inputs()) m.inputs.push_back(tensorInfoOf(*v));
  for (const Value *v : model.graph->outputs()) m.outputs.push_back(tensorInfoOf(*v));

  KILN_ASSIGN_OR_RETURN(codegen::CpuTarget target, codegen::cpuTargetFromName(options.cpu));
  m.llvmCpu = target.cpu;
  m.cpuFeatures = neededFeatures(target.features);
  const cpu::CompileStats &st = compiled.stats();
  m.steps = st.steps;
  m.generatedKernels = st.generatedKernels;
  m.microkernelSteps = st.microkernelSteps;
  m.copySteps = st.copySteps;
  m.hostSteps = st.hostSteps;
  m.kernelSymbols = compiled.objectCode().symbols;

  KILN_ASSIGN_OR_RETURN(cpu::SavedProgram saved, cpu::saveProgram(compiled.program()));
  artifact::ContainerWriter writer;
  KILN_RETURN_IF_ERROR(writer.addSection(artifact::SectionKind::Manifest, m.serialize()));
  KILN_RETURN_IF_ERROR(writer.addSection(artifact::SectionKind::Program, std::move(saved.program)));
  if (!compiled.objectCode().bytes.empty()) {
    KILN_ASSIGN_OR_RETURN(std::string so, linkSharedObject(compiled.objectCode().bytes));
    KILN_RETURN_IF_ERROR(writer.addSection(artifact::SectionKind::CpuCode, std::move(so)));
  }
  KILN_RETURN_IF_ERROR(writer.addSection(artifact::SectionKind::Weights, std::move(saved.weights)));
  return writer.finish();
}

Expected<std::string> packageModel(Model model, const PackageOptions &options) {
  KILN_ASSIGN_OR_RETURN(auto compiled, compileForArtifact(std::move(model), options));
  return packageCompiled(*compiled, options);
}

Status compileFile(const std::string &modelPath, const std::string &outPath,
                   const PackageOptions &options) {
  KILN_ASSIGN_OR_RETURN(Model model, importOnnxFile(modelPath));
  PackageOptions o = options;
  if (o.modelName.empty()) o.modelName = std::filesystem::path(modelPath).filename().string();
  KILN_ASSIGN_OR_RETURN(std::string bytes, packageModel(std::move(model), o));
  const std::string tmp = outPath + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!f) return makeError("cannot write '", outPath, "'");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, outPath, ec);
  if (ec) return makeError("cannot write '", outPath, "': ", ec.message());
  return Status::success();
}

artifact::TensorInfo tensorInfoOf(const Value &v) {
  artifact::TensorInfo t;
  t.name = v.name();
  const Type *type = &v.type();
  for (; !type->isTensor(); type = &type->element())
    t.containers.push_back(type->kind() == Type::Kind::Sequence
                               ? artifact::ContainerKind::Sequence
                               : artifact::ContainerKind::Optional);
  t.dtype = type->dtype();
  t.rankKnown = type->shape().rankKnown;
  for (const Dim &d : type->shape().dims) {
    t.dims.push_back(d.isStatic() ? d.value() : -1);
    t.dimNames.push_back(d.isSymbol() ? d.symbolName() : "");
  }
  return t;
}

} // namespace kiln::package
