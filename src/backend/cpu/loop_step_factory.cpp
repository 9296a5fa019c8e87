// The compiler's side of the loop steps (runtime/cpu/loop_steps.h): reads a
// Loop, Scan or SequenceMap node's attributes and its body's declared scan
// output types into the step, around the body program the compiler built.
#include "ir/graph.h"
#include "runtime/cpu/loop_steps.h"

#include <algorithm>

namespace kiln::cpu {

namespace {

ScanOutputType scanOutputType(const Value &bodyOutput) {
  ScanOutputType t;
  const Type &type = bodyOutput.type();
  if (!type.isTensor()) return t;
  t.dtype = type.dtype();
  if (type.shape().rankKnown) t.rank = type.shape().rank();
  if (auto dims = type.shape().staticDims()) {
    t.staticDims = true;
    t.dims = *dims;
  }
  return t;
}

// Scan's per-input (or per-output) attribute: `count` entries, zeros when
// absent.
Expected<std::vector<int64_t>> perScan(const Node &node, const char *name, int64_t count) {
  std::vector<int64_t> v = node.getInts(name);
  if (v.empty()) return std::vector<int64_t>(std::max<int64_t>(count, 0), 0);
  if (static_cast<int64_t>(v.size()) != count)
    return makeError(node.describe(), ": ", name, " has ", v.size(), " entries, expected ", count);
  return v;
}

} // namespace

Expected<std::unique_ptr<BodyStep>> BodyStep::create(const Node &node, std::vector<int> in,
                                                     std::vector<int> out,
                                                     std::unique_ptr<Program> body) {
  const Graph *region = node.getGraph("body");
  const auto &bodyOutputs = region->outputs();
  std::unique_ptr<BodyStep> step;
  const std::string label = "loop " + node.describe();
  if (node.op() == OpKind::Loop) {
    const int64_t numCarried = std::max<int64_t>(0, static_cast<int64_t>(in.size()) - 2);
    std::vector<ScanOutputType> scanTypes;
    for (size_t k = 1 + numCarried; k < bodyOutputs.size(); ++k)
      scanTypes.push_back(scanOutputType(*bodyOutputs[k]));
    step = std::make_unique<LoopStep>(label, std::move(in), std::move(out), std::move(scanTypes));
  } else if (node.op() == OpKind::Scan) {
    ScanStep::Axes axes;
    axes.numScanInputs = node.getInt("num_scan_inputs");
    const int64_t numState = static_cast<int64_t>(in.size()) - axes.numScanInputs;
    const int64_t numScanOut = static_cast<int64_t>(out.size()) - numState;
    KILN_ASSIGN_OR_RETURN(axes.inAxes, perScan(node, "scan_input_axes", axes.numScanInputs));
    KILN_ASSIGN_OR_RETURN(axes.inReverse,
                          perScan(node, "scan_input_directions", axes.numScanInputs));
    KILN_ASSIGN_OR_RETURN(axes.outAxes, perScan(node, "scan_output_axes", numScanOut));
    KILN_ASSIGN_OR_RETURN(axes.outReverse, perScan(node, "scan_output_directions", numScanOut));
    std::vector<ScanOutputType> scanTypes;
    for (size_t k = std::max<int64_t>(numState, 0); k < bodyOutputs.size(); ++k)
      scanTypes.push_back(scanOutputType(*bodyOutputs[k]));
    step = std::make_unique<ScanStep>(label, std::move(in), std::move(out), std::move(axes),
                                      std::move(scanTypes));
  } else if (node.op() == OpKind::SequenceMap) {
    step = std::make_unique<SequenceMapStep>(label, std::move(in), std::move(out));
  } else {
    return makeError(node.describe(), ": not a loop");
  }
  step->setBody(std::move(body));
  KILN_RETURN_IF_ERROR(step->prepare());
  return step;
}

} // namespace kiln::cpu
