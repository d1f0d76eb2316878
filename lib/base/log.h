/* Logging to stderr only (stdout belongs to the stdio transport).
 *
 * Each .c file defines LOG_MODULE before including this header. The level is checked before
 * any formatting. Never log from a child between clone and exec: report through a pipe. */
#ifndef MCP_BASE_LOG_H
#define MCP_BASE_LOG_H

#include <stdbool.h>

enum log_level { LOG_LEVEL_ERROR = 0, LOG_LEVEL_WARN, LOG_LEVEL_INFO, LOG_LEVEL_DEBUG };

extern enum log_level log_current_level;

void log_set_level(enum log_level level);
/* Parses "error", "warn"/"warning", "info", "debug"; returns -1 if unknown. */
int log_level_parse(const char *name, enum log_level *out);
const char *log_level_name(enum log_level level);

void log_write(enum log_level level, const char *module, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#ifndef LOG_MODULE
#define LOG_MODULE "mcpbox"
#endif

#define log_at(lvl, ...)                                                                           \
    do {                                                                                           \
        if ((lvl) <= log_current_level)                                                            \
            log_write((lvl), LOG_MODULE, __VA_ARGS__);                                             \
    } while (0)
#define log_error(...) log_at(LOG_LEVEL_ERROR, __VA_ARGS__)
#define log_warn(...)  log_at(LOG_LEVEL_WARN, __VA_ARGS__)
#define log_info(...)  log_at(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_debug(...) log_at(LOG_LEVEL_DEBUG, __VA_ARGS__)

#endif
