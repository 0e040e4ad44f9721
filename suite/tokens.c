/* tokens.c — `plateau tokens IN OUT`: a token shard (engine/train/data.h's
 * format) of any file's bytes, one token per byte (byte-level tokens, a
 * vocabulary of 256, stored as uint16), so the training step can read real
 * text without a tokenizer.  Streams the input; prints the count. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "tokens.h"
#include "train/data.h"

static void usage(FILE *f) {
  fprintf(f, "usage: plateau tokens IN OUT\n"
             "  Write OUT, a token shard of the bytes of IN: byte-level tokens "
             "(vocabulary\n"
             "  256) as uint16 after a 24-byte header (magic PLTOKENS, version "
             "1, token\n"
             "  width 2, count).  Train on it with a model of V >= 256.\n");
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
  FILE *in = fopen(argv[1], "rb");
  if (!in) {
    fprintf(stderr, "plateau tokens: %s: %s\n", argv[1], strerror(errno));
    return 3;
  }
  pl_data_writer *w;
  pl_status st = pl_data_writer_open(argv[2], 2, &w);
  unsigned char buf[65536];
  uint32_t tok[65536];
  int64_t count = 0;
  size_t n;
  while (st == PL_OK && (n = fread(buf, 1, sizeof buf, in)) > 0) {
    for (size_t i = 0; i < n; i++)
      tok[i] = buf[i];
    st = pl_data_writer_put(w, tok, (int64_t)n);
    count += (int64_t)n;
  }
  if (st == PL_OK && ferror(in))
    st = pl_set_error(PL_EIO, "%s: read failed: %s", argv[1], strerror(errno));
  fclose(in);
  pl_status c = pl_data_writer_close(w);
  if (st == PL_OK)
    st = c;
  if (st != PL_OK) {
    fprintf(stderr, "plateau tokens: %s\n", pl_last_error());
    remove(argv[2]);
    return 3;
  }
  printf("%s: %lld tokens (byte-level, V 256, uint16)\n", argv[2],
         (long long)count);
  return 0;
}
