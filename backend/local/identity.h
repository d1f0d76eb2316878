/* Which host uids and gids a local sandbox of this server runs as (docs/local-backend.md,
 * "Identity"). Decided once per backend from who runs mcpbox, never per sandbox:
 *
 *  - LOCAL_ID_SLICES (mcpbox runs as root): every sandbox gets its own 65536-id slice,
 *    sandbox uid 0..65535 -> host 100000 + 65536*slot + (0..65535); the slot is leased
 *    host-wide (uid_slots.c), so two state directories never share host uids.
 *  - LOCAL_ID_SUBID (an ordinary user with /etc/subuid and /etc/subgid ranges and Debian's
 *    newuidmap/newgidmap): ONE mapping shared by all of the user's sandboxes, sandbox uid
 *    0..N-1 -> the user's first subordinate range (N = min(65536, its size)), as rootless podman
 *    does; sandboxes are kept apart by their namespaces, seccomp, no capabilities and cgroups.
 *    Sandbox root is neither host root nor the user.
 *  - LOCAL_ID_SINGLE (an ordinary user without subordinate ids, or without newuidmap): sandbox
 *    root is the user's own uid (0 <uid> 1), as bubblewrap does. Weaker, and reported as such
 *    (doctor, get_sandbox).
 *
 * OCI image layers are unpacked for "the mapping of this server" (local_identity_detect): one
 * unpacked copy serves every sandbox in SUBID and SINGLE mode. */
#ifndef MCPBOX_LOCAL_IDENTITY_H
#define MCPBOX_LOCAL_IDENTITY_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "lib/base/error.h"

#define LOCAL_ID_RANGE_MAX 65536u
#define LOCAL_NEWUIDMAP "/usr/bin/newuidmap"
#define LOCAL_NEWGIDMAP "/usr/bin/newgidmap"

enum local_id_mode { LOCAL_ID_SLICES, LOCAL_ID_SUBID, LOCAL_ID_SINGLE };

struct local_identity {
    enum local_id_mode mode;
    /* SUBID/SINGLE: the one mapping (sandbox id 0 -> *_base, *_count ids). SLICES: the base
     * of slot 0 and the slice size; local_identity_root_uid gives a slot's base. */
    uint32_t uid_base, uid_count;
    uint32_t gid_base, gid_count;
    char why[256]; /* SINGLE: why no subordinate ids are used (what to do about it) */
};

/* The mapping a sandbox of a server run by this euid gets. Never fails: without subordinate
 * ids it is LOCAL_ID_SINGLE with `why` saying what is missing. */
void local_identity_detect(struct local_identity *id);
/* The first subordinate range of `user` (name) or `uid` in a /etc/subuid-style file; 0 when
 * found (start, count), -1 when there is none. */
int local_subid_range(const char *file, const char *user, uint32_t uid, uint32_t *start,
                      uint32_t *count);
/* Host uid (or gid) that sandbox id 0 maps to, for a sandbox holding `slot` (SLICES only). */
uint32_t local_identity_root_uid(const struct local_identity *id, uint32_t slot);
uint32_t local_identity_root_gid(const struct local_identity *id, uint32_t slot);
/* Short name for reports: "per-sandbox uid range", "shared subordinate ids", "single uid". */
const char *local_identity_name(enum local_id_mode m);
/* {mode, uid_map, gid_map, commands_run_as, note} for get_sandbox / diagnostics (new
 * reference): the maps the kernel was given (with the person's own ids when `person`, the
 * local_identity_person_id of a sandbox with a writable host mount, is not 0) and who the
 * commands run as (run_uid/run_gid inside, and on the host). */
json_t *local_identity_json(const struct local_identity *id, uint32_t slot, uint32_t person,
                            uint32_t run_uid, uint32_t run_gid);
/* Writes text to /proc/<pid>/<file> (uid_map, gid_map, setgroups) in one write, as the kernel
 * wants it; the error names the file. */
int local_proc_write(int pid, const char *file, const char *text, struct mcp_error *err);
/* Writes the uid and gid maps of a freshly cloned child (before it is released): directly as
 * root, through newuidmap/newgidmap for SUBID, "deny" setgroups + 0 <uid> 1 for SINGLE. */
int local_identity_write_maps(const struct local_identity *id, uint32_t slot, int pid,
                              struct mcp_error *err);
/* LOCAL_ID_SUBID only: the sandbox id at which a sandbox with a writable host mount also maps
 * the user's own uid and gid (never 0: sandbox root stays a subordinate id). The user's files
 * appear as owned by it, and that sandbox's commands run as it, so what they write on the host
 * belongs to the user (docs/security.md, "Host directories"). */
uint32_t local_identity_person_id(const struct local_identity *id);
/* The maps of local_identity_write_maps plus "<person_id> <euid> 1" (and the egid) cut out of
 * the subordinate range: three extents, through newuidmap/newgidmap. */
int local_identity_write_maps_person(const struct local_identity *id, int pid,
                                     struct mcp_error *err);

#endif
