/* The CA, the leaf certificates and the upstream context of secrets over TLS (egress_tls.h). */
#include "backend/local/egress_tls.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

#include "backend/egress_policy.h"
#include "lib/base/xalloc.h"

#define LEAF_CACHE 64
#define LEAF_DAYS 30
#define CA_DAYS 3650

static pthread_mutex_t tls_lock = PTHREAD_MUTEX_INITIALIZER;
static EVP_PKEY *ca_key, *leaf_key;
static X509 *ca_cert;
static SSL_CTX *client_ctx;
static struct {
    char host[EGRESS_NAME_MAX + 1];
    SSL_CTX *ctx;
} leaves[LEAF_CACHE];
static unsigned leaves_next;

static int tls_fail(struct mcp_error *err, const char *doing)
{
    char why[256];
    ERR_error_string_n(ERR_get_error(), why, sizeof why);
    ERR_clear_error();
    return mcp_error_set(err, MCP_ERR_IO, 0, "%s: %s", doing, why);
}

static bool add_ext(X509 *cert, X509 *issuer, int nid, const char *value)
{
    X509V3_CTX v3;
    X509V3_set_ctx(&v3, issuer, cert, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &v3, nid, value);
    bool ok = ext && X509_add_ext(cert, ext, -1);
    X509_EXTENSION_free(ext);
    return ok;
}

/* A certificate for key, named cn, signed by issuer's key (itself when issuer is NULL). */
static X509 *make_cert(EVP_PKEY *key, const char *cn, X509 *issuer, EVP_PKEY *signer, long days)
{
    X509 *c = X509_new();
    unsigned char serial[16];
    RAND_bytes(serial, sizeof serial);
    serial[0] &= 0x7f;
    BIGNUM *bn = BN_bin2bn(serial, sizeof serial, NULL);
    BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(c));
    BN_free(bn);
    X509_set_version(c, 2);
    X509_gmtime_adj(X509_getm_notBefore(c), -3600);
    X509_gmtime_adj(X509_getm_notAfter(c), days * 86400L);
    X509_set_pubkey(c, key);
    X509_NAME *name = X509_get_subject_name(c);
    X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, (const unsigned char *)"mcpbox", -1, -1, 0);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
    X509_set_issuer_name(c, issuer ? X509_get_subject_name(issuer) : name);
    return c;
}

static X509 *make_ca(EVP_PKEY *key)
{
    X509 *c = make_cert(key, "mcpbox egress CA (secrets)", NULL, key, CA_DAYS);
    bool ok = add_ext(c, c, NID_basic_constraints, "critical,CA:TRUE") &&
              add_ext(c, c, NID_key_usage, "critical,keyCertSign,cRLSign") &&
              add_ext(c, c, NID_subject_key_identifier, "hash") &&
              X509_sign(c, key, EVP_sha256()) > 0;
    if (!ok)
        X509_free(c), c = NULL;
    return c;
}

/* Writes key and certificate to path (0600), never replacing one another process made first. */
static int save_ca(const char *path, EVP_PKEY *key, X509 *cert, struct mcp_error *err)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
    unlink(tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    bool ok =
        f && PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL) && PEM_write_X509(f, cert);
    if (f ? fclose(f) != 0 : (fd >= 0 && close(fd) != 0))
        ok = false;
    int linked = ok ? link(tmp, path) : -1; /* EEXIST: another process's CA wins */
    int e = errno;
    unlink(tmp);
    if (!ok || (linked < 0 && e != EEXIST))
        return mcp_error_set(err, MCP_ERR_IO, e, "writing the egress CA %s", path);
    return 0;
}

static int load_ca(const char *path, struct mcp_error *err)
{
    FILE *f = fopen(path, "re");
    struct stat st;
    if (f == NULL)
        return mcp_error_set(err, MCP_ERR_IO, errno, "reading the egress CA %s", path);
    if (fstat(fileno(f), &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 077)) {
        fclose(f);
        return mcp_error_set(err, MCP_ERR_IO, 0,
                             "the egress CA %s must be yours with mode 0600 (its key signs "
                             "certificates sandboxes trust); remove it to make a new one",
                             path);
    }
    ca_key = PEM_read_PrivateKey(f, NULL, NULL, NULL);
    ca_cert = ca_key ? PEM_read_X509(f, NULL, NULL, NULL) : NULL;
    fclose(f);
    if (ca_cert == NULL || X509_check_private_key(ca_cert, ca_key) != 1) {
        EVP_PKEY_free(ca_key), ca_key = NULL;
        return tls_fail(err, "the egress CA does not load: remove it to make a new one");
    }
    return 0;
}

/* With tls_lock held: the CA loaded, made first if there is none. */
static int ca_ready(const char *state_dir, struct mcp_error *err)
{
    if (ca_cert != NULL)
        return 0;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", state_dir, EGRESS_CA_FILE);
    if (access(path, F_OK) < 0) {
        EVP_PKEY *key = EVP_EC_gen("P-256");
        X509 *cert = key ? make_ca(key) : NULL;
        int rc = cert ? save_ca(path, key, cert, err) : tls_fail(err, "making the egress CA");
        X509_free(cert);
        EVP_PKEY_free(key);
        if (rc < 0)
            return -1;
    }
    if (leaf_key == NULL && (leaf_key = EVP_EC_gen("P-256")) == NULL)
        return tls_fail(err, "making the key of the egress certificates");
    return load_ca(path, err);
}

char *egress_tls_ca_pem(const char *state_dir, struct mcp_error *err)
{
    pthread_mutex_lock(&tls_lock);
    char *out = NULL;
    if (ca_ready(state_dir, err) == 0) {
        BIO *b = BIO_new(BIO_s_mem());
        char *data;
        PEM_write_bio_X509(b, ca_cert);
        long n = BIO_get_mem_data(b, &data);
        out = xmalloc((size_t)n + 1);
        memcpy(out, data, (size_t)n);
        out[n] = '\0';
        BIO_free(b);
    }
    pthread_mutex_unlock(&tls_lock);
    return out;
}

static SSL_CTX *leaf_ctx(const char *host, struct mcp_error *err)
{
    X509 *cert = make_cert(leaf_key, host, ca_cert, ca_key, LEAF_DAYS);
    char san[EGRESS_NAME_MAX + 8];
    snprintf(san, sizeof san, "DNS:%s", host);
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    bool ok = ctx && add_ext(cert, ca_cert, NID_subject_alt_name, san) &&
              add_ext(cert, ca_cert, NID_basic_constraints, "critical,CA:FALSE") &&
              add_ext(cert, ca_cert, NID_ext_key_usage, "serverAuth") &&
              add_ext(cert, ca_cert, NID_subject_key_identifier, "hash") &&
              add_ext(cert, ca_cert, NID_authority_key_identifier, "keyid:always") &&
              X509_sign(cert, ca_key, EVP_sha256()) > 0 && SSL_CTX_use_certificate(ctx, cert) &&
              SSL_CTX_use_PrivateKey(ctx, leaf_key) &&
              SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    X509_free(cert);
    if (!ok) {
        SSL_CTX_free(ctx);
        tls_fail(err, "issuing a certificate for an intercepted host");
        return NULL;
    }
    return ctx;
}

SSL_CTX *egress_tls_server_ctx(const char *state_dir, const char *host, struct mcp_error *err)
{
    pthread_mutex_lock(&tls_lock);
    SSL_CTX *ctx = NULL;
    for (unsigned i = 0; i < LEAF_CACHE && ctx == NULL; i++)
        if (leaves[i].ctx && strcmp(leaves[i].host, host) == 0)
            ctx = leaves[i].ctx;
    if (ctx == NULL && ca_ready(state_dir, err) == 0 && (ctx = leaf_ctx(host, err)) != NULL) {
        unsigned i = leaves_next++ % LEAF_CACHE; /* the oldest goes */
        SSL_CTX_free(leaves[i].ctx);
        snprintf(leaves[i].host, sizeof leaves[i].host, "%s", host);
        leaves[i].ctx = ctx;
    }
    if (ctx)
        SSL_CTX_up_ref(ctx);
    pthread_mutex_unlock(&tls_lock);
    return ctx;
}

SSL_CTX *egress_tls_client_ctx(struct mcp_error *err)
{
    pthread_mutex_lock(&tls_lock);
    if (client_ctx == NULL) {
        SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
        const char *extra = getenv(EGRESS_UPSTREAM_CA_ENV);
        bool ok = ctx && SSL_CTX_set_default_verify_paths(ctx) &&
                  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) &&
                  (extra == NULL || !extra[0] || SSL_CTX_load_verify_locations(ctx, extra, NULL));
        if (ok) {
            SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
            client_ctx = ctx;
        } else {
            SSL_CTX_free(ctx);
            tls_fail(err, "the trust store for upstreams (" EGRESS_UPSTREAM_CA_ENV ")");
        }
    }
    SSL_CTX *ctx = client_ctx;
    pthread_mutex_unlock(&tls_lock);
    return ctx;
}
