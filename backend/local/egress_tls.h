/* Secrets at the egress boundary, TLS (OpenSSL): the CA mcpbox makes and keeps to terminate a
 * sandbox's TLS to the hosts its bound secrets go to, the certificates it issues for them, and
 * the context that verifies the real upstream. Unbound hosts are never intercepted
 * (egress_intercept.h); docs/secrets.md has the threat model. Thread-safe. */
#ifndef MCPBOX_LOCAL_EGRESS_TLS_H
#define MCPBOX_LOCAL_EGRESS_TLS_H

#include <openssl/ssl.h>

#include "lib/base/error.h"

#define EGRESS_CA_FILE "secrets-ca.pem" /* in the state dir, 0600: the key and the certificate */
/* The person's option: a PEM file of CAs the proxy trusts for upstreams besides the host's
 * trust store (a private registry's CA; the tests' upstream CA). Never seen by a sandbox. */
#define EGRESS_UPSTREAM_CA_ENV "MCPBOX_EGRESS_UPSTREAM_CA"

/* The CA's certificate (PEM, new string), made with its key on first use. */
char *egress_tls_ca_pem(const char *state_dir, struct mcp_error *err);
/* A server context presenting a certificate for host issued by the CA (cached per host); a
 * new reference (SSL_CTX_free). NULL with err. */
SSL_CTX *egress_tls_server_ctx(const char *state_dir, const char *host, struct mcp_error *err);
/* The client context for upstreams: peer verified against the host's trust store (and
 * EGRESS_UPSTREAM_CA_ENV); the caller sets the name to check (SSL_set1_host). Borrowed. */
SSL_CTX *egress_tls_client_ctx(struct mcp_error *err);

#endif
