/* The local backend's sizes, defaults and limits. Internal to the local backend. */
#ifndef MCPBOX_LOCAL_LIMITS_H
#define MCPBOX_LOCAL_LIMITS_H

#include "backend/backend.h"

#define LOCAL_PATH_MAX 512
#define LOCAL_ID_LEN 21 /* "sbx-" + 16 hex + NUL */
#define LOCAL_UID_BASE 100000u
#define LOCAL_UID_RANGE 65536u
#define LOCAL_MAX_SLOTS 4096u
#define LOCAL_DEFAULT_MEMORY (1ull << 30)
#define LOCAL_DEFAULT_DISK (512ull << 20)
#define LOCAL_DEFAULT_PIDS 512u
#define LOCAL_DEFAULT_CPU 1.0
#define LOCAL_DEFAULT_TTL_S 3600
#define LOCAL_DEFAULT_IDLE_S 1800
#define LOCAL_MIN_MEMORY (32ull << 20)
/* Fewer processes cannot run a sandbox: its agent, the shell of a command and the few processes
 * of a small pipeline (with 1 a warm server's clone3 fails; with 3 `echo | cat` cannot fork). */
#define LOCAL_MIN_PIDS 8u
#define LOCAL_MIN_DISK (1ull << 20)
/* The agent gets its configuration (env included, as JSON) in one environment string, which
 * Linux caps at MAX_ARG_STRLEN (BACKEND_ENV_VAR_MAX); the rest of the configuration is small. */
#define LOCAL_ENV_JSON_MAX (BACKEND_ENV_VAR_MAX - 4096)
#define LOCAL_ROOT_TMPFS "size=8m,mode=755,uid=0,gid=0"
#define LOCAL_SHM_BYTES (64ull << 20)
#define LOCAL_IMAGE_NAME_MAX 64
#define LOCAL_TOUCH_INTERVAL_MS 1000
#define LOCAL_KILL_WAIT_MS 2000
#define LOCAL_CG_RETRY_MS 100
#define LOCAL_CG_RETRIES 100
#define LOCAL_CG_SWEEP_AGE_S 60

#endif
