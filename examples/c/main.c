/* kiln_example: runs a compiled .kiln artifact on .npy inputs through the
 * kiln runtime's C API, prints each output, and optionally writes it.
 *
 *   kiln_example MODEL.kiln INPUT.npy... [OUTPUT_DIR]
 *
 * The .npy files feed the model's inputs in order (`kiln inspect MODEL.kiln`
 * lists them). A last argument not ending in .npy is a directory where each
 * output is written as <name>.npy (bytes outside [A-Za-z0-9._-] become '_',
 * as with `kiln run --output-dir`). KILN_THREADS sets the session's threads
 * (default 0: the physical cores). Errors exit with status 1 without
 * freeing: the process ends anyway. */
#define _POSIX_C_SOURCE 200809L
#include "kiln/kiln.h"
#include "npy.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int fail(const char *what) {
  fprintf(stderr, "kiln_example: %s: %s\n", what, kiln_last_error());
  return 1;
}

static void print_output(const char *name, const kiln_tensor *t) {
  size_t n = 1, i;
  int d;
  printf("%s [", name);
  for (d = 0; d < t->rank; ++d) {
    printf(d ? ",%lld" : "%lld", (long long)t->shape[d]);
    n *= (size_t)t->shape[d];
  }
  printf("]");
  for (i = 0; i < n && i < 5; ++i) {
    if (t->dtype == KILN_F32) printf(" %g", ((const float *)t->data)[i]);
    if (t->dtype == KILN_I64) printf(" %lld", (long long)((const int64_t *)t->data)[i]);
  }
  printf(n > 5 ? " ...\n" : "\n");
}

int main(int argc, char **argv) {
  kiln_model *model;
  kiln_session *session;
  kiln_session_options options = {0};
  kiln_tensor *inputs, *outputs;
  const char *out_dir = NULL;
  size_t num_inputs = (size_t)(argc - 2), num_outputs, i;
  if (argc < 3) {
    fprintf(stderr, "usage: kiln_example MODEL.kiln INPUT.npy... [OUTPUT_DIR]\n");
    return 2;
  }
  if (strlen(argv[argc - 1]) < 4 || strcmp(argv[argc - 1] + strlen(argv[argc - 1]) - 4, ".npy")) {
    out_dir = argv[--argc];
    --num_inputs;
  }
  if (kiln_model_load_file(argv[1], &model) != KILN_OK) return fail(argv[1]);
  if (num_inputs != kiln_model_num_inputs(model)) {
    fprintf(stderr, "kiln_example: the model has %zu inputs, got %zu .npy files\n",
            kiln_model_num_inputs(model), num_inputs);
    return 1;
  }
  inputs = calloc(num_inputs, sizeof *inputs);
  for (i = 0; i < num_inputs; ++i)
    if (npy_read(argv[2 + i], &inputs[i]) != 0) return 1;

  if (getenv("KILN_THREADS")) options.threads = atoi(getenv("KILN_THREADS"));
  if (kiln_session_create(model, &options, &session) != KILN_OK) return fail("session");
  num_outputs = kiln_model_num_outputs(model);
  outputs = calloc(num_outputs, sizeof *outputs); /* data NULL: the session allocates */
  if (kiln_session_run(session, inputs, num_inputs, outputs, num_outputs) != KILN_OK)
    return fail("run");

  if (out_dir) mkdir(out_dir, 0777); /* it may exist already */
  for (i = 0; i < num_outputs; ++i) {
    kiln_value_info info;
    char path[4096], *c;
    kiln_model_output(model, i, &info);
    print_output(info.name, &outputs[i]);
    if (!out_dir) continue;
    snprintf(path, sizeof path, "%s/%s.npy", out_dir, info.name);
    for (c = path + strlen(out_dir) + 1; c < path + strlen(path) - 4; ++c)
      if (!isalnum((unsigned char)*c) && *c != '.' && *c != '_' && *c != '-') *c = '_';
    if (npy_write(path, &outputs[i]) != 0) return 1;
  }

  for (i = 0; i < num_inputs; ++i) free(inputs[i].data);
  free(inputs);
  free(outputs); /* their data belongs to the session */
  kiln_session_free(session);
  kiln_model_free(model);
  return 0;
}
