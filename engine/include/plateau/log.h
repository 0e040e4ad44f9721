/* log.h — rank-prefixed logging with levels, to stderr.
 *
 * Lines look like `[r3 info] message`.  The rank is set once after the
 * communicator exists (pl_init does it); before that the prefix is `[r? ...]`.
 * The level comes from pl_log_set_level or the PLATEAU_LOG environment variable
 * (error|warn|info|debug); the default is info. */
#ifndef PLATEAU_LOG_H
#define PLATEAU_LOG_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum pl_log_level {
  PL_LOG_ERROR = 0,
  PL_LOG_WARN = 1,
  PL_LOG_INFO = 2,
  PL_LOG_DEBUG = 3,
} pl_log_level;

void pl_log_set_rank(int rank);
void pl_log_set_level(pl_log_level level);
pl_log_level pl_log_get_level(void);
void pl_log(pl_log_level level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#define PL_ERROR(...) pl_log(PL_LOG_ERROR, __VA_ARGS__)
#define PL_WARN(...) pl_log(PL_LOG_WARN, __VA_ARGS__)
#define PL_INFO(...) pl_log(PL_LOG_INFO, __VA_ARGS__)
#define PL_DEBUG(...) pl_log(PL_LOG_DEBUG, __VA_ARGS__)

#ifdef __cplusplus
}
#endif
#endif
