/* data.c — the synthetic token stream and the shard reader/writer
 * (train/data.h).  The reader opens only a regular file (a FIFO would wait
 * for a writer forever) and uses pread of exactly the tokens asked for. */
#include "train/data.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plateau/file.h"
#include "plateau/host_device.h"

struct pl_data {
  int64_t V;
  uint64_t seed;
  int fd; /* -1: synthetic */
  int width;
  int64_t count;
  bool scanned; /* max_token known (pl_data_check) */
  uint64_t max_token;
  char path[256];
};

pl_status pl_data_synthetic(int64_t V, uint64_t seed, pl_data **out) {
  *out = NULL;
  if (V < 1 || V > INT32_MAX)
    return pl_set_error(PL_EINVAL, "data: V=%lld", (long long)V);
  pl_data *d = calloc(1, sizeof *d);
  if (!d)
    return pl_set_error(PL_ENOMEM, "data: host");
  d->V = V, d->seed = seed, d->fd = -1, d->count = INT64_MAX;
  snprintf(d->path, sizeof d->path, "synthetic:%llu", (unsigned long long)seed);
  *out = d;
  return PL_OK;
}

static uint64_t le(const unsigned char *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

pl_status pl_data_open(const char *path, int64_t V, pl_data **out) {
  *out = NULL;
  if (V < 1 || V > INT32_MAX)
    return pl_set_error(PL_EINVAL, "data: V=%lld", (long long)V);
  int fd;
  pl_status ost = pl_open_regular(path, &fd); /* a FIFO would block */
  if (ost != PL_OK) {
    return pl_error_prefix(ost, "data: ");
  }
  unsigned char h[PL_DATA_HEADER_BYTES];
  struct stat sb;
  pl_status st = PL_OK;
  if (pread(fd, h, sizeof h, 0) != (ssize_t)sizeof h || fstat(fd, &sb) != 0)
    st = pl_set_error(PL_EINVAL, "data: %s: shorter than the %d-byte header",
                      path, PL_DATA_HEADER_BYTES);
  const int width = st == PL_OK ? (int)le(h + 12, 4) : 0;
  const uint64_t count = st == PL_OK ? le(h + 16, 8) : 0;
  if (st == PL_OK && memcmp(h, PL_DATA_MAGIC, 8) != 0)
    st =
        pl_set_error(PL_EINVAL, "data: %s: not a token shard (magic is not %s)",
                     path, PL_DATA_MAGIC);
  else if (st == PL_OK && le(h + 8, 4) != PL_DATA_VERSION)
    st =
        pl_set_error(PL_EINVAL, "data: %s: version %llu (this reader knows %d)",
                     path, (unsigned long long)le(h + 8, 4), PL_DATA_VERSION);
  else if (st == PL_OK && width != 2 && width != 4)
    st =
        pl_set_error(PL_EINVAL, "data: %s: token width %d bytes (allowed 2, 4)",
                     path, width);
  else if (st == PL_OK && (count > (uint64_t)INT64_MAX / 4 ||
                           (uint64_t)sb.st_size !=
                               PL_DATA_HEADER_BYTES + count * (uint64_t)width))
    st = pl_set_error(
        PL_EINVAL,
        "data: %s: %lld bytes, but the header says %llu tokens of %d "
        "bytes",
        path, (long long)sb.st_size, (unsigned long long)count, width);
  pl_data *d = st == PL_OK ? calloc(1, sizeof *d) : NULL;
  if (st == PL_OK && !d)
    st = pl_set_error(PL_ENOMEM, "data: host");
  if (st != PL_OK) {
    close(fd);
    return st;
  }
  d->V = V, d->fd = fd, d->width = width, d->count = (int64_t)count;
  snprintf(d->path, sizeof d->path, "%s", path);
  *out = d;
  return PL_OK;
}

void pl_data_close(pl_data *d) {
  if (!d)
    return;
  if (d->fd >= 0)
    close(d->fd);
  free(d);
}

int64_t pl_data_count(const pl_data *d) {
  return d->count;
}

/* Visit the shard's tokens in pieces: fn(arg, first token index, values,
 * n) until it returns nonzero (that value is returned) or the end (0); a
 * read error: -1 with the status set. */
static int each_token(const pl_data *d,
                      int (*fn)(void *, int64_t, const unsigned char *, int64_t,
                                int),
                      void *arg) {
  enum { PIECE = 1 << 20 };
  unsigned char *buf = malloc(PIECE);
  if (!buf) {
    pl_set_error(PL_ENOMEM, "data: host");
    return -1;
  }
  const int64_t per = PIECE / d->width;
  int rc = 0;
  for (int64_t at = 0; at < d->count && rc == 0; at += per) {
    const int64_t n = d->count - at < per ? d->count - at : per;
    const size_t want = (size_t)n * (size_t)d->width;
    size_t got = 0;
    while (got < want) {
      ssize_t r = pread(d->fd, buf + got, want - got,
                        (off_t)PL_DATA_HEADER_BYTES + (off_t)at * d->width +
                            (off_t)got);
      if (r <= 0) {
        pl_set_error(PL_EIO, "data: %s: read at token %lld: %s", d->path,
                     (long long)at, r < 0 ? strerror(errno) : "end of file");
        free(buf);
        return -1;
      }
      got += (size_t)r;
    }
    rc = fn(arg, at, buf, n, d->width);
  }
  free(buf);
  return rc;
}

static int piece_max(void *arg, int64_t at, const unsigned char *b, int64_t n,
                     int w) {
  uint64_t *mx = arg;
  (void)at;
  for (int64_t i = 0; i < n; i++) {
    const uint64_t v = le(b + i * w, w);
    if (v > *mx)
      *mx = v;
  }
  return 0;
}

typedef struct first_at {
  uint64_t V, value;
  int64_t pos;
} first_at;

static int piece_first(void *arg, int64_t at, const unsigned char *b, int64_t n,
                       int w) {
  first_at *f = arg;
  for (int64_t i = 0; i < n; i++) {
    const uint64_t v = le(b + i * w, w);
    if (v >= f->V) {
      f->pos = at + i, f->value = v;
      return 1;
    }
  }
  return 0;
}

pl_status pl_data_check(pl_data *d, int64_t S, int64_t V) {
  if (d->fd < 0)
    return PL_OK;
  if (d->count == 0)
    return pl_set_error(PL_EINVAL,
                        "data: %s: 0 tokens (an empty shard; allowed: at "
                        "least S+1 = %lld)",
                        d->path, (long long)(S + 1));
  if (d->count < S + 1)
    return pl_set_error(PL_EINVAL,
                        "data: %s: %lld tokens, fewer than one window of "
                        "S+1 = %lld (allowed: a shard of at least S+1 tokens)",
                        d->path, (long long)d->count, (long long)(S + 1));
  if (!d->scanned) {
    d->max_token = 0;
    if (each_token(d, piece_max, &d->max_token) < 0)
      return PL_EIO;
    d->scanned = true;
  }
  if (d->max_token < (uint64_t)V)
    return PL_OK;
  first_at f = {(uint64_t)V, 0, -1};
  if (each_token(d, piece_first, &f) < 0)
    return PL_EIO;
  return pl_set_error(PL_EINVAL,
                      "data: %s: token %lld is %llu: outside the vocabulary "
                      "[0, %lld) (the shard's largest token is %llu)",
                      d->path, (long long)f.pos, (unsigned long long)f.value,
                      (long long)V, (unsigned long long)d->max_token);
}

static int32_t synth(const pl_data *d, uint64_t g) {
  const uint64_t run = g / 8, j = g % 8;
  const uint64_t a = pl_rng_u32(d->seed, run),
                 step = 1 + pl_rng_u32(d->seed + 1, run) % 3;
  return (int32_t)((a + j * step) % (uint64_t)d->V);
}

pl_status pl_data_read(pl_data *d, int64_t q, int64_t S, int64_t off, int64_t n,
                       int32_t *out) {
  if (q < 0 || S < 1 || off < 0 || n < 0 || off + n > S + 1)
    return pl_set_error(
        PL_EINVAL,
        "data: window %lld of S=%lld, tokens [%lld, %lld): outside "
        "[0, S+1)",
        (long long)q, (long long)S, (long long)off, (long long)(off + n));
  if (d->fd < 0) {
    for (int64_t i = 0; i < n; i++)
      out[i] = synth(d, (uint64_t)q * (uint64_t)S + (uint64_t)(off + i));
    return PL_OK;
  }
  const int64_t nwin = (d->count - 1) / S;
  if (nwin < 1)
    return pl_set_error(PL_EINVAL,
                        "data: %s: %lld tokens hold no window of S+1=%lld",
                        d->path, (long long)d->count, (long long)(S + 1));
  const int64_t first = (q % nwin) * S + off;
  unsigned char *buf = malloc((size_t)n * (size_t)d->width + 1);
  if (!buf)
    return pl_set_error(PL_ENOMEM, "data: host");
  size_t want = (size_t)n * (size_t)d->width, got = 0;
  const off_t base = (off_t)PL_DATA_HEADER_BYTES + (off_t)first * d->width;
  while (got < want) {
    ssize_t r = pread(d->fd, buf + got, want - got, base + (off_t)got);
    if (r <= 0) {
      free(buf);
      return pl_set_error(PL_EIO, "data: %s: read at token %lld: %s", d->path,
                          (long long)first,
                          r < 0 ? strerror(errno) : "end of file");
    }
    got += (size_t)r;
  }
  pl_status st = PL_OK;
  for (int64_t i = 0; i < n; i++) {
    const uint64_t v = le(buf + (size_t)i * (size_t)d->width, d->width);
    if (v >= (uint64_t)d->V) {
      st = pl_set_error(
          PL_EINVAL,
          "data: %s: token %lld is %llu: outside the vocabulary [0, %lld)",
          d->path, (long long)(first + i), (unsigned long long)v,
          (long long)d->V);
      break;
    }
    out[i] = (int32_t)v;
  }
  free(buf);
  return st;
}

pl_status pl_data_batch(pl_data *d, const pl_layout_plan *p, int micro,
                        int64_t st, int32_t *out) {
  const int64_t N = p->N;
  for (int mi = 0; mi < micro; mi++) {
    const int64_t q = (st * micro + mi) * p->n_groups + p->d_group;
    PL_TRY(pl_data_read(d, q, p->S, (int64_t)p->d_rank * N, N + 1,
                        out + (int64_t)mi * (N + 1)));
  }
  return PL_OK;
}

struct pl_data_writer {
  FILE *f;
  int width;
  int64_t count;
  pl_status st;
  char path[256];
};

static void header(unsigned char *h, int width, uint64_t count) {
  memcpy(h, PL_DATA_MAGIC, 8);
  for (int i = 0; i < 4; i++)
    h[8 + i] = (unsigned char)((uint32_t)PL_DATA_VERSION >> (8 * i));
  for (int i = 0; i < 4; i++)
    h[12 + i] = (unsigned char)((uint32_t)width >> (8 * i));
  for (int i = 0; i < 8; i++)
    h[16 + i] = (unsigned char)(count >> (8 * i));
}

pl_status pl_data_writer_open(const char *path, int width,
                              pl_data_writer **out) {
  *out = NULL;
  if (width != 2 && width != 4)
    return pl_set_error(PL_EINVAL, "data: token width %d (allowed 2, 4)",
                        width);
  pl_data_writer *w = calloc(1, sizeof *w);
  if (!w)
    return pl_set_error(PL_ENOMEM, "data: host");
  w->width = width;
  snprintf(w->path, sizeof w->path, "%s", path);
  w->f = fopen(path, "wb");
  if (!w->f) {
    free(w);
    return pl_set_error(PL_EIO, "data: %s: %s", path, strerror(errno));
  }
  unsigned char h[PL_DATA_HEADER_BYTES];
  header(h, width, 0);
  if (fwrite(h, 1, sizeof h, w->f) != sizeof h)
    w->st = pl_set_error(PL_EIO, "data: %s: write failed: %s", path,
                         strerror(errno));
  *out = w;
  return w->st;
}

pl_status pl_data_writer_put(pl_data_writer *w, const uint32_t *tokens,
                             int64_t n) {
  if (w->st != PL_OK)
    return w->st;
  unsigned char buf[4096];
  for (int64_t i = 0; i < n;) {
    size_t k = 0;
    for (; k + (size_t)w->width <= sizeof buf && i < n; i++) {
      if (w->width == 2 && tokens[i] > 0xffff)
        return w->st = pl_set_error(
                   PL_EINVAL, "data: token %lld is %u: does not fit 16 bits",
                   (long long)(w->count + i), tokens[i]);
      for (int b = 0; b < w->width; b++)
        buf[k++] = (unsigned char)(tokens[i] >> (8 * b));
    }
    if (fwrite(buf, 1, k, w->f) != k)
      return w->st = pl_set_error(PL_EIO, "data: %s: write failed: %s", w->path,
                                  strerror(errno));
  }
  w->count += n;
  return PL_OK;
}

pl_status pl_data_writer_close(pl_data_writer *w) {
  if (!w)
    return PL_OK;
  pl_status st = w->st;
  unsigned char h[PL_DATA_HEADER_BYTES];
  header(h, w->width, (uint64_t)w->count);
  if (st == PL_OK && (fseek(w->f, 0, SEEK_SET) != 0 ||
                      fwrite(h, 1, sizeof h, w->f) != sizeof h))
    st = pl_set_error(PL_EIO, "data: %s: header write failed: %s", w->path,
                      strerror(errno));
  if (fclose(w->f) != 0 && st == PL_OK)
    st = pl_set_error(PL_EIO, "data: %s: close failed: %s", w->path,
                      strerror(errno));
  free(w);
  return st;
}

pl_status pl_data_write(const char *path, int width, const uint32_t *tokens,
                        int64_t count) {
  if (count < 0)
    return pl_set_error(PL_EINVAL, "data: count %lld", (long long)count);
  for (int64_t i = 0; width == 2 && i < count;
       i++) /* refuse before creating the file */
    if (tokens[i] > 0xffff)
      return pl_set_error(PL_EINVAL,
                          "data: token %lld is %u: does not fit 16 bits",
                          (long long)i, tokens[i]);
  pl_data_writer *w;
  PL_TRY(pl_data_writer_open(path, width, &w));
  pl_status st = pl_data_writer_put(w, tokens, count);
  pl_status c = pl_data_writer_close(w);
  return st != PL_OK ? st : c;
}
