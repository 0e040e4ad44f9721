/* tokens.h — `plateau tokens IN OUT` (tokens.c).  Used by main.c only. */
#ifndef PLATEAU_SUITE_TOKENS_H
#define PLATEAU_SUITE_TOKENS_H

/* The largest input, in bytes (4 GiB: an 8 GiB shard of byte-level tokens;
 * a larger or endless input is refused before anything is written). */
#define PL_TOKENS_MAX_BYTES (4ll << 30)

/* argv[0] is "tokens".  Returns the process exit code: 0 ok, 2 usage or bad
 * input (IN not a readable regular file or over the limit, OUT not a new or
 * regular file, OUT the same file as IN, OUT's directory not writable;
 * nothing written), 3 a read or write failed (OUT untouched). */
int pl_tokens_main(int argc, char **argv);

#endif
