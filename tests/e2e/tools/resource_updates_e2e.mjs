// resources/subscribe is honoured (issue 39 item 5): a client of the official TypeScript SDK
// subscribes to a sandbox file (sandbox://ID/PATH) and receives notifications/resources/updated
// after the tool calls that may change it: write_file, a command that writes, a background
// command seen ending by get_command, destroy_sandbox. Read-only calls send none, nor does a call
// after unsubscribing, nor is a client of another server on the same state directory (another
// owner) told. Two owners on one server: tests/unit/mcp/test_resource_updates.c.
//
//   node resource_updates_e2e.mjs --mcpbox BIN
// Exits 77 when this host cannot create local sandboxes.
import fs from 'node:fs';
import {
    check, connect, ok, parseArgs, requireBinary, runCases, SKIP, sleep, startHttpServer,
    tempStateDir, text, call,
} from './tools_lib.mjs';
import { sdkImport } from '../sdk/lib.mjs';

const { ResourceUpdatedNotificationSchema } = await sdkImport('types.js');
const args = parseArgs(process.argv.slice(2));
const bin = requireBinary(args.mcpbox);
const stateDir = tempStateDir('resource-updates');
// A over stdio; B another owner (a token) on an HTTP server sharing the state directory.
const A = await connect('stdio', { bin, stateDir, name: 'A' });
const tokenB = `resource-updates-${process.pid}-${Math.random().toString(36).slice(2)}`;
const serverB = await startHttpServer(bin, ['--token', tokenB], { stateDir });
const B = await connect('http', { url: serverB.url, name: 'B',
                                  headers: { Authorization: `Bearer ${tokenB}` } });

async function finish(code) {
    for (const f of [() => A.close(), () => B.close(), () => serverB.stop()]) {
        try { await f(); } catch { /* best effort */ }
    }
    fs.rmSync(stateDir, { recursive: true, force: true });
    process.exit(code);
}

const seen = { A: [], B: [] };
A.client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => seen.A.push(n.params.uri));
B.client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => seen.B.push(n.params.uri));

const first = await call(A, 'create_sandbox', { metadata: ['test=resource-updates'] });
if (first.isError) {
    console.log(`# SKIP: create_sandbox failed: ${text(first)}`);
    await finish(SKIP);
}
const id = first.structuredContent.sandbox_id;
await ok(A, 'write_file', { sandbox_id: id, path: 'w.txt', content: 'one\n' });
const pwd = (await ok(A, 'run_command', { sandbox_id: id, command: 'pwd' })).stdout.trim();
const uri = `sandbox://${id}${pwd}/w.txt`;

/* Waits up to ms for an update of uri to client who (its list is emptied first by the caller). */
async function updated(who, ms = 5000) {
    for (const end = Date.now() + ms; Date.now() < end; await sleep(20))
        if (seen[who].includes(uri)) return true;
    return false;
}
const quiet = async (who, ms = 700) => { await sleep(ms); return !seen[who].includes(uri); };
const reset = () => { seen.A.length = 0; seen.B.length = 0; };

const cases = [
    ['the server advertises resources.subscribe', async () => {
        check(A.client.getServerCapabilities().resources?.subscribe === true, 'subscribe advertised');
        check((await A.client.readResource({ uri })).contents[0].text === 'one\n', 'the file reads');
        await A.client.subscribeResource({ uri });
        await B.client.subscribeResource({ uri }); // another owner, another server: told nothing
    }],
    ['write_file: an update', async () => {
        reset();
        await ok(A, 'write_file', { sandbox_id: id, path: 'w.txt', content: 'two\n' });
        check(await updated('A'), `no update after write_file (got ${JSON.stringify(seen.A)})`);
        check((await A.client.readResource({ uri })).contents[0].text === 'two\n', 'new content');
    }],
    ['a command that writes: an update', async () => {
        reset();
        await ok(A, 'run_command', { sandbox_id: id, command: 'echo three >> w.txt' });
        check(await updated('A'), 'no update after run_command');
    }],
    ['a background command: an update when get_command sees it end', async () => {
        const bg = await ok(A, 'run_command', { sandbox_id: id, command: 'sleep 1; echo four >> w.txt', background: true });
        reset();
        const g = await ok(A, 'get_command', { sandbox_id: id, command_id: bg.command_id, wait_seconds: 10 });
        check(g.status === 'exited', JSON.stringify(g));
        check(await updated('A'), 'no update after the background command ended');
    }],
    ['read-only calls: none', async () => {
        reset();
        await ok(A, 'read_file', { sandbox_id: id, path: 'w.txt' });
        await ok(A, 'list_files', { sandbox_id: id });
        await ok(A, 'get_sandbox', { sandbox_id: id });
        check(await quiet('A'), `an update after read-only calls: ${JSON.stringify(seen.A)}`);
    }],
    ["another owner's subscription to the same URI: never told", async () => {
        check(seen.B.length === 0, `B was told: ${JSON.stringify(seen.B)}`);
    }],
    ['after unsubscribe: none', async () => {
        await A.client.unsubscribeResource({ uri });
        reset();
        await ok(A, 'write_file', { sandbox_id: id, path: 'w.txt', content: 'five\n' });
        check(await quiet('A'), 'an update after unsubscribing');
        await A.client.subscribeResource({ uri });
    }],
    ['destroy_sandbox: an update (the file is gone)', async () => {
        reset();
        await ok(A, 'destroy_sandbox', { sandbox_id: id });
        check(await updated('A'), 'no update after destroy_sandbox');
        check(seen.B.length === 0, `B was told: ${JSON.stringify(seen.B)}`);
    }],
];

await finish(await runCases(cases) ? 1 : 0);
