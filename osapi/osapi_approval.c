/* Approvals for the OpenSandbox API (issue 38): its callers are programs, and it has no way to
 * ask the person, so the person's settings decide (backend/approval_rules.h): "ask" means what
 * they chose for "cannot ask" (by default, widening egress is refused). */
#include "osapi/osapi.h"
#include "osapi/osapi-internal.h"

#include "backend/approval_rules.h"
#include "lib/base/cleanup.h"
#include "lib/base/xalloc.h"

/* One server per process; set once by the composition root before serving. */
static const struct approval_settings *person_settings;

void osapi_approval_set(const struct approval_settings *settings)
{
    person_settings = settings;
}

int osapi_approval_egress(const struct egress_policy *policy, bool full_network,
                          struct mcp_error *err)
{
    if (person_settings == NULL)
        return 0;
    json_t *beyond = approval_egress_beyond(person_settings, policy, full_network);
    size_t n = json_array_size(beyond);
    cleanup_free char *names = n ? json_dumps(beyond, JSON_COMPACT) : NULL;
    json_decref(beyond);
    if (n == 0)
        return 0;
    cleanup_free char *what = xasprintf("egress to %s (beyond the names the person allowed; "
                                        "\"*\" is every address)",
                                        names);
    return approval_unattended(person_settings, APPROVAL_EGRESS, what, err) ? 0 : -1;
}
