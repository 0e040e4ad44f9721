/* file.h — opening an input only when it is a regular file.
 *
 * Why: an input path can name a FIFO, a device or a directory.  open() of a
 * FIFO waits for a writer forever (a hung job slot), /dev/zero never ends,
 * and a directory fails late with a confusing message.  Every reader of a
 * user-given file (token shards, points files, result files the planner
 * reads) opens it through here: without blocking, checked with fstat, then
 * switched back to blocking reads. */
#ifndef PLATEAU_FILE_H
#define PLATEAU_FILE_H

#include <stdio.h>

#include "plateau/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Open path read-only into *fd (close-on-exec) if it is a regular file
 * (symbolic links followed).  PL_EIO naming the path and errno's text when
 * it cannot be opened; PL_EINVAL "PATH: not a regular file (a FIFO)" (or a
 * directory, a character device, ...) otherwise; *fd is -1 on failure. */
pl_status pl_open_regular(const char *path, int *fd);

/* The same as a stdio stream for reading ("r"); *f is NULL on failure. */
pl_status pl_fopen_regular(const char *path, FILE **f);

#ifdef __cplusplus
}
#endif
#endif
