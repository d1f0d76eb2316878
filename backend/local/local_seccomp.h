/* The sandbox seccomp filter (seccomp_profile.c). Internal to the local backend. */
#ifndef MCPBOX_LOCAL_SECCOMP_H
#define MCPBOX_LOCAL_SECCOMP_H

#include <linux/filter.h>
#include <stdint.h>

#include "lib/base/error.h"

/* ---- seccomp (seccomp_profile.c) ---- */
struct local_seccomp {
    struct sock_filter *filter; /* owned */
    unsigned short len;
};
int local_seccomp_build(struct local_seccomp *out, struct mcp_error *err);
void local_seccomp_free(struct local_seccomp *s);

/* The profile's tables, also read by the test that checks the compiled program against one
 * libseccomp builds from the same tables (tests/local/unit/test_seccomp_profile.c). */
#define LOCAL_SECCOMP_HIGHEST_KNOWN 469 /* file_setattr (Linux 6.17) */
#define LOCAL_SECCOMP_X32_BIT 0x40000000u
/* NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET */
#define LOCAL_SECCOMP_CLONE_NS_FLAGS 0x7E020000u
#define LOCAL_SECCOMP_SETID_MODE 06000u
#define LOCAL_SECCOMP_AF_ALG 38
#define LOCAL_SECCOMP_AF_VSOCK 40
struct local_seccomp_call {
    const char *name;
    int nr;       /* x86_64 number if libseccomp cannot name it, else -1 */
    unsigned arg; /* the argument checked (the mode of the chmod calls) */
};
extern const char *const local_seccomp_allowed[];
extern const size_t local_seccomp_n_allowed;
extern const struct local_seccomp_call local_seccomp_allowed_by_number[];
extern const size_t local_seccomp_n_allowed_by_number;
extern const struct local_seccomp_call local_seccomp_chmods[];
extern const size_t local_seccomp_n_chmods;
extern const uint32_t local_seccomp_personas[];
extern const size_t local_seccomp_n_personas;
/* The x86_64 number of a syscall: libseccomp's, else fallback (-1: unknown). */
int local_seccomp_nr(const char *name, int fallback);

#endif
