/* file.c — opening an input only when it is a regular file (plateau/file.h):
 * open without blocking (a FIFO would otherwise wait for a writer), fstat,
 * refuse anything that is not a regular file by its kind, then clear
 * O_NONBLOCK so reads behave normally. */
#include "plateau/file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *kind(mode_t m) {
  return S_ISDIR(m)    ? "a directory"
         : S_ISFIFO(m) ? "a FIFO"
         : S_ISCHR(m)  ? "a character device"
         : S_ISBLK(m)  ? "a block device"
         : S_ISSOCK(m) ? "a socket"
                       : "not a file";
}

pl_status pl_open_regular(const char *path, int *fd) {
  *fd = -1;
  int f = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (f < 0)
    return pl_set_error(PL_EIO, "%s: %s", path, strerror(errno));
  struct stat sb;
  if (fstat(f, &sb) != 0) {
    const int e = errno;
    close(f);
    return pl_set_error(PL_EIO, "%s: %s", path, strerror(e));
  }
  if (!S_ISREG(sb.st_mode)) {
    close(f);
    return pl_set_error(PL_EINVAL, "%s: not a regular file (%s)", path,
                        kind(sb.st_mode));
  }
  const int fl = fcntl(f, F_GETFL);
  if (fl < 0 || fcntl(f, F_SETFL, fl & ~O_NONBLOCK) != 0) {
    const int e = errno;
    close(f);
    return pl_set_error(PL_EIO, "%s: %s", path, strerror(e));
  }
  *fd = f;
  return PL_OK;
}

pl_status pl_fopen_regular(const char *path, FILE **out) {
  *out = NULL;
  int fd;
  PL_TRY(pl_open_regular(path, &fd));
  FILE *f = fdopen(fd, "r");
  if (!f) {
    const int e = errno;
    close(fd);
    return pl_set_error(PL_EIO, "%s: %s", path, strerror(e));
  }
  *out = f;
  return PL_OK;
}
