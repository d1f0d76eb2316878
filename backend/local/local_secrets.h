/* Secrets bound to a local sandbox (backend/secrets.h, docs/secrets.md): binding at create, the
 * definitions the egress proxy injects, and what diagnose_sandbox shows of their use. */
#ifndef MCPBOX_LOCAL_SECRETS_H
#define MCPBOX_LOCAL_SECRETS_H

#include <jansson.h>

#include "backend/backend.h"
#include "backend/egress_policy.h"

struct local_backend;
struct lsbx;

/* What binding adds to a create's spec: the policy with the secrets' hosts allowed, the env with
 * their placeholders. Released with local_secrets_unbind. */
struct local_bound {
    struct sandbox_spec spec; /* a copy of the caller's with policy and env replaced */
    struct egress_policy *policy;
    json_t *env;
};

/* Binds spec->secrets: every name must be the person's (an unknown one is refused with the
 * names there are); 0 with *out filled (out->spec is what create uses), -1 with err. A spec
 * without secrets: out->spec is a plain copy. The one place binding happens, so a later step
 * (asking the person) can wrap it. */
int local_secrets_bind(struct local_backend *lb, const struct sandbox_spec *spec,
                       struct local_bound *out, struct mcp_error *err);
void local_secrets_unbind(struct local_bound *b);
/* The agent's config text with "egress_ca" (the egress CA's certificate, egress_tls.h) when spec
 * binds secrets; takes cfg, returns the new text (cfg itself when nothing changes). */
char *local_secrets_agent_config(struct local_backend *lb, const struct sandbox_spec *spec,
                                 char *cfg);

/* For the proxy: the definitions (with "name") of the secrets bound to a sandbox whose record
 * binds names that may go to host. New array; empty when none. Reads the person's file. */
json_t *local_secrets_for_host(const char *state_dir, json_t *bound_names, const char *host);

/* The bind_secrets operation (backend.h): update_sandbox's secrets. */
int local_bind_secrets(struct backend *be, const char *id, json_t *names, backend_cb *cb, void *arg,
                       struct mcp_error *err);
/* A command's env: env (borrowed, may be NULL) with MCPBOX_SECRET_<NAME> added for each
 * placeholder secret bound to sb now (a binding made after create too), unless env sets it.
 * New reference, or NULL when env is NULL and nothing is bound. Reads the person's file. */
json_t *local_secrets_exec_env(struct lsbx *sb, json_t *env);
/* The egress CA's certificate (PEM, borrowed) for a spec whose egress passes the proxy (it binds
 * secrets, has credentialProxy or a network_policy), else NULL. */
const char *local_secrets_ca(struct local_backend *lb, const struct sandbox_spec *spec);
/* The backend's host_check: the doctor's report, and "secrets": the names create_sandbox may
 * bind, their hosts and how they are sent (secrets_describe: never a value). */
json_t *local_host_check(const char *state_dir);
/* diagnose_sandbox's "secrets": {bound: [{name, hosts, defined}], used: {name: {host: {count,
 * last_time}}}} (what this process's proxy injected), added to res when record binds any. */
void local_secrets_diagnose(struct local_backend *lb, const char *id, json_t *record, json_t *res);

#endif
