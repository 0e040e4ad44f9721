/* tokens.h — `plateau tokens IN OUT` (tokens.c).  Used by main.c only. */
#ifndef PLATEAU_SUITE_TOKENS_H
#define PLATEAU_SUITE_TOKENS_H

/* argv[0] is "tokens".  Returns the process exit code (0 ok, 2 usage, 3 I/O).
 */
int pl_tokens_main(int argc, char **argv);

#endif
