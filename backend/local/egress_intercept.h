/* Secrets at the egress boundary, the connections: a connection from a sandbox to a host one of
 * its bound secrets may go to is not spliced (egress_proxy.c) but copied by a thread of its own,
 * which injects the secrets into the request (egress_inject.c) and masks their values in the
 * reply. Blocking work (reading a secret from a file or a command, later TLS) stays off the loop. */
#ifndef MCPBOX_LOCAL_EGRESS_INTERCEPT_H
#define MCPBOX_LOCAL_EGRESS_INTERCEPT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/egress_policy.h"

#define EGRESS_INTERCEPT_MAX 256        /* connections intercepted at once (all sandboxes) */
#define EGRESS_INTERCEPT_PER_SANDBOX 64 /* ... and of one sandbox, so it cannot take them all */

/* What one sandbox's intercepted connections share: how many run (its proxy holds one
 * reference, each running connection another). */
struct egress_intercept_share;
struct egress_intercept_share *egress_intercept_share_new(void);
void egress_intercept_share_unref(struct egress_intercept_share *s); /* NULL-safe */

struct egress_intercept {
    int down, up;  /* the sandbox's socket, the connected outside one (owned) */
    uint8_t *head; /* bytes already read from the sandbox (owned, may be NULL) */
    size_t head_len;
    json_t *defs; /* the secrets' definitions (secrets.h) with "name" (owned) */
    char host[EGRESS_NAME_MAX + 1];
    char sandbox_id[64];
    char state_dir[4096]; /* where the egress CA is kept (egress_tls.h) */
    struct egress_intercept_share *share; /* the sandbox's (borrowed; the start refs it) */
};

/* Takes ic (and all it owns) to a thread of its own; -1 (everything closed and freed) when
 * EGRESS_INTERCEPT_MAX (or EGRESS_INTERCEPT_PER_SANDBOX of its share) are running or no thread
 * can start. */
int egress_intercept_start(struct egress_intercept *ic);

#endif
