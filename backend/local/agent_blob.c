/* The agent binary, embedded at build time (mcpbox stays one self-contained file) and run from a
 * sealed memfd: /proc/1/exe inside a sandbox then names an immutable anonymous file, never a
 * host binary the sandbox could overwrite (CVE-2019-5736). */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend/local/local_agent.h"

#ifndef MCPBOX_AGENT_PATH
#error "MCPBOX_AGENT_PATH must name the built agent binary"
#endif

__asm__(".section .rodata\n"
        ".balign 16\n"
        ".global local_agent_blob\n"
        "local_agent_blob:\n"
        ".incbin \"" MCPBOX_AGENT_PATH "\"\n"
        ".global local_agent_blob_end\n"
        "local_agent_blob_end:\n"
        ".byte 0\n"
        ".previous\n");

/* The blob is read once, here. Writing it faulted its ~1 MiB of pages into mcpbox's resident
 * set, where they would stay for the life of the server: drop the pages that lie wholly inside
 * it (read-only file pages, so nothing is lost; a later read would fault them in again). */
static void local_agent_blob_release(void)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t start = ((uintptr_t)local_agent_blob + page - 1) & ~(page - 1);
    uintptr_t end = (uintptr_t)local_agent_blob_end & ~(page - 1);
    if (end > start)
        (void)madvise((void *)start, end - start, MADV_DONTNEED);
}

int local_agent_memfd(struct mcp_error *err)
{
    int fd = memfd_create("mcpbox-agent", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return mcp_error_set(err, MCP_ERR_IO, errno, "memfd_create");
    size_t len = (size_t)(local_agent_blob_end - local_agent_blob), off = 0;
    while (off < len) {
        ssize_t n = write(fd, local_agent_blob + off, len - off);
        if (n <= 0) {
            close(fd);
            return mcp_error_set(err, MCP_ERR_IO, errno, "writing the agent memfd failed");
        }
        off += (size_t)n;
    }
    local_agent_blob_release();
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0) {
        close(fd);
        return mcp_error_set(err, MCP_ERR_IO, errno, "sealing the agent memfd");
    }
    return fd;
}
