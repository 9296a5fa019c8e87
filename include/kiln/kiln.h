/* kiln runtime C API: load a compiled `.kiln` artifact, run it. Tensors in,
 * tensors out.
 *
 *   kiln_model *model;
 *   if (kiln_model_load_file("yolov8n.kiln", &model) != KILN_OK)
 *     fprintf(stderr, "%s\n", kiln_last_error());
 *   kiln_session *session;
 *   kiln_session_create(model, NULL, &session);
 *   kiln_tensor in = {KILN_F32, 4, {1, 3, 640, 640}, pixels, sizeof pixels};
 *   kiln_tensor out = {0};               // data NULL: the session allocates
 *   kiln_session_run(session, &in, 1, &out, 1);
 *   ... out.data, out.shape ...
 *   kiln_session_free(session);
 *   kiln_model_free(model);
 *
 * Errors: every function that can fail returns a kiln_status; on failure the
 * calling thread's kiln_last_error() says what and where ("input 'images':
 * shape [1,3,640] has rank 3, the model expects rank 4").
 *
 * Threads: a kiln_model is immutable once loaded and may be shared by any
 * number of threads and sessions. A kiln_session holds the scratch memory of
 * one inference and its thread pool: one kiln_session_run at a time per
 * session; different sessions (of one model or several) may run
 * concurrently from different threads. kiln_last_error() is per thread.
 *
 * The runtime links only libc, libstdc++, libm and pthreads: no compiler is
 * needed at run time (the artifact carries native code, see docs/artifact.md).
 */
#ifndef KILN_KILN_H
#define KILN_KILN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_MAX_RANK 8

typedef enum kiln_status {
  KILN_OK = 0,
  KILN_ERROR_INVALID_ARGUMENT = 1, /* null pointer, bad count, unknown name */
  KILN_ERROR_IO = 2,               /* the file cannot be opened or read */
  KILN_ERROR_CORRUPT = 3,          /* not an artifact, truncated, bad checksum or contents */
  KILN_ERROR_VERSION = 4,          /* written by a newer or older, incompatible format */
  KILN_ERROR_UNSUPPORTED_CPU = 5,  /* compiled for CPU features this machine lacks */
  KILN_ERROR_SHAPE = 6,            /* an input's dtype or shape does not fit the model */
  KILN_ERROR_OUTPUT_TOO_SMALL = 7, /* a caller-provided output buffer is too small */
  KILN_ERROR_RUNTIME = 8,          /* a kernel failed (the message names the node) */
  KILN_ERROR_OUT_OF_MEMORY = 9,
  KILN_ERROR_UNSUPPORTED_VALUE = 10 /* an input or output is a string tensor, a sequence or an
                                       optional, which this API cannot carry (see below) */
} kiln_status;

/* Element types; the values are stable (they are stored in artifacts). */
typedef enum kiln_dtype {
  KILN_UNDEFINED = 0,
  KILN_F32 = 1,
  KILN_U8 = 2,
  KILN_I8 = 3,
  KILN_U16 = 4,
  KILN_I16 = 5,
  KILN_I32 = 6,
  KILN_I64 = 7,
  KILN_STRING = 8, /* only in kiln_value_info: strings cannot be passed (see below) */
  KILN_BOOL = 9,
  KILN_F16 = 10,
  KILN_F64 = 11,
  KILN_U32 = 12,
  KILN_U64 = 13,
  KILN_BF16 = 16
} kiln_dtype;

/* A dense, row-major tensor. The caller owns `data` unless the session
 * filled it in (see kiln_session_run). `bytes` is the capacity of `data`. */
typedef struct kiln_tensor {
  kiln_dtype dtype;
  int32_t rank;
  int64_t shape[KILN_MAX_RANK];
  void *data;
  size_t bytes;
} kiln_tensor;

/* What an input or output is. Models may take and give sequences of tensors
 * and optionals (an optional holds a tensor or a sequence, or nothing). */
typedef enum kiln_value_kind {
  KILN_KIND_TENSOR = 0,
  KILN_KIND_SEQUENCE = 1, /* dtype, rank and shape describe its tensors */
  KILN_KIND_OPTIONAL = 2  /* dtype, rank and shape describe the tensor(s) inside */
} kiln_value_kind;

/* What the model declares for an input or output. Symbolic dims are -1 in
 * `shape` and named in `dim_names` (NULL for fixed dims); rank is -1 when
 * unknown. Strings belong to the model and live as long as it.
 *
 * This API carries dense tensors of numbers and bools only. A model whose
 * inputs or outputs include a string tensor (dtype KILN_STRING), a sequence
 * or an optional (kind) still loads and describes itself here, but
 * kiln_session_run refuses it with KILN_ERROR_UNSUPPORTED_VALUE and a
 * message naming the input or output and its type ("input 'x' is
 * seq<f32[N]>"). Such models run through the C++ runtime (rt::Session,
 * which takes and gives sequences, optionals and strings) and `kiln run`. */
typedef struct kiln_value_info {
  const char *name;
  kiln_dtype dtype;
  int32_t rank;
  int64_t shape[KILN_MAX_RANK];
  const char *dim_names[KILN_MAX_RANK];
  kiln_value_kind kind;
} kiln_value_info;

typedef struct kiln_model kiln_model;
typedef struct kiln_session kiln_session;

typedef struct kiln_session_options {
  int32_t threads; /* threads of the session's pool, the caller's included; 0: physical cores */
} kiln_session_options;

/* The message of the last failed call on this thread ("" when none). The
 * string is valid until the next failing call on this thread. */
const char *kiln_last_error(void);

/* "kiln 0.4.0 (artifact format 1)". Static storage. */
const char *kiln_version(void);

/* Loads an artifact from a file, mapping it with mmap (weights are used in
 * place, never copied). On success *model must be freed with kiln_model_free. */
kiln_status kiln_model_load_file(const char *path, kiln_model **model);

/* Loads an artifact from memory. The runtime copies the bytes, so `data`
 * may be freed after the call. */
kiln_status kiln_model_load_memory(const void *data, size_t size, kiln_model **model);

/* Frees a model. Every session of the model must have been freed first.
 * NULL is ignored. */
void kiln_model_free(kiln_model *model);

size_t kiln_model_num_inputs(const kiln_model *model);
size_t kiln_model_num_outputs(const kiln_model *model);
/* Describes input (or output) `index`; KILN_ERROR_INVALID_ARGUMENT when the
 * index is out of range. */
kiln_status kiln_model_input(const kiln_model *model, size_t index, kiln_value_info *info);
kiln_status kiln_model_output(const kiln_model *model, size_t index, kiln_value_info *info);
/* Index of the input (or output) called `name`, or -1. */
int64_t kiln_model_input_index(const kiln_model *model, const char *name);
int64_t kiln_model_output_index(const kiln_model *model, const char *name);

/* Creates a session (its own scratch memory and thread pool). `options` may
 * be NULL. The model must outlive the session. */
kiln_status kiln_session_create(kiln_model *model, const kiln_session_options *options,
                                kiln_session **session);
/* NULL is ignored. */
void kiln_session_free(kiln_session *session);

/* Runs one inference. `inputs` holds every model input, in model order
 * (kiln_model_input). For each of the `num_outputs` (= kiln_model_num_outputs)
 * outputs:
 *   - data != NULL: the caller's buffer of `bytes` capacity; the result is
 *     copied into it (KILN_ERROR_OUTPUT_TOO_SMALL when it does not fit, the
 *     needed shape and size are still filled in);
 *   - data == NULL: the session points `data` at memory it owns, valid until
 *     the next kiln_session_run on this session or kiln_session_free.
 * dtype, rank and shape are set by the call. Inputs are only read.
 * KILN_ERROR_UNSUPPORTED_VALUE, before anything runs, when the model takes
 * or gives a value this API cannot carry (see kiln_value_info). */
kiln_status kiln_session_run(kiln_session *session, const kiln_tensor *inputs,
                             size_t num_inputs, kiln_tensor *outputs, size_t num_outputs);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KILN_KILN_H */
