#include "cli.h"

#include "frontend/onnx/importer.h"
#include "ir/parser.h"
#include "ir/verifier.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

namespace kiln::cli {

Expected<Args> Args::parse(const std::vector<std::string> &argv,
                           const std::vector<std::string> &valueFlags,
                           const std::vector<std::string> &booleanFlags) {
  Args a;
  auto isIn = [](const std::vector<std::string> &v, const std::string &s) {
    return std::find(v.begin(), v.end(), s) != v.end();
  };
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string &arg = argv[i];
    if (arg.size() < 2 || arg.rfind("--", 0) != 0) {
      a.positional_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2), value;
    bool hasValue = false;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      hasValue = true;
    }
    if (isIn(booleanFlags, name)) {
      if (hasValue) return makeError("flag --", name, " takes no value");
      ++a.flags_[name];
    } else if (isIn(valueFlags, name)) {
      if (!hasValue) {
        if (i + 1 >= argv.size()) return makeError("flag --", name, " needs a value");
        value = argv[++i];
      }
      a.values_.emplace(name, value);
    } else {
      return makeError("unknown flag --", name);
    }
  }
  return a;
}

std::optional<std::string> Args::value(const std::string &name) const {
  auto range = values_.equal_range(name);
  if (range.first == range.second) return std::nullopt;
  return std::prev(range.second)->second; // the last one wins
}

std::vector<std::string> Args::values(const std::string &name) const {
  std::vector<std::string> out;
  auto range = values_.equal_range(name);
  for (auto it = range.first; it != range.second; ++it) out.push_back(it->second);
  return out;
}

Expected<std::pair<std::string, std::string>> splitAssignment(const std::string &text,
                                                              const std::string &flag) {
  size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    return makeError("--", flag, " expects NAME=VALUE, got '", text, "'");
  return std::make_pair(text.substr(0, eq), text.substr(eq + 1));
}

Expected<Model> loadModel(const std::string &path) {
  auto endsWith = [&](const std::string &suffix) {
    return path.size() >= suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (endsWith(".kir")) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return makeError(path, ": cannot open file");
    std::stringstream ss;
    ss << in.rdbuf();
    // The parser leaves arity and attribute checks to the verifier; kernels
    // rely on both, so nothing unverified reaches them.
    KILN_ASSIGN_OR_RETURN(Model m, parseModel(ss.str(), path));
    if (Status s = verifyModel(m); !s.ok()) return withContext(path, s.error());
    return m;
  }
  return importOnnxFile(path);
}

int fail(const std::string &command, const Error &e) {
  std::cerr << "kiln " << command << ": " << e.message << "\n";
  return 1;
}

std::vector<std::string> outputFileNames(const std::vector<std::string> &names) {
  std::vector<std::string> out;
  std::set<std::string> taken;
  for (const std::string &name : names) {
    std::string base;
    for (char c : name)
      base += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-') ? c : '_';
    if (base.empty()) base = "_";
    std::string candidate = base;
    for (int k = 2; taken.count(candidate); ++k) candidate = base + "__" + std::to_string(k);
    taken.insert(candidate);
    out.push_back(candidate);
  }
  return out;
}

} // namespace kiln::cli
