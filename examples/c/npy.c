/* .npy 1.0: "\x93NUMPY" 1 0, a 2-byte header length, a Python-dict header
 * ("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3), }" padded with
 * spaces to a multiple of 64 bytes, ending in '\n'), then the raw data. */
#include "npy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
  const char *descr;
  kiln_dtype dtype;
  size_t size;
} kTypes[] = {{"<f4", KILN_F32, 4}, {"<f8", KILN_F64, 8}, {"<f2", KILN_F16, 2},
              {"|i1", KILN_I8, 1},  {"<i2", KILN_I16, 2}, {"<i4", KILN_I32, 4},
              {"<i8", KILN_I64, 8}, {"|u1", KILN_U8, 1},  {"<u2", KILN_U16, 2},
              {"<u4", KILN_U32, 4}, {"<u8", KILN_U64, 8}, {"|b1", KILN_BOOL, 1}};
enum { kNumTypes = sizeof kTypes / sizeof kTypes[0] };

static int error(FILE *f, const char *path, const char *what) {
  fprintf(stderr, "%s: %s\n", path, what);
  if (f) fclose(f);
  return -1;
}

int npy_read(const char *path, kiln_tensor *t) {
  unsigned char pre[10];
  char header[4096], *p, *end;
  size_t len, size = 0, n = 1;
  int i;
  FILE *f = fopen(path, "rb");
  if (!f) return error(f, path, "cannot open");
  if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY\x01\x00", 8) != 0)
    return error(f, path, "not a .npy file of format 1.0");
  len = pre[8] | (size_t)pre[9] << 8;
  if (len >= sizeof header || fread(header, 1, len, f) != len) return error(f, path, "bad header");
  header[len] = '\0';
  memset(t, 0, sizeof *t);
  p = strstr(header, "'descr': '");
  for (i = 0; p && i < kNumTypes; ++i)
    if (strncmp(p + 10, kTypes[i].descr, 3) == 0 && p[13] == '\'') {
      t->dtype = kTypes[i].dtype;
      size = kTypes[i].size;
    }
  if (!size) return error(f, path, "unsupported dtype (little-endian numbers and bool only)");
  if (!strstr(header, "'fortran_order': False")) return error(f, path, "not in C order");
  if (!(p = strstr(header, "'shape': ("))) return error(f, path, "no shape in the header");
  for (p += 10; *p != ')'; p = end) {
    long long d = strtoll(p, &end, 10);
    if (end == p || d < 0 || t->rank == KILN_MAX_RANK) return error(f, path, "bad shape");
    t->shape[t->rank++] = d;
    n *= (size_t)d;
    while (*end == ',' || *end == ' ') ++end;
  }
  t->bytes = n * size;
  t->data = malloc(t->bytes ? t->bytes : 1);
  if (!t->data || fread(t->data, 1, t->bytes, f) != t->bytes) {
    free(t->data);
    t->data = NULL;
    return error(f, path, "truncated data");
  }
  fclose(f);
  return 0;
}

int npy_write(const char *path, const kiln_tensor *t) {
  char header[512];
  unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0, 0};
  const char *descr = NULL;
  size_t n = 1, size = 0, len;
  int i;
  FILE *f;
  for (i = 0; i < kNumTypes; ++i)
    if (kTypes[i].dtype == t->dtype) descr = kTypes[i].descr, size = kTypes[i].size;
  if (!descr) return error(NULL, path, "dtype has no .npy equivalent");
  len = (size_t)snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                         descr);
  for (i = 0; i < t->rank; ++i) {
    len += (size_t)snprintf(header + len, sizeof header - len, i ? ", %lld" : "%lld",
                            (long long)t->shape[i]);
    n *= (size_t)t->shape[i];
  }
  len += (size_t)snprintf(header + len, sizeof header - len, t->rank == 1 ? ",), }" : "), }");
  while ((10 + len + 1) % 64) header[len++] = ' ';
  header[len++] = '\n';
  pre[8] = (unsigned char)(len & 0xff);
  pre[9] = (unsigned char)(len >> 8);
  if (!(f = fopen(path, "wb"))) return error(NULL, path, "cannot create");
  if (fwrite(pre, 1, 10, f) != 10 || fwrite(header, 1, len, f) != len ||
      fwrite(t->data, 1, n * size, f) != n * size)
    return error(f, path, "cannot write");
  return fclose(f) == 0 ? 0 : error(NULL, path, "cannot write");
}
