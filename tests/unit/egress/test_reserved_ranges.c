/* The ranges egress never reaches (backend/local/network.c): every block of the IANA
 * special-purpose address registries, IPv4 and IPv6, is refused at its first and last address,
 * and the public addresses just outside them stay reachable. */
#include <arpa/inet.h>

#include "backend/local/image/addr_blocked.h"
#include "backend/local/local_limits.h"
#include "test.h"

static bool v4(const char *text)
{
    struct in_addr a;
    if (inet_pton(AF_INET, text, &a) != 1)
        TEST_FAIL("bad test address %s", text);
    return local_addr_blocked(a);
}

static bool v6(const char *text)
{
    struct in6_addr a;
    if (inet_pton(AF_INET6, text, &a) != 1)
        TEST_FAIL("bad test address %s", text);
    return local_addr6_blocked(&a);
}

/* First and last address of each registry block (IPv4 Special-Purpose Address Registry). */
static const char *const reserved4[] = {
    "0.0.0.0",         "0.255.255.255",   "10.0.0.0",        "10.255.255.255",  "100.64.0.0",
    "100.127.255.255", "127.0.0.1",       "127.255.255.255", "169.254.0.0",     "169.254.169.254",
    "169.254.255.255", "172.16.0.0",      "172.31.255.255",  "192.0.0.0",       "192.0.0.9",
    "192.0.0.170",     "192.0.0.255",     "192.0.2.0",       "192.0.2.255",     "192.31.196.0",
    "192.31.196.255",  "192.52.193.0",    "192.52.193.255",  "192.88.99.0",     "192.88.99.255",
    "192.168.0.0",     "192.168.255.255", "192.175.48.0",    "192.175.48.255",  "198.18.0.0",
    "198.19.255.255",  "198.51.100.0",    "198.51.100.7",    "198.51.100.255",  "203.0.113.0",
    "203.0.113.7",     "203.0.113.255",   "224.0.0.1",       "239.255.255.255", "240.0.0.0",
    "255.255.255.255",
};

/* Public neighbours of those blocks. */
static const char *const public4[] = {
    "1.0.0.0",         "9.255.255.255",   "11.0.0.0",        "100.63.255.255", "100.128.0.0",
    "126.255.255.255", "128.0.0.0",       "169.253.255.255", "169.255.0.0",    "172.15.255.255",
    "172.32.0.0",      "191.255.255.255", "192.0.1.0",       "192.0.3.0",      "192.31.195.255",
    "192.31.197.0",    "192.52.192.255",  "192.52.194.0",    "192.88.98.255",  "192.88.100.0",
    "192.167.255.255", "192.169.0.0",     "192.175.47.255",  "192.175.49.0",   "198.17.255.255",
    "198.20.0.0",      "198.51.99.255",   "198.51.101.0",    "203.0.112.255",  "203.0.114.0",
    "223.255.255.255", "8.8.8.8",
};

static const char *const reserved6[] = {
    "::",
    "::1",
    "::ffff:127.0.0.1",
    "::ffff:8.8.8.8",
    "64:ff9b::a00:1",
    "64:ff9b::808:808",
    "64:ff9b:1::1",
    "100::1",
    "100::ffff:ffff:ffff:ffff",
    "100:0:0:1::1",
    "2001::1",
    "2001:1::1",
    "2001:2::1",
    "2001:3::1",
    "2001:4:112::1",
    "2001:10::1",
    "2001:20::1",
    "2001:30::1",
    "2001:1ff:ffff::1",
    "2001:db8::1",
    "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff",
    "2002::1",
    "2002:c000:201::1",
    "2620:4f:8000::1",
    "3fff::1",
    "3fff:fff:ffff::1",
    "5f00::1",
    "fc00::1",
    "fd12:3456::1",
    "fe80::1",
    "febf:ffff::1",
    "fec0::1",
    "ff02::1",
    "ff0e::1",
};

static const char *const public6[] = {
    "2001:200::1",      "2001:4860:4860::8888",
    "2001:db7:ffff::1", "2001:db9::1",
    "2003::1",          "2606:4700::1111",
    "2620:4f:7fff::1",  "2620:4f:8001::1",
    "3ffe:ffff::1",     "3fff:1000::1",
    "5eff::1",          "5f01::1",
    "64:ff9b:2::1",     "fbff::1",
};

TEST(ipv4_registry_blocks_are_refused)
{
    for (size_t i = 0; i < sizeof reserved4 / sizeof reserved4[0]; i++)
        if (!v4(reserved4[i]))
            TEST_FAIL("%s is reachable", reserved4[i]);
}

TEST(ipv4_public_neighbours_stay_reachable)
{
    for (size_t i = 0; i < sizeof public4 / sizeof public4[0]; i++)
        if (v4(public4[i]))
            TEST_FAIL("%s is refused", public4[i]);
}

TEST(ipv6_registry_blocks_are_refused)
{
    for (size_t i = 0; i < sizeof reserved6 / sizeof reserved6[0]; i++)
        if (!v6(reserved6[i]))
            TEST_FAIL("%s is reachable", reserved6[i]);
}

TEST(ipv6_public_neighbours_stay_reachable)
{
    for (size_t i = 0; i < sizeof public6 / sizeof public6[0]; i++)
        if (v6(public6[i]))
            TEST_FAIL("%s is refused", public6[i]);
}

int main(void)
{
    RUN(ipv4_registry_blocks_are_refused);
    RUN(ipv4_public_neighbours_stay_reachable);
    RUN(ipv6_registry_blocks_are_refused);
    RUN(ipv6_public_neighbours_stay_reachable);
    return test_done();
}
