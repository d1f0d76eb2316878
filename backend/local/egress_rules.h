/* The nftables rules of a sandbox with a network policy (egress_netns.c writes them into the
 * sandbox's namespace; the doctor's egress_policy check writes them into a throw-away one, so it
 * passes exactly when a create would).
 *
 * Loopback, and the sandbox's own address on lo (LOCAL_EGRESS_SELF_ADDR, network.c), stay in the
 * sandbox; DNS to any address goes to the agent's UDP socket; every other TCP
 * connection to the agent's listener (SO_ORIGINAL_DST keeps where it was going); after that,
 * anything not to loopback (other UDP, ICMP, ...) is refused at once (EPERM) rather than lost. */
#ifndef MCPBOX_LOCAL_EGRESS_RULES_H
#define MCPBOX_LOCAL_EGRESS_RULES_H

#include "backend/local/proto.h"

/* The sandbox's non-loopback address (for AI_ADDRCONFIG), reachable only from inside. */
#define LOCAL_EGRESS_SELF_ADDR "10.0.2.15"

#define LOCAL_EGRESS_STR2(x) #x
#define LOCAL_EGRESS_STR(x) LOCAL_EGRESS_STR2(x)

/* Destinations that stay in the sandbox: loopback and its own address. */
#define LOCAL_EGRESS_INSIDE "{ 127.0.0.0/8, " LOCAL_EGRESS_SELF_ADDR " }"

#define LOCAL_EGRESS_NFT_RULES                                                                     \
    "table ip mcpbox {\n"                                                                          \
    "  chain redirect_out {\n"                                                                     \
    "    type nat hook output priority -100; policy accept;\n"                                     \
    "    ip daddr " LOCAL_EGRESS_INSIDE " return\n"                                                \
    "    udp dport 53 redirect to :" LOCAL_EGRESS_STR(AGENT_EGRESS_DNS_PORT) "\n"                  \
    "    meta l4proto tcp redirect to :" LOCAL_EGRESS_STR(AGENT_EGRESS_TCP_PORT) "\n"              \
    "  }\n"                                                                                        \
    "  chain refuse_out {\n"                                                                       \
    "    type filter hook output priority 0; policy accept;\n"                                     \
    "    ip daddr " LOCAL_EGRESS_INSIDE " accept\n"                                                \
    "    reject\n"                                                                                 \
    "  }\n"                                                                                        \
    "}\n"

#endif
