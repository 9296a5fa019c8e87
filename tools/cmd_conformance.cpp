// `kiln conformance DIR...`: runs ONNX backend test cases and compares each
// output with the expected one. Every case runs in a child process, so a
// crash or a hang in one case is reported as that case's failure and the run
// goes on. With --expected FILE, the run also checks a list of known failures:
// it fails when a case outside the list fails, or a listed one passes (so the
// list stays true).
#include "cli.h"
#include "commands.h"
#include "engine.h"
#include "conformance/compare.h"
#include "conformance/test_case.h"

#include "frontend/onnx/importer.h"
#include "artifact_engine.h"
#include "interp/interpreter.h"
#include "package/package.h"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <poll.h>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

namespace kiln::cli {

namespace {

const char *kHelp = R"(usage: kiln conformance DIR... [options]

Runs every ONNX backend test case under each DIR (a case is a directory with
model.onnx and test_data_set_*/{input,output}_*.pb) with the reference
interpreter and compares the outputs (floats: rtol 1e-3, atol 1e-5; integers,
bools and strings exactly). Ends with the line "N passed, M failed, K skipped".

options:
  --expected FILE   known failures and skips, one per line (repeatable: the
                    lists merge):
                      <suite>/<case> fail|skip <reason>
                    skip: the case is not run; fail: it must still fail.
                    Exit status is non-zero if an unlisted case fails or a
                    listed failure passes.
  --filter TEXT     only run cases whose name contains TEXT
  --json            print one JSON object per case instead of text lines
  --timeout SECONDS per-case limit (default 120)
  --target T        what to run the cases on: cpu (default; compiled once
                    per case, one thread), interp, or vulkan (the generated
                    kernels as SPIR-V on a Vulkan device; KILN_VULKAN_DEVICE
                    picks one)
  --via-artifact    with --target cpu: compile each case to a .kiln file, load
                    it with the runtime library and run it there
  -v, --verbose     print passing cases too
)";

struct Expectation {
  bool skip = false;
  std::string reason;
};

Expected<std::map<std::string, Expectation>> readExpectations(const std::string &path) {
  std::ifstream in(path);
  if (!in) return makeError(path, ": cannot open file");
  std::map<std::string, Expectation> out;
  std::string line;
  int lineNo = 0;
  while (std::getline(in, line)) {
    ++lineNo;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    std::string name, kind;
    ls >> name >> kind;
    std::string reason;
    std::getline(ls, reason);
    if (kind != "fail" && kind != "skip")
      return makeError(path, ":", lineNo, ": expected 'fail' or 'skip' after the case name");
    size_t start = reason.find_first_not_of(' ');
    reason = start == std::string::npos ? "" : reason.substr(start);
    if (reason.empty()) return makeError(path, ":", lineNo, ": every entry needs a reason");
    out[name] = {kind == "skip", reason};
  }
  return out;
}

// Runs one case in this process; empty string means it passed.
std::string runCaseInProcess(const conformance::TestCase &c, const TargetOptions &target,
                             bool viaArtifact) {
  auto model = importOnnxFile(c.dir + "/model.onnx");
  if (!model.ok()) return "import: " + model.error().message;
  Expected<std::unique_ptr<Engine>> engine = makeError("no engine");
  if (viaArtifact) {
    // A .kiln file, opened by the runtime library as an application would.
    package::PackageOptions po;
    po.cpu = target.cpu;
    po.optLevel = target.optLevel;
    auto bytes = package::packageModel(std::move(*model), po);
    if (!bytes.ok()) return "compile: " + bytes.error().message;
    char path[] = "/tmp/kiln-conformance-XXXXXX";
    const int fd = mkstemp(path);
    if (fd < 0) return std::string("cannot create a temporary file: ") + std::strerror(errno);
    const bool written = write(fd, bytes->data(), bytes->size()) == ssize_t(bytes->size());
    close(fd);
    if (written) engine = openArtifactEngine(path, target.threads);
    unlink(path);
    if (!written) return "cannot write the artifact";
    if (!engine.ok()) return "load: " + engine.error().message;
  } else {
    engine = makeEngine(std::move(*model), target);
    if (!engine.ok()) return "compile: " + engine.error().message;
  }
  const Graph &g = (*engine)->graph();
  if (c.dataSets.empty()) return "no test data sets";
  for (const auto &ds : c.dataSets) {
    if (ds.inputFiles.size() != g.inputs().size())
      return ds.dir + ": " + std::to_string(ds.inputFiles.size()) + " input files for " +
             std::to_string(g.inputs().size()) + " graph inputs";
    std::vector<RtValue> inputs;
    for (size_t i = 0; i < ds.inputFiles.size(); ++i) {
      auto v = conformance::readValueFile(ds.inputFiles[i], g.inputs()[i]->type());
      if (!v.ok()) return v.error().message;
      inputs.push_back(std::move(*v));
    }
    auto outs = (*engine)->run(std::move(inputs));
    if (!outs.ok()) return "run: " + outs.error().message;
    if (ds.outputFiles.size() > outs->size())
      return "model gave " + std::to_string(outs->size()) + " outputs, expected " +
             std::to_string(ds.outputFiles.size());
    for (size_t i = 0; i < ds.outputFiles.size(); ++i) {
      auto expected = conformance::readValueFile(ds.outputFiles[i], g.outputs()[i]->type());
      if (!expected.ok()) return expected.error().message;
      if (auto diff = conformance::compareValues((*outs)[i], *expected, {}))
        return "output " + std::to_string(i) + " ('" + g.outputs()[i]->name() + "'): " + *diff;
    }
  }
  return "";
}

// Forks, runs the case in the child, and collects its verdict through a pipe.
std::string runCaseIsolated(const conformance::TestCase &c, const TargetOptions &target,
                            bool viaArtifact, int timeoutSeconds) {
  int fds[2];
  if (pipe(fds) != 0) return std::string("pipe failed: ") + std::strerror(errno);
  std::cout.flush();
  pid_t pid = fork();
  if (pid < 0) return std::string("fork failed: ") + std::strerror(errno);
  if (pid == 0) {
    close(fds[0]);
    std::string verdict = runCaseInProcess(c, target, viaArtifact);
    size_t off = 0;
    while (off < verdict.size()) {
      ssize_t w = write(fds[1], verdict.data() + off, verdict.size() - off);
      if (w <= 0) break;
      off += static_cast<size_t>(w);
    }
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  std::string verdict;
  bool timedOut = false;
  char buf[4096];
  for (;;) {
    pollfd p{fds[0], POLLIN, 0};
    int r = poll(&p, 1, timeoutSeconds * 1000);
    if (r == 0) {
      timedOut = true;
      kill(pid, SIGKILL);
      break;
    }
    if (r < 0 && errno == EINTR) continue;
    ssize_t n = read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    verdict.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (timedOut) return "timed out after " + std::to_string(timeoutSeconds) + " s";
  if (WIFSIGNALED(status)) return "crashed with signal " + std::to_string(WTERMSIG(status));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return "child exited abnormally";
  return verdict;
}

std::string jsonEscape(const std::string &s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += c;
    else if (c == '\n') out += "\\n";
    else if (static_cast<unsigned char>(c) < 0x20) out += ' ';
    else out += c;
  }
  return out;
}

} // namespace

int conformanceCommand(const std::vector<std::string> &rawArgs) {
  std::vector<std::string> argv = rawArgs;
  for (std::string &a : argv)
    if (a == "-v") a = "--verbose";
  std::vector<std::string> flags = {"expected", "filter", "timeout"};
  flags.insert(flags.end(), kTargetFlags.begin(), kTargetFlags.end());
  auto args = Args::parse(argv, flags, {"help", "json", "verbose", "via-artifact"});
  if (!args.ok()) return fail("conformance", args.error());
  if (args->flag("help")) {
    std::cout << kHelp;
    return 0;
  }
  if (args->positional().empty()) return fail("conformance", Error{"expects at least one DIR"});
  auto target = targetOptionsFrom(*args, 1);
  if (!target.ok()) return fail("conformance", target.error());
  int timeout = 120;
  if (auto t = args->value("timeout")) timeout = std::max(1, std::atoi(t->c_str()));
  // Several lists merge (a target's own misses on top of the interpreter's).
  std::map<std::string, Expectation> expectations;
  for (const std::string &path : args->values("expected")) {
    auto e = readExpectations(path);
    if (!e.ok()) return fail("conformance", e.error());
    expectations.insert(e->begin(), e->end());
  }
  std::string filter = args->value("filter").value_or("");
  bool json = args->flag("json"), verbose = args->flag("verbose");
  const bool viaArtifact = args->flag("via-artifact");
  if (viaArtifact && target->target != "cpu")
    return fail("conformance", Error{"--via-artifact needs --target cpu"});

  int passed = 0, failed = 0, skipped = 0;
  std::vector<std::string> surprises;
  std::map<std::string, bool> seen;
  std::map<std::string, bool> suitesSeen; // "node", "simple"...
  for (const std::string &dir : args->positional()) {
    auto cases = conformance::discoverCases(dir);
    if (!cases.ok()) return fail("conformance", cases.error());
    for (const auto &c : *cases) {
      if (!filter.empty() && c.name.find(filter) == std::string::npos) continue;
      auto exp = expectations.find(c.name);
      seen[c.name] = true;
      suitesSeen[c.name.substr(0, c.name.find('/'))] = true;
      std::string verdict, status;
      if (exp != expectations.end() && exp->second.skip) {
        ++skipped;
        status = "skip";
        verdict = exp->second.reason;
      } else {
        verdict = runCaseIsolated(c, *target, viaArtifact, timeout);
        bool ok = verdict.empty();
        status = ok ? "pass" : "fail";
        ok ? ++passed : ++failed;
        bool listed = exp != expectations.end();
        if (!ok && !listed) surprises.push_back("unexpected failure: " + c.name + ": " + verdict);
        if (ok && listed)
          surprises.push_back("listed as failing but passes: " + c.name + " (remove it from the list)");
      }
      if (json)
        std::cout << "{\"case\": \"" << jsonEscape(c.name) << "\", \"status\": \"" << status
                  << "\", \"detail\": \"" << jsonEscape(verdict) << "\"}\n";
      else if (status != "pass" || verbose)
        std::cout << (status == "pass" ? "PASS " : status == "fail" ? "FAIL " : "SKIP ") << c.name
                  << (verdict.empty() ? "" : ": " + verdict) << "\n";
    }
  }
  for (auto &[name, e] : expectations)
    if (!seen.count(name) && filter.empty() && suitesSeen.count(name.substr(0, name.find('/'))))
      surprises.push_back("listed case not found: " + name);
  for (const auto &s : surprises) std::cout << "CHECK " << s << "\n";
  std::cout << passed << " passed, " << failed << " failed, " << skipped << " skipped\n";
  if (!expectations.empty() || args->value("expected")) return surprises.empty() ? 0 : 1;
  return failed == 0 ? 0 : 1;
}

} // namespace kiln::cli
