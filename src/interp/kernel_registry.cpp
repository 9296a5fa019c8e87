#include "interp/kernel.h"
#include "interp/kernels/families.h"

namespace kiln {

const KernelTable &kernelTable() {
  static const KernelTable table = [] {
    KernelTable t;
    registerElementwiseKernels(t);
    registerUnaryKernels(t);
    registerBinaryKernels(t);
    registerCastKernels(t);
    registerReduceKernels(t);
    registerSoftmaxKernels(t);
    registerConvKernels(t);
    registerPoolKernels(t);
    registerNormKernels(t);
    registerMatmulKernels(t);
    registerQuantKernels(t);
    registerRnnKernels(t);
    registerDetectionKernels(t);
    registerSamplingKernels(t);
    registerResizeKernels(t);
    registerShapeKernels(t);
    registerSlicePadKernels(t);
    registerGatherScatterKernels(t);
    registerIndexKernels(t);
    registerUniqueKernels(t);
    registerControlFlowKernels(t);
    registerSequenceKernels(t);
    registerSignalKernels(t);
    registerTextKernels(t);
    return t;
  }();
  return table;
}

} // namespace kiln
