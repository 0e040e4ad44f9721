/* results.c — result files (see results.h for the format and guarantees).
 *
 * Why this shape: sweeps run as Slurm array tasks, several ranks or jobs may
 * append to one file, and a job can be killed at any instant.  So a file is
 * created with O_EXCL under a name no other writer can produce, every row is a
 * single write(2) of a whole line under an exclusive flock, and a writer that
 * finds the file not ending in '\n' (someone died mid-row) first closes the
 * fragment with a marker field ("\t!torn\n") so the fragment can never be
 * mistaken for a row, whatever number of fields it happened to have.  Readers
 * accept a line only when it ends in '\n', has exactly the header's number of
 * fields and no torn marker; everything else is counted in nbad.  The
 * reader (pl_table_read, with the version-1 mapping) is results_read.c. */
#include "results.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "plateau/plateau.h"
#include "results_internal.h"
#include "schema.h"

#include "plateau_git.h" /* generated: build/gen (jobs/provenance header) */

struct pl_results {
  int fd;
  int ncols;
  char *path;
  char *made; /* the shallowest directory pl_results_create made, or NULL */
};

/* ---- small helpers ------------------------------------------------------- */

/* *made (may be NULL) gets the shallowest directory created, malloc'd. */
static pl_status mkdir_p(const char *dir, char **made) {
  char buf[4096];
  size_t len = strlen(dir);
  if (len == 0 || len >= sizeof buf)
    return pl_set_error(PL_EINVAL, "result dir '%s': empty or too long", dir);
  memcpy(buf, dir, len + 1);
  for (size_t i = 1; i <= len; i++) {
    if (buf[i] == '/' || buf[i] == '\0') {
      char c = buf[i];
      buf[i] = '\0';
      if (mkdir(buf, 0775) == 0) {
        if (made && !*made)
          *made = strdup(buf);
      } else if (errno != EEXIST) {
        return pl_set_error(PL_EIO, "mkdir %s: %s", buf, strerror(errno));
      }
      buf[i] = c;
    }
  }
  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
    return pl_set_error(PL_EIO, "result dir %s: not a directory", dir);
  return PL_OK;
}

pl_status pl_results_dir_check(const char *dir) {
  size_t len = dir ? strlen(dir) : 0;
  if (len == 0)
    return pl_set_error(PL_EINVAL, "empty directory name");
  if (len > PL_RESULTS_DIR_MAX)
    return pl_set_error(PL_EINVAL,
                        "too long (%zu characters; allowed: at most %d)", len,
                        PL_RESULTS_DIR_MAX);
  for (const char *c = dir; *c;) { /* each name */
    size_t n = strcspn(c, "/");
    if (n > NAME_MAX)
      return pl_set_error(PL_EINVAL,
                          "the name '%.24s...' is too long (%zu characters; "
                          "allowed: at most %d)",
                          c, n, NAME_MAX);
    c += n;
    while (*c == '/')
      c++;
  }
  /* The existing prefix must be directories; the rest is made by mkdir_p
   * inside the deepest existing one. */
  char buf[PL_RESULTS_DIR_MAX + 1], parent[PL_RESULTS_DIR_MAX + 1] = ".";
  memcpy(buf, dir, len + 1);
  for (size_t i = 1; i <= len; i++) {
    if (buf[i] != '/' && buf[i] != '\0')
      continue;
    char c = buf[i];
    buf[i] = '\0';
    struct stat st;
    if (stat(buf, &st) != 0) {
      if (errno != ENOENT)
        return pl_set_error(PL_EINVAL, "cannot use '%s' (%s)", buf,
                            strerror(errno));
      break;
    }
    if (!S_ISDIR(st.st_mode))
      return pl_set_error(PL_EINVAL, "'%s' exists and is not a directory", buf);
    snprintf(parent, sizeof parent, "%s", buf);
    buf[i] = c;
  }
  if (dir[0] == '/' && strcmp(parent, ".") == 0)
    snprintf(parent, sizeof parent, "/");
  char probe[PL_RESULTS_DIR_MAX + 64];
  snprintf(probe, sizeof probe, "%s/.plateau-probe-XXXXXX", parent);
  if (!mkdtemp(probe))
    return pl_set_error(PL_EINVAL, "cannot create a directory in '%s' (%s)",
                        parent, strerror(errno));
  rmdir(probe);
  return PL_OK;
}

/* Write all of buf (a regular file normally takes it in one call; loop for
 * the partial-write case, still under the caller's lock). */
static pl_status write_all(int fd, const char *buf, size_t len,
                           const char *path) {
  while (len > 0) {
    ssize_t w = write(fd, buf, len);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      return pl_set_error(PL_EIO, "write %s: %s", path, strerror(errno));
    }
    buf += w;
    len -= (size_t)w;
  }
  return PL_OK;
}

/* Growable string. */
typedef struct sbuf {
  char *p;
  size_t len, cap;
} sbuf;

static void sb_putn(sbuf *b, const char *s, size_t n) {
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n + 1)
      cap *= 2;
    char *p = realloc(b->p, cap);
    PL_ASSERT(p != NULL);
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = '\0';
}
static void sb_puts(sbuf *b, const char *s) {
  sb_putn(b, s, strlen(s));
}

/* Metadata values live on one "# key: value" line: newlines and tabs become
 * spaces. */
static void sb_put_clean(sbuf *b, const char *s) {
  for (; *s; s++) {
    char c = (*s == '\n' || *s == '\r' || *s == '\t') ? ' ' : *s;
    sb_putn(b, &c, 1);
  }
}

/* Lock, terminate a torn fragment if the file does not end in '\n', write
 * `buf` in one call, unlock. */
static pl_status locked_append(int fd, const char *path, const char *buf,
                               size_t len) {
  while (flock(fd, LOCK_EX) != 0) {
    if (errno != EINTR)
      return pl_set_error(PL_EIO, "flock %s: %s", path, strerror(errno));
  }
  pl_status st = PL_OK;
  struct stat sst;
  if (fstat(fd, &sst) != 0)
    PL_TRY_GOTO(st, done,
                pl_set_error(PL_EIO, "fstat %s: %s", path, strerror(errno)));
  if (sst.st_size > 0) {
    char last = '\n';
    ssize_t r = pread(fd, &last, 1, sst.st_size - 1);
    if (r != 1)
      PL_TRY_GOTO(st, done,
                  pl_set_error(PL_EIO, "read %s: %s", path,
                               r < 0 ? strerror(errno) : "short read"));
    static const char mark[] = "\t" PL__TORN_MARK "\n";
    if (last != '\n')
      PL_TRY_GOTO(st, done, write_all(fd, mark, sizeof mark - 1, path));
  }
  st = write_all(fd, buf, len, path);
done:
  flock(fd, LOCK_UN);
  return st;
}

/* ---- writing ------------------------------------------------------------- */

pl_status pl_results_create(const char *dir, const char *stem,
                            const char *columns, const char *const *meta_kv,
                            pl_results **out) {
  *out = NULL;
  if (!dir || !stem || !columns || !*stem || !*columns)
    return pl_set_error(PL_EINVAL, "pl_results_create: dir, stem and columns "
                                   "must be non-empty");
  if (strchr(stem, '/'))
    return pl_set_error(PL_EINVAL, "result stem '%s': must not contain '/'",
                        stem);
  if (strchr(columns, '\n'))
    return pl_set_error(PL_EINVAL, "result columns must be one line");
  char *made = NULL;
  pl_status mst = mkdir_p(dir, &made);
  if (mst != PL_OK) {
    free(made);
    return mst;
  }

  char host[256] = "host";
  gethostname(host, sizeof host - 1);
  host[sizeof host - 1] = '\0';
  for (char *c = host; *c; c++)
    if (*c == '/' || *c == '.' || *c == ' ')
      *c = '_';
  char stamp[32];
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);

  size_t plen = strlen(dir) + strlen(stem) + strlen(host) + 96;
  char *path = malloc(plen);
  PL_ASSERT(path != NULL);
  int fd = -1;
  for (int n = 0; n < 100000; n++) {
    snprintf(path, plen, "%s/%s.%s.%s.%ld.%d.tsv", dir, stem, stamp, host,
             (long)getpid(), n);
    fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0664);
    if (fd >= 0)
      break;
    if (errno != EEXIST) {
      pl_status st =
          pl_set_error(PL_EIO, "create %s: %s", path, strerror(errno));
      free(path);
      free(made);
      return st;
    }
  }
  if (fd < 0) {
    free(path);
    free(made);
    return pl_set_error(PL_EIO, "no free result file name in %s", dir);
  }

  sbuf b = {0};
  char line[64];
  snprintf(line, sizeof line, "# plateau-results: %d\n", PL_RESULTS_SCHEMA);
  sb_puts(&b, line);
  for (int i = 0; meta_kv && meta_kv[i] && meta_kv[i + 1]; i += 2) {
    sb_puts(&b, "# ");
    sb_put_clean(&b, meta_kv[i]);
    sb_puts(&b, ": ");
    sb_put_clean(&b, meta_kv[i + 1]);
    sb_puts(&b, "\n");
  }
  sb_puts(&b, columns);
  sb_puts(&b, "\n");
  pl_status st = locked_append(fd, path, b.p, b.len);
  free(b.p);
  if (st != PL_OK) {
    close(fd);
    free(path);
    free(made);
    return st;
  }
  pl_results *r = calloc(1, sizeof *r);
  PL_ASSERT(r != NULL);
  r->fd = fd;
  r->path = path;
  r->made = made;
  r->ncols = pl__results_count_fields(columns, strlen(columns));
  *out = r;
  return PL_OK;
}

/* The header line of an existing file (first line not starting with '#'). */
static pl_status read_header(const char *path, char **header) {
  pl_status ost;
  FILE *f = pl__results_open_regular(path, &ost);
  if (!f)
    return ost;
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  pl_status st = pl_set_error(PL_EINVAL, "%s: no header line", path);
  while ((n = getline(&line, &cap, f)) > 0) {
    if (line[0] == '#')
      continue;
    if (line[n - 1] != '\n')
      break;
    line[n - 1] = '\0';
    *header = line;
    line = NULL;
    st = PL_OK;
    pl_clear_error();
    break;
  }
  free(line);
  fclose(f);
  return st;
}

pl_status pl_results_open_append(const char *path, const char *columns,
                                 pl_results **out) {
  *out = NULL;
  char *header = NULL;
  PL_TRY(read_header(path, &header));
  if (strcmp(header, columns) != 0) {
    pl_status st =
        pl_set_error(PL_EINVAL, "%s: header '%s' differs from columns '%s'",
                     path, header, columns);
    free(header);
    return st;
  }
  free(header);
  int fd = open(path, O_RDWR | O_APPEND | O_CLOEXEC);
  if (fd < 0)
    return pl_set_error(PL_EIO, "open %s: %s", path, strerror(errno));
  pl_results *r = calloc(1, sizeof *r);
  PL_ASSERT(r != NULL);
  r->fd = fd;
  r->path = strdup(path);
  r->ncols = pl__results_count_fields(columns, strlen(columns));
  *out = r;
  return PL_OK;
}

pl_status pl_results_append(pl_results *r, const char *line) {
  if (!r || !line)
    return pl_set_error(PL_EINVAL, "pl_results_append: NULL");
  size_t len = strlen(line);
  if (memchr(line, '\n', len) || line[0] == '#')
    return pl_set_error(PL_EINVAL,
                        "%s: a row must be one line not starting "
                        "with '#'",
                        r->path);
  int nf = pl__results_count_fields(line, len);
  if (nf != r->ncols)
    return pl_set_error(PL_EINVAL, "%s: row has %d fields, header has %d",
                        r->path, nf, r->ncols);
  char *buf = malloc(len + 2);
  PL_ASSERT(buf != NULL);
  memcpy(buf, line, len);
  buf[len] = '\n';
  pl_status st = locked_append(r->fd, r->path, buf, len + 1);
  free(buf);
  return st;
}

pl_status pl_results_close(pl_results *r, const char *end_status) {
  if (!r)
    return PL_OK;
  char stamp[32], line[128];
  pl_utc_stamp(stamp, sizeof stamp);
  snprintf(line, sizeof line, "# end: %s %s\n",
           end_status && *end_status ? end_status : "ok", stamp);
  pl_status st = locked_append(r->fd, r->path, line, strlen(line));
  if (close(r->fd) != 0 && st == PL_OK)
    st = pl_set_error(PL_EIO, "close %s: %s", r->path, strerror(errno));
  free(r->path);
  free(r->made);
  free(r);
  return st;
}

void pl_results_discard(pl_results *r) {
  if (!r)
    return;
  close(r->fd);
  unlink(r->path);
  /* the directories made for it, deepest first, while empty */
  char *dir = strdup(r->path);
  PL_ASSERT(dir != NULL);
  for (char *slash = strrchr(dir, '/'); r->made && slash;
       slash = strrchr(dir, '/')) {
    *slash = '\0';
    if (strlen(dir) < strlen(r->made) || rmdir(dir) != 0)
      break;
  }
  free(dir);
  free(r->path);
  free(r->made);
  free(r);
}

const char *pl_results_path(const pl_results *r) {
  return r ? r->path : NULL;
}

/* ---- metadata ------------------------------------------------------------ */

extern char **environ;

#define META_MAX 128
static char meta_store[META_MAX][512];
static const char *meta_kv[2 * META_MAX + 1];

/* The environment variables a result file records: only those that change
 * what this program measures, by exact name, never a prefix (a prefix
 * would record PLATEAU_API_TOKEN or NCCL_IB_..._PASSWORD verbatim):
 * the PLATEAU_* variables the program reads, the NCCL_* tuning variables
 * NCCL reads for our communicators (they change collective times), Slurm's
 * ids, and the device and thread counts. */
static const char *const env_recorded[] = {"PLATEAU_COMM_TIMEOUT",
                                           "PLATEAU_LOG",
                                           "PLATEAU_SIMD",
                                           "PLATEAU_NCCL_CTA_POLICY",
                                           "PLATEAU_NCCL_MAX_CTAS",
                                           "PLATEAU_CALIB_INJECT_FAULT",
                                           "PLATEAU_INJECT_SLOW_RUNS",
                                           "NCCL_ALGO",
                                           "NCCL_PROTO",
                                           "NCCL_NVLS_ENABLE",
                                           "NCCL_P2P_LEVEL",
                                           "NCCL_P2P_DISABLE",
                                           "NCCL_SHM_DISABLE",
                                           "NCCL_IB_DISABLE",
                                           "NCCL_NET",
                                           "NCCL_SOCKET_IFNAME",
                                           "NCCL_IB_HCA",
                                           "NCCL_MIN_NCHANNELS",
                                           "NCCL_MAX_NCHANNELS",
                                           "NCCL_BUFFSIZE",
                                           "NCCL_NTHREADS",
                                           "NCCL_CUMEM_ENABLE",
                                           "NCCL_DEBUG",
                                           "SLURM_JOB_ID",
                                           "SLURM_ARRAY_JOB_ID",
                                           "SLURM_ARRAY_TASK_ID",
                                           "SLURM_STEP_ID",
                                           "SLURM_NTASKS",
                                           "SLURM_JOB_NODELIST",
                                           "SLURM_JOB_PARTITION",
                                           "CUDA_VISIBLE_DEVICES",
                                           "OMP_NUM_THREADS",
                                           "OPENBLAS_NUM_THREADS",
                                           NULL};

bool pl__env_secret_like(const char *name, size_t len) {
  static const char *const words[] = {
      "TOKEN",      "PASSWORD", "PASSWD",  "SECRET", "KEY",
      "CREDENTIAL", "AUTH",     "PRIVATE", "COOKIE", NULL};
  char up[128];
  if (len >= sizeof up)
    return true; /* too long to judge: say nothing */
  for (size_t i = 0; i < len; i++)
    up[i] = (char)toupper((unsigned char)name[i]);
  up[len] = '\0';
  for (int i = 0; words[i]; i++)
    if (strstr(up, words[i]))
      return true;
  return false;
}

const char *pl__env_recorded(const char *name, size_t len, const char *value) {
  for (int i = 0; env_recorded[i]; i++)
    if (strlen(env_recorded[i]) == len &&
        strncmp(env_recorded[i], name, len) == 0)
      return pl__env_secret_like(name, len) ? "<redacted>" : value;
  return NULL;
}

/* argv as one line a shell reads back into the same words: plain words as
 * they are, others in single quotes ('\'' for a quote), and words with a
 * control character (a tab, a newline: a metadata line holds none) in
 * bash's $'...' with escapes.  malloc'd. */
char *pl__shell_quote_argv(int argc, char **argv) {
  sbuf b = {0};
  sb_puts(&b, "");
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i] ? argv[i] : "";
    bool plain = *a != '\0', ctrl = false;
    for (const char *c = a; *c; c++) {
      unsigned char u = (unsigned char)*c;
      if (u < 0x20 || u == 0x7f)
        ctrl = true;
      if (!(strchr("-_=.,:/+@%", *c) || isalnum(u)))
        plain = false;
    }
    if (i)
      sb_puts(&b, " ");
    if (plain) {
      sb_puts(&b, a);
    } else if (!ctrl) {
      sb_puts(&b, "'");
      for (const char *c = a; *c; c++)
        sb_puts(&b, *c == '\'' ? "'\\''" : (char[]){*c, '\0'});
      sb_puts(&b, "'");
    } else {
      sb_puts(&b, "$'");
      for (const char *c = a; *c; c++) {
        unsigned char u = (unsigned char)*c;
        char e[8];
        if (*c == '\t')
          sb_puts(&b, "\\t");
        else if (*c == '\n')
          sb_puts(&b, "\\n");
        else if (*c == '\r')
          sb_puts(&b, "\\r");
        else if (*c == '\\' || *c == '\'')
          sb_puts(&b, *c == '\\' ? "\\\\" : "\\'");
        else if (u < 0x20 || u == 0x7f) {
          snprintf(e, sizeof e, "\\x%02x", u);
          sb_puts(&b, e);
        } else
          sb_putn(&b, c, 1);
      }
      sb_puts(&b, "'");
    }
  }
  return b.p;
}

const char *const *pl_results_meta(struct pl_dev *dev, struct pl_comm *comm,
                                   const char *bench, int argc, char **argv) {
  int nkv = 0, nstore = 0;
#define PUT(k, ...)                                                            \
  do {                                                                         \
    if (nkv / 2 < META_MAX - 1 && nstore < META_MAX) {                         \
      snprintf(meta_store[nstore], sizeof meta_store[nstore], __VA_ARGS__);    \
      meta_kv[nkv++] = (k);                                                    \
      meta_kv[nkv++] = meta_store[nstore++];                                   \
    }                                                                          \
  } while (0)

  PUT("bench", "%s", bench ? bench : "-");
  PUT("plateau_version", "%s", PLATEAU_VERSION);
  /* of the tree this binary was compiled from (jobs/provenance header):
   * dirty -1 = built without a git repository; tree_hash identifies the
   * sources either way (jobs/provenance verify FILE) */
  PUT("git_sha", "%s", PL_GIT_SHA);
  if (PL_GIT_DIRTY < 0)
    PUT("git_dirty", "%s", "-");
  else
    PUT("git_dirty", "%d", PL_GIT_DIRTY);
  PUT("tree_hash", "%s", PL_TREE_HASH);
  pl_dev_info info;
  memset(&info, 0, sizeof info);
  if (dev && pl_dev_info_get(dev, &info) == PL_OK) {
    PUT("backend", "%s", pl_backend_name(info.backend));
    PUT("device", "%s", info.name);
    PUT("device_ordinal", "%d", info.ordinal);
    PUT("device_memory_bytes", "%zu", info.total_bytes);
    PUT("device_units", "%d", info.sm_count);
    PUT("driver", "%s", info.driver);
    PUT("cuda_runtime", "%s", info.runtime);
    PUT("blas", "%s", info.blas);
  } else {
    PUT("backend", "%s", "-");
    PUT("device", "%s", "-");
  }
  PUT("nccl", "%s", pl_nccl_version());
  PUT("cudnn", "%s", pl_cudnn_version());
  PUT("mpi", "%s", pl_mpi_version());
  PUT("ranks", "%d", comm ? pl_comm_size(comm) : pl_world_size());
  char host[256] = "-";
  gethostname(host, sizeof host - 1);
  host[sizeof host - 1] = '\0';
  PUT("hostname", "%s", host);
  const char *jid = getenv("SLURM_JOB_ID");
  const char *ajid = getenv("SLURM_ARRAY_JOB_ID");
  const char *atid = getenv("SLURM_ARRAY_TASK_ID");
  PUT("slurm_job_id", "%s", jid ? jid : "-");
  PUT("slurm_array_job_id", "%s", ajid ? ajid : "-");
  PUT("slurm_array_task_id", "%s", atid ? atid : "-");
  char stamp[32];
  pl_utc_stamp(stamp, sizeof stamp);
  PUT("start_utc", "%s", stamp);

  /* argv, whole and quoted so that the line can be pasted back into a
   * shell (the previous call's copy is freed here).  The program started by
   * an absolute path is recorded by its name alone: the folder it was built
   * in is a fact of the machine that built it, not of the run. */
  static char *argv_line;
  free(argv_line);
  char **av = calloc((size_t)(argc > 0 ? argc : 1), sizeof *av);
  PL_ASSERT(av != NULL);
  for (int i = 0; i < argc; i++)
    av[i] = argv[i];
  if (argc > 0 && av[0] && av[0][0] == '/')
    av[0] = strrchr(av[0], '/') + 1;
  argv_line = pl__shell_quote_argv(argc, av);
  free(av);
  if (nkv / 2 < META_MAX - 1) {
    meta_kv[nkv++] = "argv";
    meta_kv[nkv++] = argv_line;
  }

  /* The recorded environment (env_recorded; secret-looking names
   * redacted), one key per variable: env.NAME */
  static char env_keys[META_MAX][80];
  int nenv = 0;
  for (char **e = environ; e && *e && nenv < 48; e++) {
    const char *eq = strchr(*e, '=');
    if (!eq)
      continue;
    size_t len = (size_t)(eq - *e);
    const char *v = len <= 70 ? pl__env_recorded(*e, len, eq + 1) : NULL;
    if (!v)
      continue;
    snprintf(env_keys[nenv], sizeof env_keys[nenv], "env.%.*s", (int)len, *e);
    PUT(env_keys[nenv], "%s", v);
    nenv++;
  }
#undef PUT
  meta_kv[nkv] = NULL;
  return meta_kv;
}
