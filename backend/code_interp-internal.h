/* Shared by code_interp.c (contexts) and code_run.c (runs) only. */
#ifndef MCPBOX_BACKEND_CODE_INTERP_INTERNAL_H
#define MCPBOX_BACKEND_CODE_INTERP_INTERNAL_H

#include <uv.h>

#include "backend/code_frame.h"
#include "backend/code_interp.h"

#define CODE_CONTEXTS_MAX 16             /* per sandbox */
#define CODE_RESULTS_MAX (1024u * 1024u) /* result bytes kept of one run, as on opensandbox */
#define CODE_KILL_GRACE_MS 2000          /* after SIGINT, before SIGKILL */
#define CODE_STDERR_TAIL 512             /* the driver's own stderr kept for errors */
#define CODE_MAX_BYTES (BACKEND_INPUT_MAX - 64) /* code of one run, with its request header */
#define CODE_TAG_SIZE 20                        /* a run's tag: 16 hex digits */

enum code_state { CODE_STARTING, CODE_IDLE, CODE_RUNNING, CODE_DEAD };

struct code_lang {
    const char *name;    /* "python" */
    const char *program; /* what must be on PATH: "python3" */
    const char *start;   /* the shell command that runs the driver from $MCPBOX_CODE_DRIVER */
    const char *source;  /* the driver */
};

/* One run in flight (or waiting for its context to start). */
struct code_run {
    struct exec_observer obs;
    char *code; /* until sent */
    json_t *results;
    size_t results_bytes;
    int dropped;
    json_t *error;
    uint64_t started_ms;
    int64_t timeout_ms;
    bool timed_out;
    char output_file[256]; /* where the driver says the run's whole output is ("": nowhere) */
    char tag[CODE_TAG_SIZE]; /* sent with the code; the driver's s and d frames carry it back */
    bool sent;
    const char *note; /* said with the result ("a fresh default context"), or NULL */
};

struct code_prep;

struct code_ctx {
    struct code_ctx *next;
    struct backend *be;
    const struct code_lang *lang;
    char id[32]; /* "ctx-" and the driver's command id's hex ("" until it has started) */
    char *sandbox_id;
    char cmd_id[64]; /* the driver's command, once started */
    int slot;        /* its label: code:<language>:<slot>, or code:<language>:default (-1) */
    bool adopting;   /* taken up from another process: its log is being replayed */
    uint64_t adopt_left;          /* bytes of the log still to replay before it is caught up */
    char current[CODE_TAG_SIZE];  /* the tag of the run the driver is running ("": none known) */
    bool foreign;                 /* that run is not this process's (another process sent it) */
    struct code_prep *waiters[8]; /* preparations waiting for the replay */
    int nwaiters;
    struct exec_handle *h;
    struct code_frame_parser fp;
    enum code_state state;
    bool is_default;
    int64_t count;
    char died[200]; /* why it is dead */
    char err_tail[CODE_STDERR_TAIL];
    size_t err_len;
    backend_cb *create_cb; /* a create waiting for the driver's hello */
    void *create_arg;
    struct code_run *run;
    uv_timer_t timer; /* the run's timeout, then the grace before SIGKILL */
    int refs;
};

/* code_interp.c */
/* slot: the label's number (-1 for the language's default context). */
struct code_ctx *code_ctx_start(struct backend *be, const char *sandbox_id,
                                const struct code_lang *lang, int slot, struct mcp_error *err);
/* A context object for a driver command another process started (not yet listed). */
struct code_ctx *code_ctx_new(struct backend *be, const char *sandbox_id,
                              const struct code_lang *lang, int slot);
void code_ctx_link(struct code_ctx *c);
/* The driver watch's observer (output into the frame parser, the end). */
struct exec_observer code_ctx_observer(struct code_ctx *c);
/* Why a driver that ended is gone, from its final status. */
void code_death_reason(json_t *status, char *out, size_t size);
struct code_ctx *code_ctx_by_cmd(struct backend *be, const char *sandbox_id, const char *cmd_id);
size_t code_ctx_count(struct backend *be, const char *sandbox_id);
/* The lowest label number no context of this sandbox known here uses, or -1. */
int code_ctx_free_slot(struct backend *be, const char *sandbox_id);
void code_ctx_unref(struct code_ctx *c);
/* Marks c dead for why (finishing a run in flight as lost) and kills its driver. */
void code_ctx_kill(struct code_ctx *c, const char *why);
void code_ctx_signal(struct code_ctx *c, int sig);
const struct code_lang *code_lang_find(const char *name, struct mcp_error *err);
/* The live default context of a language for runs without a context_id, or NULL (*dead: the
 * default that died, if any). */
struct code_ctx *code_ctx_default(struct backend *be, const char *sandbox_id,
                                  const struct code_lang *lang, struct code_ctx **dead);
struct code_ctx *code_ctx_by_id(struct backend *be, const char *sandbox_id, const char *id);
/* Drops c from the list (it is freed once nothing else holds it). */
void code_ctx_forget(struct code_ctx *c);

/* code_adopt.c: contexts started by another mcpbox process, found by label and taken up (their
 * logs replayed through the parser), before an operation goes on. code_prep returns false when
 * everything it names is known here already (then is not called: go on at once); else true, and
 * then(arg, be, sandbox_id) comes later, once every driver it looked for is known or not found. */
typedef void code_prep_fn(void *arg, struct backend *be, const char *sandbox_id);
/* what: a context id, or NULL with language (NULL: every language) for the default context
 * (all false) or every context (all true). */
bool code_prep(struct backend *be, const char *sandbox_id, const char *context_id,
               const struct code_lang *lang, bool all, code_prep_fn *then, void *arg);
/* The replay of c has caught up (or c died meanwhile): its waiting preparations go on. */
void code_adopt_settled(struct code_ctx *c);
/* This process killed (or deleted) the context of cmd_id: never take it up again. */
void code_adopt_deleted(const char *cmd_id);
/* The label of a context: code:<language>:<slot|default>. */
void code_label(const struct code_lang *lang, int slot, char *out, size_t size);
/* Context id <-> the driver's command id; false for an id that cannot be one. */
bool code_cmd_of_ctx(const char *ctx_id, char *out, size_t size);
void code_ctx_of_cmd(const char *cmd_id, char *out, size_t size);

/* code_run.c */
extern const struct code_frame_sink code_frame_sink_of_ctx; /* arg: the context */
/* Sends the run's code to an idle context. */
void code_run_send(struct code_ctx *c);
/* Ends the run in flight with status (and error, NULL: the run's own) and frees it. */
void code_run_finish(struct code_ctx *c, const char *status, const struct mcp_error *err);
void code_run_free(struct code_run *r);

#endif
