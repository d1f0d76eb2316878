// Idle memory of `mcpbox serve` (stdio and HTTP), read from /proc/PID/status (VmRSS).
// Reports the figures; asserts only a generous bound (the 4 MiB goal is measured by the
// benchmark in tests/bench/mcp, not asserted here). Sanitizer builds get a much larger bound.
//   node idle_rss.mjs --mcpbox build/mcpbox [--sanitized]
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { test } from 'node:test';
import { parseArgs, requireBinary, sleep, startHttpServer, tempStateDir, waitFor } from './lib.mjs';

const args = parseArgs(process.argv.slice(2));
const BIN = requireBinary(args.mcpbox);
const BOUND_KIB = args.sanitized ? 256 * 1024 : 16 * 1024;
const SETTLE_MS = 500;

function rssKiB(pid, field = 'VmRSS') {
    const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    assert.ok(m, `${field} present`);
    return Number(m[1]);
}

test('idle stdio server', async () => {
    const child = spawn(BIN, ['serve', '--state-dir', tempStateDir('rss')], { stdio: ['pipe', 'pipe', 'pipe'], env: process.env });
    let out = '';
    child.stdout.on('data', (d) => { out += d; });
    await sleep(SETTLE_MS);
    assert.equal(child.exitCode, null, 'still running while idle');
    const idle = rssKiB(child.pid);
    const anon = rssKiB(child.pid, 'RssAnon');
    child.stdin.write(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {
        protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'rss', version: '1' } } }) + '\n');
    child.stdin.write('{"jsonrpc":"2.0","method":"notifications/initialized"}\n');
    child.stdin.write('{"jsonrpc":"2.0","id":2,"method":"tools/list"}\n');
    await waitFor(() => out.includes('"id":2'), 10000, 'tools/list reply');
    await sleep(SETTLE_MS);
    const after = rssKiB(child.pid);
    console.log(`# idle RSS stdio: ${idle} KiB at start (anonymous ${anon} KiB), ${after} KiB after initialize + tools/list (bound ${BOUND_KIB} KiB)`);
    child.stdin.end();
    await new Promise((r) => child.on('exit', r));
    assert.ok(idle < BOUND_KIB && after < BOUND_KIB, `RSS ${idle}/${after} KiB under ${BOUND_KIB} KiB`);
});

test('idle http server', async () => {
    const srv = await startHttpServer(BIN, []);
    await sleep(SETTLE_MS);
    const idle = rssKiB(srv.child.pid);
    console.log(`# idle RSS http: ${idle} KiB (anonymous ${rssKiB(srv.child.pid, 'RssAnon')} KiB; bound ${BOUND_KIB} KiB)`);
    await srv.stop();
    assert.ok(idle < BOUND_KIB, `RSS ${idle} KiB under ${BOUND_KIB} KiB`);
});
