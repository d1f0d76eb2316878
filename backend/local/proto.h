/* The mcpbox <-> sandbox agent protocol (shared by the agent and the backend).
 *
 * Transport: a unix stream socket created by mcpbox at <runtime_dir>/<id>/agent.sock
 * before the sandbox's root is pivoted (so the sandbox cannot see it). Every message is a frame:
 * a 4-byte big-endian length followed by that many bytes of one JSON object.
 *
 * Requests (mcpbox -> agent): {"v":1, "id":<uint>, "op":"<name>", ...args}
 * Responses (agent -> mcpbox): {"id":<same>, "ok":true, ...result}
 *                          or {"id":<same>, "ok":false, "error":{"code":"not_found"|...,
 *                              "errno":<int>, "message":"..."}}
 * Events (agent -> mcpbox, for commands started with "watch":true on this connection, and for
 * those it asked cmd_watch about):
 *   {"ev":"output", "cmd":"<command id>", "stream":"stdout"|"stderr", "data":"<base64>"}
 *   {"ev":"exit", "cmd":"<command id>", ...status as in cmd_status without output}
 * Binary data (file contents, stdin, output) travels as standard base64.
 * docs/local-backend.md lists every op with its arguments and results.
 */
#ifndef MCPBOX_LOCAL_PROTO_H
#define MCPBOX_LOCAL_PROTO_H

#include <stddef.h>

#define AGENT_PROTO_VERSION 1
#define AGENT_FRAME_MAX (96u * 1024u * 1024u)   /* one frame, either direction */
#define AGENT_IO_MAX (32u * 1024u * 1024u)      /* bytes in one file read/write */
#define AGENT_LISTEN_FD 3                       /* fd the agent finds its listening socket on */
#define AGENT_LOGDIR_FD 4                       /* fd of its private command-log directory */
#define AGENT_EXE_FD 5                          /* the sealed memfd the agent runs from */
/* Egress by policy: the agent's sockets on 127.0.0.1 in the sandbox (above the ephemeral range,
 * so no autobind takes them), where nftables redirects outbound TCP and DNS. */
#define AGENT_EGRESS_TCP_PORT 65080
/* Where the agent writes the egress CA for secrets over TLS (agent_egress_trust) */
#define AGENT_EGRESS_TRUST_DIR "/tmp/.mcpbox-egress"
#define AGENT_EGRESS_DNS_PORT 65053
/* exec's "label": 1 to AGENT_LABEL_MAX bytes of [A-Za-z0-9_.:-] (cmd_find looks it up). */
#define AGENT_LABEL_MAX 64
static inline int agent_label_valid(const char *s)
{
    size_t n = 0;
    for (; s && s[n]; n++) {
        char ch = s[n];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '_' || ch == '.' || ch == ':' || ch == '-'))
            return 0;
    }
    return n > 0 && n <= AGENT_LABEL_MAX;
}
#define AGENT_CONFIG_ENV "MCPBOX_AGENT_CONFIG"   /* JSON: expires_at_ms, idle_timeout_s, workdir, env */

#endif
