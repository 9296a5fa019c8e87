/* Minimal .npy reading and writing for the example: format 1.0, C order,
 * little-endian; the dtypes kiln tensors have (bfloat16 aside). */
#ifndef KILN_EXAMPLE_NPY_H
#define KILN_EXAMPLE_NPY_H

#include "kiln/kiln.h"

/* Reads `path` into *t; t->data is malloc'ed (the caller frees it). Returns
 * 0, or -1 after printing why to stderr. */
int npy_read(const char *path, kiln_tensor *t);

/* Writes the tensor (dtype, rank, shape, data) to `path`. Returns 0 or -1. */
int npy_write(const char *path, const kiln_tensor *t);

#endif
