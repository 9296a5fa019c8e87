#include "artifact/manifest.h"

#include <algorithm>

namespace kiln::artifact {

namespace {

constexpr uint32_t kManifestVersion = 2; // 2: containers and unknown ranks

void writeInfo(ByteWriter &w, const TensorInfo &t) {
  w.writeString(t.name);
  w.writeU32(static_cast<uint32_t>(onnxCodeOf(t.dtype)));
  w.writeCount(t.dims.size());
  for (size_t i = 0; i < t.dims.size(); ++i) {
    w.writeI64(t.dims[i]);
    w.writeString(i < t.dimNames.size() ? t.dimNames[i] : "");
  }
  w.writeU8(t.rankKnown ? 1 : 0);
  w.writeCount(t.containers.size());
  for (ContainerKind c : t.containers) w.writeU8(static_cast<uint8_t>(c));
}

TensorInfo readInfo(ByteReader &r) {
  TensorInfo t;
  t.name = r.readString();
  const uint32_t code = r.readU32();
  const uint64_t rank = r.readCount(64, 16);
  for (uint64_t i = 0; i < rank; ++i) {
    t.dims.push_back(r.readI64());
    t.dimNames.push_back(r.readString());
  }
  t.rankKnown = r.readU8() != 0;
  const uint64_t depth = r.readCount(16, 1);
  for (uint64_t i = 0; i < depth && r.ok(); ++i) {
    const uint8_t c = r.readU8();
    if (c != static_cast<uint8_t>(ContainerKind::Sequence) &&
        c != static_cast<uint8_t>(ContainerKind::Optional))
      r.fail("'" + t.name + "' has unknown container kind " + std::to_string(c));
    t.containers.push_back(static_cast<ContainerKind>(c));
  }
  std::optional<DType> d = dtypeFromOnnx(static_cast<int>(code));
  if (r.ok() && !d) r.fail("input or output '" + t.name + "' has unknown dtype code " +
                           std::to_string(code));
  if (d) t.dtype = *d;
  for (int64_t dim : t.dims)
    if (r.ok() && dim < -1) r.fail("'" + t.name + "' has a negative dim");
  return t;
}

void writeStrings(ByteWriter &w, const std::vector<std::string> &v) {
  w.writeCount(v.size());
  for (const std::string &s : v) w.writeString(s);
}

std::vector<std::string> readStrings(ByteReader &r) {
  std::vector<std::string> v;
  const uint64_t n = r.readCount(1 << 20, 8);
  for (uint64_t i = 0; i < n && r.ok(); ++i) v.push_back(r.readString());
  return v;
}

} // namespace

std::string shapeText(const TensorInfo &t) {
  if (!t.rankKnown) return "[*]";
  std::string s = "[";
  for (size_t i = 0; i < t.dims.size(); ++i) {
    if (i) s += ",";
    s += t.dims[i] >= 0 ? std::to_string(t.dims[i]) : (t.dimNames[i].empty() ? "?" : t.dimNames[i]);
  }
  return s + "]";
}

std::string typeText(const TensorInfo &t) {
  std::string s = std::string(dtypeName(t.dtype)) + shapeText(t);
  for (auto c = t.containers.rbegin(); c != t.containers.rend(); ++c)
    s = (*c == ContainerKind::Sequence ? "seq<" : "opt<") + s + ">";
  return s;
}

std::string Manifest::serialize() const {
  ByteWriter w;
  w.writeU32(kManifestVersion);
  for (const std::string *s : {&kilnVersion, &modelName, &producer, &target, &cpu, &llvmCpu})
    w.writeString(*s);
  writeStrings(w, cpuFeatures);
  for (const auto *list : {&inputs, &outputs}) {
    w.writeCount(list->size());
    for (const TensorInfo &t : *list) writeInfo(w, t);
  }
  writeStrings(w, kernelSymbols);
  for (int64_t v : {steps, generatedKernels, microkernelSteps, copySteps, hostSteps}) w.writeI64(v);
  return w.take();
}

Expected<Manifest> Manifest::parse(std::span<const uint8_t> bytes) {
  ByteReader r(bytes, "manifest section");
  Manifest m;
  const uint32_t version = r.readU32();
  if (r.ok() && version != kManifestVersion)
    return makeError("manifest version ", version, ", this runtime reads version ",
                     kManifestVersion);
  for (std::string *s : {&m.kilnVersion, &m.modelName, &m.producer, &m.target, &m.cpu, &m.llvmCpu})
    *s = r.readString();
  m.cpuFeatures = readStrings(r);
  for (auto *list : {&m.inputs, &m.outputs}) {
    const uint64_t n = r.readCount(1 << 16, 16);
    for (uint64_t i = 0; i < n && r.ok(); ++i) list->push_back(readInfo(r));
  }
  m.kernelSymbols = readStrings(r);
  for (int64_t *v : {&m.steps, &m.generatedKernels, &m.microkernelSteps, &m.copySteps, &m.hostSteps})
    *v = r.readI64();
  r.expectEnd();
  if (!r.ok()) return r.status().error();
  if (m.target != "cpu") return makeError("artifact targets '", m.target, "', this runtime runs cpu");
  return m;
}

std::string Manifest::describe() const {
  std::string s = "model: " + modelName + (producer.empty() ? "" : " (producer " + producer + ")") +
                  "\ncompiled by: kiln " + kilnVersion + "\ntarget: " + target + " (--cpu " + cpu +
                  ", LLVM cpu " + llvmCpu + ")\ncpu features needed:";
  for (const std::string &f : cpuFeatures) s += " " + f;
  s += "\ninputs:\n";
  for (const TensorInfo &t : inputs) s += "  " + t.name + ": " + typeText(t) + "\n";
  s += "outputs:\n";
  for (const TensorInfo &t : outputs) s += "  " + t.name + ": " + typeText(t) + "\n";
  s += "program: " + std::to_string(steps) + " steps: " + std::to_string(generatedKernels) +
       " generated kernels, " + std::to_string(microkernelSteps) + " microkernel calls, " +
       std::to_string(copySteps) + " copies, " + std::to_string(hostSteps) + " host ops\n";
  return s;
}

// __builtin_cpu_supports needs literal names, hence the table.
#define KILN_CPU_FEATURES(X)                                                                       \
  X("sse4.1") X("sse4.2") X("popcnt") X("avx") X("avx2") X("fma") X("bmi") X("bmi2")              \
  X("avx512f") X("avx512vl") X("avx512bw") X("avx512dq") X("avx512cd") X("avx512vnni")            \
  X("avx512bf16")

const std::vector<std::string> &checkableCpuFeatures() {
#define X(name) name,
  static const std::vector<std::string> names = {KILN_CPU_FEATURES(X)};
#undef X
  return names;
}

std::vector<std::string> missingCpuFeatures(const std::vector<std::string> &features) {
  std::vector<std::string> missing;
  for (const std::string &f : features) {
    bool has = false, known = false;
#define X(name)                                                                                    \
  if (f == name) {                                                                                 \
    known = true;                                                                                  \
    has = __builtin_cpu_supports(name);                                                            \
  }
    KILN_CPU_FEATURES(X)
#undef X
    if (!known || !has) missing.push_back(f);
  }
  return missing;
}

} // namespace kiln::artifact
