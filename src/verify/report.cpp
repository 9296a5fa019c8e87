#include "verify/report.h"

#include "support/json.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace kiln::verify {

namespace {

std::string sci(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3e", v);
  return buf;
}

std::string shapeText(const Shape64 &s) {
  return shapeToString(s);
}

std::string pad(std::string s, size_t width) {
  if (s.size() < width) s += std::string(width - s.size(), ' ');
  return s;
}

std::string verdict(const ValueResult &v) {
  return v.metrics.pass ? "PASS" : "FAIL";
}

std::string sourcesText(const Layer &l) {
  if (l.sourceNodes.size() == 1 && l.sourceNodes[0] == l.node) return "";
  std::string s = " [";
  for (size_t i = 0; i < l.sourceNodes.size(); ++i) s += (i ? ", " : "") + l.sourceNodes[i];
  return s + "]";
}

// ---- JSON --------------------------------------------------------------------

std::string jsonNumber(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string jsonShape(const Shape64 &s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

std::string jsonStrings(const std::vector<std::string> &v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + jsonString(v[i]);
  return out + "]";
}

std::string jsonValue(const ValueResult &v) {
  const Metrics &m = v.metrics;
  std::ostringstream os;
  os << "{\"name\":" << jsonString(v.name) << ",\"dtype\":" << jsonString(v.dtype)
     << ",\"shape\":" << jsonShape(v.shape) << ",\"reference_shape\":" << jsonShape(v.refShape)
     << ",\"rtol\":" << jsonNumber(v.tol.rtol) << ",\"atol\":" << jsonNumber(v.tol.atol)
     << ",\"numel\":" << m.numel << ",\"max_abs_err\":" << jsonNumber(m.maxAbsErr)
     << ",\"mae\":" << jsonNumber(m.mae) << ",\"rmse\":" << jsonNumber(m.rmse)
     << ",\"rel_l2\":" << jsonNumber(m.relL2) << ",\"cosine\":" << jsonNumber(m.cosine)
     << ",\"outside_tolerance\":" << m.outsideTolerance << ",\"nan\":{\"target\":" << m.nanGot
     << ",\"reference\":" << m.nanRef << "},\"inf\":{\"target\":" << m.infGot
     << ",\"reference\":" << m.infRef << "},\"pass\":" << (m.pass ? "true" : "false")
     << ",\"error\":" << (m.error.empty() ? "null" : jsonString(m.error)) << "}";
  return os.str();
}

std::string jsonLayer(const Layer &l, size_t index) {
  std::ostringstream os;
  os << "{\"index\":" << index << ",\"node\":" << jsonString(l.node)
     << ",\"op\":" << jsonString(l.op) << ",\"source_nodes\":" << jsonStrings(l.sourceNodes)
     << ",\"inputs_agree\":" << (l.inputsAgree ? "true" : "false")
     << ",\"diverged_inputs\":" << jsonStrings(l.badInputs)
     << ",\"unchecked_inputs\":" << jsonStrings(l.uncheckedInputs)
     << ",\"value\":" << jsonValue(l.value) << "}";
  return os.str();
}

// ---- HTML --------------------------------------------------------------------

std::string html(const std::string &s) {
  std::string out;
  for (char c : s) {
    switch (c) {
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '&':
      out += "&amp;";
      break;
    case '"':
      out += "&quot;";
      break;
    default:
      out += c;
    }
  }
  return out;
}

// The relative-L2 curve by layer on a log scale. Zero errors sit on the
// floor of the axis (1e-12 or the smallest decade below the data).
std::string svgCurve(const BisectResult &b) {
  const double W = 1100, H = 380, left = 70, right = 20, top = 20, bottom = 50;
  const auto &layers = b.layers;
  double lo = 1e-9, hi = 1;
  for (const Layer &l : layers) {
    double v = l.value.metrics.relL2;
    if (std::isfinite(v) && v > 0) lo = std::min(lo, v), hi = std::max(hi, v);
  }
  int dLo = static_cast<int>(std::floor(std::log10(std::max(lo, 1e-12))));
  int dHi = static_cast<int>(std::ceil(std::log10(hi)));
  if (dHi <= dLo) dHi = dLo + 1;
  size_t n = std::max<size_t>(layers.size(), 2);
  auto x = [&](size_t i) { return left + (W - left - right) * static_cast<double>(i) / (n - 1); };
  auto y = [&](double v) {
    double d = (std::isfinite(v) && v > 0) ? std::log10(v) : dLo;
    if (!std::isfinite(v) && !std::isnan(v)) d = dHi;
    d = std::clamp(d, static_cast<double>(dLo), static_cast<double>(dHi));
    return top + (H - top - bottom) * (dHi - d) / (dHi - dLo);
  };
  std::ostringstream os;
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
     << "\" viewBox=\"0 0 " << W << " " << H
     << "\" role=\"img\" aria-label=\"relative L2 error by layer\">\n"
     << "<rect x=\"0\" y=\"0\" width=\"" << W << "\" height=\"" << H << "\" fill=\"#ffffff\"/>\n";
  for (int d = dLo; d <= dHi; ++d) {
    double yy = y(std::pow(10.0, d));
    os << "<line x1=\"" << left << "\" y1=\"" << yy << "\" x2=\"" << W - right << "\" y2=\"" << yy
       << "\" stroke=\"#e3e3e3\"/>"
       << "<text x=\"" << left - 8 << "\" y=\"" << yy + 4
       << "\" font-size=\"12\" text-anchor=\"end\" fill=\"#444\">1e" << d << "</text>\n";
  }
  os << "<line x1=\"" << left << "\" y1=\"" << top << "\" x2=\"" << left << "\" y2=\"" << H - bottom
     << "\" stroke=\"#333\"/><line x1=\"" << left << "\" y1=\"" << H - bottom << "\" x2=\""
     << W - right << "\" y2=\"" << H - bottom << "\" stroke=\"#333\"/>\n"
     << "<text x=\"" << (W + left) / 2 << "\" y=\"" << H - 12
     << "\" font-size=\"13\" text-anchor=\"middle\" fill=\"#222\">layer (topological order, "
     << layers.size() << " values)</text>\n"
     << "<text x=\"16\" y=\"" << (H - bottom + top) / 2 << "\" font-size=\"13\" fill=\"#222\" "
     << "transform=\"rotate(-90 16 " << (H - bottom + top) / 2
     << ")\" text-anchor=\"middle\">relative L2 error</text>\n";
  if (!layers.empty()) {
    os << "<polyline fill=\"none\" stroke=\"#2b6cb0\" stroke-width=\"2\" points=\"";
    for (size_t i = 0; i < layers.size(); ++i)
      os << x(i) << "," << y(layers[i].value.metrics.relL2) << " ";
    os << "\"/>\n";
  }
  for (size_t i = 0; i < layers.size(); ++i) {
    const Layer &l = layers[i];
    bool first = static_cast<int>(i) == b.firstDivergence;
    os << "<circle cx=\"" << x(i) << "\" cy=\"" << y(l.value.metrics.relL2) << "\" r=\""
       << (first ? 7 : 3) << "\" fill=\"" << (l.value.metrics.pass ? "#2b6cb0" : "#d62728")
       << "\"><title>#" << i << " " << html(l.node) << " (" << html(l.op) << ") "
       << html(l.value.name) << ": rel L2 " << sci(l.value.metrics.relL2) << "</title></circle>\n";
    if (first)
      os << "<text x=\"" << x(i) + 10 << "\" y=\"" << y(l.value.metrics.relL2) - 10
         << "\" font-size=\"13\" fill=\"#d62728\">first divergence: " << html(l.node)
         << "</text>\n";
  }
  os << "</svg>\n";
  return os.str();
}

std::string valueCells(const ValueResult &v) {
  const Metrics &m = v.metrics;
  std::ostringstream os;
  os << "<td>" << html(v.dtype) << shapeText(v.shape) << "</td><td>" << sci(m.maxAbsErr)
     << "</td><td>" << sci(m.mae) << "</td><td>" << sci(m.rmse) << "</td><td>" << sci(m.relL2)
     << "</td><td>" << std::to_string(m.cosine) << "</td><td>" << m.outsideTolerance << "</td><td>"
     << m.nanGot << "/" << m.nanRef << "</td><td>" << m.infGot << "/" << m.infRef
     << "</td><td class=\"" << (m.pass ? "pass\">PASS" : "fail\">FAIL") << "</td>";
  if (!m.error.empty()) os << "<td>" << html(m.error) << "</td>";
  return os.str();
}

const char *kValueHeader = "<th>dtype/shape</th><th>max abs</th><th>MAE</th><th>RMSE</th>"
                           "<th>rel L2</th><th>cosine</th><th>outside tol</th><th>NaN t/r</th>"
                           "<th>Inf t/r</th><th>result</th>";

} // namespace

void printText(std::ostream &os, const VerifyResult &r) {
  os << "kiln verify " << r.model << ": target " << r.target << ", reference " << r.reference
     << ", seed " << r.seed << "\n";
  auto header = [&](const std::string &first, size_t w) {
    os << pad(first, w) << pad("dtype/shape", 22) << pad("max_abs", 11) << pad("mae", 11)
       << pad("rmse", 11) << pad("rel_l2", 11) << pad("cosine", 10) << pad("outside", 9)
       << pad("nan t/r", 9) << pad("inf t/r", 9) << "result\n";
  };
  auto row = [&](const ValueResult &v) {
    const Metrics &m = v.metrics;
    char cos[16];
    std::snprintf(cos, sizeof cos, "%.6f", m.cosine);
    os << pad(v.dtype + shapeText(v.shape), 22) << pad(sci(m.maxAbsErr), 11) << pad(sci(m.mae), 11)
       << pad(sci(m.rmse), 11) << pad(sci(m.relL2), 11) << pad(cos, 10)
       << pad(std::to_string(m.outsideTolerance), 9)
       << pad(std::to_string(m.nanGot) + "/" + std::to_string(m.nanRef), 9)
       << pad(std::to_string(m.infGot) + "/" + std::to_string(m.infRef), 9) << verdict(v);
    if (!m.error.empty()) os << " (" << m.error << ")";
    os << "\n";
  };
  size_t w = 8;
  for (const ValueResult &v : r.outputs) w = std::max(w, v.name.size() + 2);
  header("output", w);
  for (const ValueResult &v : r.outputs) {
    os << pad(v.name, w);
    row(v);
  }
  const BisectResult &b = r.bisect;
  if (b.ran) {
    os << "\nper-layer comparison: " << b.layers.size() << " values in both runs";
    if (b.valuesNotCompared) os << ", " << b.valuesNotCompared << " only in the target";
    os << "\n";
    size_t lw = 10;
    for (const Layer &l : b.layers) lw = std::max(lw, std::min<size_t>(l.node.size() + 2, 48));
    os << pad("#", 6) << pad("op", 22);
    header("node", lw);
    for (size_t i = 0; i < b.layers.size(); ++i) {
      const Layer &l = b.layers[i];
      os << pad(std::to_string(i) + (static_cast<int>(i) == b.firstDivergence ? "*" : ""), 6)
         << pad(l.op, 22) << pad(l.node, lw);
      row(l.value);
    }
    if (b.firstDivergence >= 0) {
      const Layer &l = b.layers[b.firstDivergence];
      const Metrics &m = l.value.metrics;
      os << "\nfirst divergence: node '" << l.node << "' (" << l.op << ")" << sourcesText(l)
         << " -> value '" << l.value.name << "': max abs " << sci(m.maxAbsErr) << ", rel L2 "
         << sci(m.relL2) << ", cosine " << m.cosine << ", " << m.outsideTolerance << " of "
         << m.numel << " elements outside tolerance; its inputs agree";
      if (!l.uncheckedInputs.empty()) {
        os << " (not compared:";
        for (const std::string &n : l.uncheckedInputs) os << " " << n;
        os << ")";
      }
      os << "\n";
    } else if (!r.pass) {
      os << "\nno node diverges while its inputs agree: the divergence is in values the two runs "
            "do not share\n";
    }
  }
  if (!b.note.empty()) os << "\n" << b.note << "\n";
  size_t failed = 0;
  for (const ValueResult &v : r.outputs) failed += !v.metrics.pass;
  os << "\n"
     << (r.pass ? "PASS" : "FAIL") << ": " << r.outputs.size() - failed << " of "
     << r.outputs.size() << " outputs within tolerance\n";
}

std::string toJson(const VerifyResult &r) {
  std::ostringstream os;
  os << "{\n  \"schema\": \"kiln-verify/1\",\n  \"model\": " << jsonString(r.model)
     << ",\n  \"target\": " << jsonString(r.target)
     << ",\n  \"reference\": " << jsonString(r.reference) << ",\n  \"seed\": " << r.seed
     << ",\n  \"rtol\": " << (r.rtol ? jsonNumber(*r.rtol) : "null")
     << ",\n  \"atol\": " << (r.atol ? jsonNumber(*r.atol) : "null")
     << ",\n  \"pass\": " << (r.pass ? "true" : "false")
     << ",\n  \"timing_ms\": {\"target\": " << jsonNumber(r.targetMs)
     << ", \"reference\": " << jsonNumber(r.referenceMs) << "},\n  \"inputs\": [";
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    const InputInfo &in = r.inputs[i];
    os << (i ? ",\n    " : "\n    ") << "{\"name\":" << jsonString(in.name)
       << ",\"dtype\":" << jsonString(in.dtype) << ",\"shape\":" << jsonShape(in.shape)
       << ",\"source\":" << jsonString(in.source) << "}";
  }
  os << "\n  ],\n  \"outputs\": [";
  for (size_t i = 0; i < r.outputs.size(); ++i)
    os << (i ? ",\n    " : "\n    ") << jsonValue(r.outputs[i]);
  os << "\n  ],\n  \"bisect\": ";
  const BisectResult &b = r.bisect;
  if (!b.ran && b.note.empty()) {
    os << "null\n}\n";
    return os.str();
  }
  os << "{\n    \"ran\": " << (b.ran ? "true" : "false")
     << ",\n    \"note\": " << (b.note.empty() ? "null" : jsonString(b.note))
     << ",\n    \"values_not_compared\": " << b.valuesNotCompared << ",\n    \"first_divergence\": "
     << (b.firstDivergence >= 0 ? jsonLayer(b.layers[b.firstDivergence], b.firstDivergence)
                                : "null")
     << ",\n    \"layers\": [";
  for (size_t i = 0; i < b.layers.size(); ++i)
    os << (i ? ",\n      " : "\n      ") << jsonLayer(b.layers[i], i);
  os << "\n    ]\n  }\n}\n";
  return os.str();
}

std::string toHtml(const VerifyResult &r) {
  std::ostringstream os;
  os << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>kiln verify: "
     << html(r.model) << "</title>\n<style>\n"
     << "body{font-family:sans-serif;margin:24px;color:#222;background:#fafafa}\n"
     << "h1{font-size:20px} h2{font-size:16px;margin-top:28px}\n"
     << "table{border-collapse:collapse;font-size:12px;background:#fff}\n"
     << "td,th{border:1px solid #ccc;padding:3px 7px;text-align:right;white-space:nowrap}\n"
     << "td.l,th.l{text-align:left} tr.first td{background:#fde2e2}\n"
     << ".pass{color:#1b7f3b;font-weight:bold} .fail{color:#c62828;font-weight:bold}\n"
     << ".verdict{font-size:18px;padding:8px "
        "12px;display:inline-block;border-radius:4px;color:#fff}\n"
     << "</style></head><body>\n<h1>kiln verify: " << html(r.model) << "</h1>\n"
     << "<p>target <b>" << html(r.target) << "</b>, reference <b>" << html(r.reference)
     << "</b>, seed " << r.seed << " &mdash; <span class=\"verdict\" style=\"background:"
     << (r.pass ? "#1b7f3b\">PASS" : "#c62828\">FAIL") << "</span></p>\n";
  const BisectResult &b = r.bisect;
  os << "<h2>Relative L2 error by layer</h2>\n";
  if (b.ran) {
    os << svgCurve(b);
    if (b.firstDivergence >= 0) {
      const Layer &l = b.layers[b.firstDivergence];
      os << "<p>First divergence: node <b>" << html(l.node) << "</b> (" << html(l.op) << ")"
         << html(sourcesText(l)) << " &rarr; value <code>" << html(l.value.name)
         << "</code>, rel L2 " << sci(l.value.metrics.relL2) << ", its inputs agree.</p>\n";
    }
  } else {
    os << "<p>"
       << html(b.note.empty() ? "per-layer comparison not run (use --bisect or --all-layers)"
                              : b.note)
       << "</p>\n";
  }
  os << "<h2>Outputs</h2>\n<table><tr><th class=\"l\">output</th>" << kValueHeader << "</tr>\n";
  for (const ValueResult &v : r.outputs)
    os << "<tr><td class=\"l\">" << html(v.name) << "</td>" << valueCells(v) << "</tr>\n";
  os << "</table>\n";
  if (b.ran) {
    os << "<h2>Layers</h2>\n<table><tr><th>#</th><th class=\"l\">node</th><th class=\"l\">op</th>"
       << "<th class=\"l\">value</th>" << kValueHeader << "</tr>\n";
    for (size_t i = 0; i < b.layers.size(); ++i) {
      const Layer &l = b.layers[i];
      os << "<tr" << (static_cast<int>(i) == b.firstDivergence ? " class=\"first\"" : "") << "><td>"
         << i << "</td><td class=\"l\">" << html(l.node) << html(sourcesText(l))
         << "</td><td class=\"l\">" << html(l.op) << "</td><td class=\"l\">" << html(l.value.name)
         << "</td>" << valueCells(l.value) << "</tr>\n";
    }
    os << "</table>\n";
  }
  os << "</body></html>\n";
  return os.str();
}

} // namespace kiln::verify
