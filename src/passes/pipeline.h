// The optimization levels of the graph compiler as pass pipelines: what
// `kiln opt -O2` and the compile flow run. Each level is a list of pass
// names, so every step can be printed (--print-after) and dumped
// (--dump-dir) like any hand-written --passes list.
#pragma once

#include <string>
#include <vector>

namespace kiln {

// The passes of -O<level>, in order; levels above the highest known one get
// the highest one's list, levels below 0 nothing.
std::vector<std::string> pipelineForLevel(int level);

} // namespace kiln
