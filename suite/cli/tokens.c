/* tokens.c — `plateau tokens IN OUT`: a token shard (engine/train/data.h's
 * format) of any file's bytes, one token per byte (byte-level tokens, a
 * vocabulary of 256, stored as uint16), so the training step can read real
 * text without a tokenizer.  Streams the input; prints the count.
 *
 * Nothing the user owns is ever removed or half-written: IN must be a
 * regular file of at most PL_TOKENS_MAX_BYTES (a FIFO or /dev/zero would
 * never end); OUT must be new or a regular file that is not IN (compared by
 * device and inode, so a second path, a hard link or a symbolic link to IN
 * is refused); the shard is written to a temporary file beside OUT's target
 * and renamed over it only when complete, and a failure or a signal removes
 * only that temporary file.  A SIGKILL cannot be caught: its temporary file
 * (.OUT.HOST.PID.XXXXXX beside OUT's target) stays until the next run for
 * that target on that host removes it, once its PID is not running. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plateau/file.h"
#include "tokens.h"
#include "train/data.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: plateau tokens IN OUT\n"
          "  Write OUT, a token shard of the bytes of IN: byte-level tokens "
          "(vocabulary\n"
          "  256) as uint16 after a 24-byte header (magic PLTOKENS, version "
          "1, token\n"
          "  width 2, count).  Train on it with a model of V >= 256.\n"
          "  IN: a regular file of at most %lld bytes (4 GiB).  OUT: a new "
          "file or a\n"
          "  regular file other than IN, replaced only when the shard is "
          "complete\n"
          "  (written beside it as .OUT.HOST.PID.XXXXXX, then renamed; one "
          "left by a\n"
          "  killed run is removed by the next run for OUT on that host).  "
          "Exit: 0 ok,\n"
          "  2 bad arguments (nothing written), 3 a read or write failed.\n",
          (long long)PL_TOKENS_MAX_BYTES);
}

/* The temporary file while it exists, for the signal handler to remove
 * (it is ours: created by mkstemp). */
static char tmp_path[PATH_MAX + 128];
static volatile sig_atomic_t tmp_live;

static void on_signal(int sig) {
  if (tmp_live)
    unlink(tmp_path);
  signal(sig, SIG_DFL);
  raise(sig);
}

/* A refusal: the message and exit code 2 (nothing has been written). */
static int refuse(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int refuse(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "plateau tokens: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  return 2;
}

/* OUT's target (through a symbolic link, so the link stays) into dest;
 * exit code 2 with a message when OUT cannot be the output, else 0. */
static int out_target(const char *out, const struct stat *in_sb, char *dest,
                      size_t n) {
  struct stat lsb, sb;
  snprintf(dest, n, "%s", out);
  if (lstat(out, &lsb) != 0) {
    if (errno == ENOENT)
      return 0; /* a new file (its directory is checked by mkstemp) */
    return refuse("OUT=%s: %s", out, strerror(errno));
  }
  if (stat(out, &sb) != 0) /* a link to nothing: where would it write? */
    return refuse("OUT=%s: a symbolic link to a missing file (%s; allowed: "
                  "a new file or a regular file)",
                  out, strerror(errno));
  if (sb.st_dev == in_sb->st_dev && sb.st_ino == in_sb->st_ino)
    return refuse("OUT=%s: the same file as IN (same device and inode; "
                  "allowed: another file)",
                  out);
  if (!S_ISREG(sb.st_mode))
    return refuse("OUT=%s: %s (allowed: a new file or a regular file)", out,
                  S_ISDIR(sb.st_mode)    ? "is a directory"
                  : S_ISCHR(sb.st_mode)  ? "is a character device"
                  : S_ISBLK(sb.st_mode)  ? "is a block device"
                  : S_ISFIFO(sb.st_mode) ? "is a FIFO"
                                         : "is not a regular file");
  if (S_ISLNK(lsb.st_mode) && !realpath(out, dest))
    return refuse("OUT=%s: %s", out, strerror(errno));
  return 0;
}

/* This host's name, as the temporary files name it ("-" unknown). */
static void host_name(char *h, size_t n) {
  if (gethostname(h, n) != 0 || !h[0])
    snprintf(h, n, "-");
  h[n - 1] = '\0';
  for (char *c = h; *c; c++)
    if (*c == '/' || *c == '.')
      *c = '_';
}

/* Remove the temporary files of earlier runs for dest on this host whose
 * process is gone (killed by a signal no handler sees): .BASE.HOST.PID.
 * and six characters, a regular file of ours.  A PID still running, another
 * host's file (a shared file system) or any other name is left alone. */
static void clean_stale(const char *dir, const char *base, const char *host) {
  char pre[NAME_MAX + 128];
  const int pl = snprintf(pre, sizeof pre, ".%s.%s.", base, host);
  DIR *d = opendir(dir);
  if (!d || pl <= 0 || pl >= (int)sizeof pre) {
    if (d)
      closedir(d);
    return;
  }
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (strncmp(e->d_name, pre, (size_t)pl) != 0)
      continue;
    char *end;
    errno = 0;
    const long pid = strtol(e->d_name + pl, &end, 10);
    if (errno || end == e->d_name + pl || pid <= 0 || *end != '.' ||
        strlen(end + 1) != 6 || pid == (long)getpid())
      continue;
    if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
      continue; /* running (or not ours to ask): never touched */
    char p[PATH_MAX + NAME_MAX + 2];
    struct stat sb;
    const size_t dl = strlen(dir);
    snprintf(p, sizeof p, "%s%s%s", dir, dl && dir[dl - 1] == '/' ? "" : "/",
             e->d_name);
    if (lstat(p, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_uid == geteuid() &&
        unlink(p) == 0)
      fprintf(stderr,
              "plateau tokens: removed %s, the temporary file of an earlier "
              "run (PID %ld) that was killed\n",
              p, pid);
  }
  closedir(d);
}

/* A temporary file in dest's directory: tmp_path, created (mode 0600). */
static int make_tmp(const char *dest) {
  const char *slash = strrchr(dest, '/');
  const int dl = slash ? (int)(slash - dest) + 1 : 0;
  char host[64], dir[PATH_MAX];
  host_name(host, sizeof host);
  snprintf(dir, sizeof dir, "%.*s", dl ? dl : 1, dl ? dest : ".");
  clean_stale(dir, slash ? slash + 1 : dest, host);
  snprintf(tmp_path, sizeof tmp_path, "%.*s.%s.%s.%ld.XXXXXX", dl, dest,
           slash ? slash + 1 : dest, host, (long)getpid());
  int fd = mkstemp(tmp_path);
  if (fd < 0) {
    return refuse("cannot create a file in %s: %s", dir, strerror(errno));
  }
  tmp_live = 1;
  close(fd);
  return 0;
}

/* The temporary file made durable (fsync). */
static pl_status sync_tmp(void) {
  pl_status st = PL_OK;
  int fd = open(tmp_path, O_RDONLY | O_CLOEXEC);
  if (fd < 0 || fsync(fd) != 0)
    st = pl_set_error(PL_EIO, "%s: sync failed: %s", tmp_path, strerror(errno));
  if (fd >= 0)
    close(fd);
  return st;
}

/* IN's bytes as tokens into w, *count of them. */
static pl_status copy_tokens(int in, const char *in_path, pl_data_writer *w,
                             int64_t *count) {
  static unsigned char buf[65536];
  static uint32_t tok[65536];
  ssize_t n;
  while ((n = read(in, buf, sizeof buf)) != 0) {
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return pl_set_error(PL_EIO, "%s: read failed: %s", in_path,
                          strerror(errno));
    }
    if (*count + n > PL_TOKENS_MAX_BYTES) /* it grew while read */
      return pl_set_error(PL_EINVAL, "%s: more than %lld bytes (the limit)",
                          in_path, (long long)PL_TOKENS_MAX_BYTES);
    for (ssize_t i = 0; i < n; i++)
      tok[i] = buf[i];
    *count += (int64_t)n;
    PL_TRY(pl_data_writer_put(w, tok, (int64_t)n));
  }
  return PL_OK;
}

/* IN's bytes as tokens into the temporary file, made durable (fsync). */
static pl_status write_shard(int in, const char *in_path, int64_t *count) {
  pl_data_writer *w;
  *count = 0;
  PL_TRY(pl_data_writer_open(tmp_path, 2, &w));
  pl_status st = copy_tokens(in, in_path, w, count);
  pl_status c = pl_data_writer_close(w);
  PL_TRY(st);
  PL_TRY(c);
  return sync_tmp();
}

/* The temporary file's mode: what a new file gets (0666 less the umask). */
static void default_mode(void) {
  const mode_t um = umask(0);
  umask(um);
  chmod(tmp_path, 0666 & ~um);
}

/* IN's tokens into the temporary file (IN closed), then renamed to dest. */
static pl_status convert(int in, const char *in_path, const char *dest,
                         int64_t *count) {
  pl_status st = write_shard(in, in_path, count);
  close(in);
  PL_TRY(st);
  default_mode();
  if (rename(tmp_path, dest) != 0)
    return pl_set_error(PL_EIO, "rename %s to %s: %s", tmp_path, dest,
                        strerror(errno));
  tmp_live = 0;
  return PL_OK;
}

int pl_tokens_main(int argc, char **argv) {
  if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
    usage(stdout);
    return 0;
  }
  if (argc != 3 || argv[1][0] == '-' || argv[2][0] == '-') {
    fprintf(stderr, "plateau tokens: want two arguments IN OUT, got %d\n",
            argc - 1);
    usage(stderr);
    return 2;
  }
  const char *in_path = argv[1], *out = argv[2];
  if (!out[0]) /* before IN is read: nothing converted for nowhere */
    return refuse("OUT='': an empty path (allowed: a new file or a regular "
                  "file)");
  int in;
  if (pl_open_regular(in_path, &in) != PL_OK)
    return refuse("IN=%s (allowed: a regular file)", pl_last_error());
  struct stat in_sb;
  if (fstat(in, &in_sb) != 0) {
    close(in);
    return refuse("IN=%s: %s", in_path, strerror(errno));
  }
  if (in_sb.st_size > PL_TOKENS_MAX_BYTES) {
    close(in);
    return refuse("IN=%s: %lld bytes: too large (allowed: at most %lld "
                  "bytes, 4 GiB)",
                  in_path, (long long)in_sb.st_size,
                  (long long)PL_TOKENS_MAX_BYTES);
  }
  char dest[PATH_MAX];
  int code = out_target(out, &in_sb, dest, sizeof dest);
  if (code == 0) {
    signal(SIGINT, on_signal), signal(SIGTERM, on_signal);
    signal(SIGHUP, on_signal);
    code = make_tmp(dest);
  }
  if (code != 0) {
    close(in);
    return code;
  }
  int64_t count = 0;
  pl_status st = convert(in, in_path, dest, &count);
  if (st != PL_OK) {
    tmp_live = 0;
    unlink(tmp_path); /* ours; OUT itself is untouched */
    fprintf(stderr, "plateau tokens: %s\n", pl_last_error());
    return st == PL_EINVAL ? 2 : 3;
  }
  printf("%s: %lld tokens (byte-level, V 256, uint16)\n", out,
         (long long)count);
  return 0;
}
