/* data.h — the training step's token streams: a seeded synthetic stream and
 * tokenized shards on disk, read so that each rank reads only its own
 * tokens.
 *
 * Windows: a stream is cut into windows of S + 1 tokens, window q = tokens
 * [q·S, q·S + S] (consecutive windows share one token: the last target of
 * one is the first input of the next); the inputs of a sequence are its
 * first S tokens and the targets the next S.  In a file of C tokens there
 * are ⌊(C − 1) / S⌋ windows and window q is window q mod that count (the
 * stream repeats).  For the layout of a trainer (train/layout.h), micro-batch
 * mi of step st of D-group g is window (st·micro + mi)·(W / D) + g, and rank
 * j of the group reads its slice [j·N, j·N + N] (N + 1 tokens): its N inputs
 * and their N targets.
 *
 * Shard file format (little-endian), written by pl_data_write and by
 * `plateau tokens`:
 *     offset  size  field
 *          0     8  magic "PLTOKENS"
 *          8     4  version, 1
 *         12     4  token width in bytes: 2 (uint16) or 4 (uint32)
 *         16     8  count of tokens C
 *         24  C·w   the tokens
 * A reader checks the magic, version, width and that the file holds C
 * tokens, and every token it reads against the model's vocabulary.
 *
 * Synthetic stream: token g is part of run ⌊g/8⌋, an arithmetic progression
 * of 8 tokens with a seeded start in [0, V) and a seeded step in {1, 2, 3}
 * (mod V) — random at the start of each run, predictable inside it, so a
 * model learns and the loss falls; any token is a pure function of (seed,
 * g), so every rank draws its own slice directly. */
#ifndef PLATEAU_TRAIN_DATA_H
#define PLATEAU_TRAIN_DATA_H

#include <stdint.h>

#include "plateau/plateau.h"
#include "train/layout.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PL_DATA_MAGIC "PLTOKENS"
#define PL_DATA_VERSION 1
#define PL_DATA_HEADER_BYTES 24

typedef struct pl_data pl_data;

/* The synthetic stream over a vocabulary of V tokens. */
pl_status pl_data_synthetic(int64_t V, uint64_t seed, pl_data **out);
/* A shard file, its tokens checked against V (>= 1) as they are read.
 * PL_EIO (cannot open or read) or PL_EINVAL (bad header, size, a token
 * >= V) with a message naming the file and the value. */
pl_status pl_data_open(const char *path, int64_t V, pl_data **out);
void pl_data_close(pl_data *d);

/* Tokens of the stream (INT64_MAX for the synthetic one). */
int64_t pl_data_count(const pl_data *d);

/* Can a run of context S over a vocabulary of V read this stream?  Checked
 * before anything is written (a bad shard is bad input, not a failed run):
 * at least S + 1 tokens (one window) and every token < V.  A shard is read
 * whole once (its largest token kept for later calls); the synthetic
 * stream always can.  PL_EINVAL naming the file and the count, or the
 * first token >= V with its position. */
pl_status pl_data_check(pl_data *d, int64_t S, int64_t V);

/* n tokens at offset off of window q of S + 1 tokens (off + n <= S + 1). */
pl_status pl_data_read(pl_data *d, int64_t q, int64_t S, int64_t off, int64_t n,
                       int32_t *out);

/* This rank's micro·(N + 1) tokens of step st for a trainer's layout (the
 * argument of pl_trainer_step). */
pl_status pl_data_batch(pl_data *d, const pl_layout_plan *p, int micro,
                        int64_t st, int32_t *out);

/* Write a shard of count tokens of width 2 or 4 bytes (each < 2^(8·width)). */
pl_status pl_data_write(const char *path, int width, const uint32_t *tokens,
                        int64_t count);

/* The same, streamed: open (a header with count 0), put tokens in pieces,
 * close (the count written into the header).  A writer that fails keeps
 * failing; close reports it and frees the writer in every case. */
typedef struct pl_data_writer pl_data_writer;
pl_status pl_data_writer_open(const char *path, int width,
                              pl_data_writer **out);
pl_status pl_data_writer_put(pl_data_writer *w, const uint32_t *tokens,
                             int64_t n);
pl_status pl_data_writer_close(pl_data_writer *w);

#ifdef __cplusplus
}
#endif
#endif
