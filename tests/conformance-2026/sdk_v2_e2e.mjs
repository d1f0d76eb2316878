// Every sandbox tool end to end through the official TypeScript SDK v2 client
// (@modelcontextprotocol/client), which negotiates MCP 2026-07-28 (server/discover, no
// initialize, per-request _meta) with mcpbox, over stdio or Streamable HTTP, on the local
// backend. Also: a 2025-11-25 client (SDK v1) on the same HTTP server at the same time, the
// sandbox it made invisible to the stateless client (other owner), progress on a 2026 request,
// and cancellation by abort. Every successful result is checked against the tool's outputSchema.
//
//   node sdk_v2_e2e.mjs --mcpbox BIN --transport stdio|http
// Exits 77 without the Node packages or when this host cannot create local sandboxes.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import {
    NODE_MODULES, parseArgs, requireBinary, SKIP, sleep, startHttpServer, tempStateDir,
} from '../e2e/sdk/lib.mjs';

const MODERN = '2026-07-28';
const args = parseArgs(process.argv.slice(2));
const bin = requireBinary(args.mcpbox);
const kind = args.transport || 'http';

async function importPkg(rel) {
    const file = path.join(NODE_MODULES, rel);
    if (!fs.existsSync(file)) {
        console.log(`# SKIP: ${file} is missing (run scripts/install-deps.sh --test)`);
        process.exit(SKIP);
    }
    return import(pathToFileURL(file).href);
}
const v2 = await importPkg('@modelcontextprotocol/client/dist/index.mjs');
const { StdioClientTransport } = await importPkg('@modelcontextprotocol/client/dist/stdio.mjs');
const v1 = await importPkg('@modelcontextprotocol/sdk/dist/esm/client/index.js');
const v1http = await importPkg('@modelcontextprotocol/sdk/dist/esm/client/streamableHttp.js');
const require = createRequire(path.resolve(NODE_MODULES, 'ajv', 'package.json'));
const Ajv2020 = require('ajv/dist/2020.js').default ?? require('ajv/dist/2020.js');

const stateDir = tempStateDir(`v2-${kind}`);
const cleanups = [];
async function finish(code) {
    for (const f of cleanups.reverse()) { try { await f(); } catch { /* best effort */ } }
    fs.rmSync(stateDir, { recursive: true, force: true });
    process.exit(code);
}

class Check extends Error {}
function check(cond, what) { if (!cond) throw new Check(`check failed: ${what}`); }

/* A v2 client in 'auto' negotiation mode: it probes server/discover and picks 2026-07-28. */
async function connectModern(url) {
    const client = new v2.Client({ name: `v2-e2e-${kind}`, version: '1.0.0' },
                                 { capabilities: {}, versionNegotiation: { mode: 'auto' } });
    const transport = kind === 'stdio'
        ? new StdioClientTransport({ command: bin, args: ['serve', '--state-dir', stateDir],
                                     stderr: 'ignore', env: { ...process.env } })
        : new v2.StreamableHTTPClientTransport(new URL(url));
    await client.connect(transport);
    return client;
}

const server = await startHttpServer(bin, [], { stateDir });
cleanups.push(() => server.stop());
const A = await connectModern(server.url);
cleanups.push(() => A.close());
const legacy = new v1.Client({ name: 'v1-e2e', version: '1.0.0' }, { capabilities: {} });
await legacy.connect(new v1http.StreamableHTTPClientTransport(new URL(server.url)));
cleanups.push(() => legacy.close());

const tools = new Map((await A.listTools()).tools.map((t) => [t.name, t]));
const ajv = new Ajv2020({ strict: false, allErrors: true });
const validators = new Map([...tools].filter(([, t]) => t.outputSchema)
    .map(([n, t]) => [n, ajv.compile(t.outputSchema)]));
const text = (res) => (res.content || []).filter((c) => c.type === 'text').map((c) => c.text)
    .join('\n');

/* One 2026-07-28 request by hand (stateless HTTP), declaring the tasks extension unless caps
 * says otherwise. Returns the result, or {error} for a JSON-RPC error. */
let rawId = 1000;
async function raw(method, params, name, caps = { extensions: { 'io.modelcontextprotocol/tasks': {} } }) {
    const headers = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream',
                      'MCP-Protocol-Version': MODERN, 'Mcp-Method': method };
    if (name) headers['Mcp-Name'] = name;
    const body = { jsonrpc: '2.0', id: ++rawId, method, params: { ...params, _meta: {
        'io.modelcontextprotocol/protocolVersion': MODERN,
        'io.modelcontextprotocol/clientCapabilities': caps } } };
    const res = await fetch(server.url, { method: 'POST', headers, body: JSON.stringify(body) });
    const msg = await res.json();
    return msg.error ? { error: msg.error } : msg.result;
}
const rawTool = (tool, a) => raw('tools/call', { name: tool, arguments: a }, tool);

async function call(tool, a, opts) {
    const res = await A.callTool({ name: tool, arguments: a }, opts);
    if (!res.isError) {
        const v = validators.get(tool);
        check(res.structuredContent, `${tool}: structuredContent present`);
        check(!v || v(res.structuredContent), `${tool}: outputSchema: ${JSON.stringify(v?.errors)}`);
    }
    return res;
}
async function ok(tool, a, opts) {
    const res = await call(tool, a, opts);
    check(!res.isError, `${tool} ${JSON.stringify(a).slice(0, 160)} failed: ${text(res)}`);
    return res.structuredContent;
}

const first = await call('create_sandbox', { metadata: { test: 'sdk-v2-e2e' } });
if (first.isError) {
    const msg = text(first);
    console.log(`# create_sandbox failed: ${msg}`);
    const doc = /not enabled/.test(msg) ? null : await call('diagnose_sandbox', {});
    if (doc === null || doc.isError || doc.structuredContent.ok === false) {
        console.log('# SKIP: this host cannot create local sandboxes');
        await finish(SKIP);
    }
    console.log('not ok 1 - create_sandbox fails although doctor says this host can run sandboxes');
    await finish(1);
}
const id = first.structuredContent.sandbox_id;
console.log(`# sandbox ${id} (${kind}, ${MODERN})`);

const cases = [
    ['the v2 client negotiated 2026-07-28 through server/discover', async () => {
        check(A.getNegotiatedProtocolVersion() === MODERN,
              `negotiated ${A.getNegotiatedProtocolVersion()}`);
        check(A.getServerVersion()?.name === 'mcpbox', JSON.stringify(A.getServerVersion()));
        check(tools.size >= 20, `${tools.size} tools listed`);
    }],
    ['files: write, read, list, search, replace, move, mkdir, delete', async () => {
        await ok('make_directory', { sandbox_id: id, path: 'work/sub' });
        await ok('write_file', { sandbox_id: id, path: 'work/a.txt', content: 'hello 2026\n' });
        const r = await ok('read_file', { sandbox_id: id, path: 'work/a.txt' });
        check(r.content === 'hello 2026\n', JSON.stringify(r).slice(0, 200));
        const l = await ok('list_files', { sandbox_id: id, path: 'work' });
        check(l.entries.some((e) => e.name === 'a.txt' || /a\.txt$/.test(e.path)), 'listed');
        const s = await ok('search_files', { sandbox_id: id, path: 'work', pattern: '*.txt' });
        check(s.matches.length === 1, JSON.stringify(s).slice(0, 200));
        await ok('replace_in_file', { sandbox_id: id, path: 'work/a.txt', old: '2026', new: 'MRTR' });
        await ok('move_path', { sandbox_id: id, source: 'work/a.txt', destination: 'work/sub/b.txt' });
        const b = await ok('read_file', { sandbox_id: id, path: 'work/sub/b.txt' });
        check(b.content === 'hello MRTR\n', b.content);
        await ok('delete_path', { sandbox_id: id, path: 'work', recursive: true });
    }],
    ['run_command with progress on a 2026-07-28 request', async () => {
        let progress = 0;
        const r = await ok('run_command', { sandbox_id: id, command: 'echo out; sleep 3; echo err >&2' },
                           { onprogress: () => { progress++; } });
        check(r.exit_code === 0 && r.stdout === 'out\n' && r.stderr === 'err\n', JSON.stringify(r));
        check(progress >= 1, `progress notifications: ${progress}`);
    }],
    ['background command: get_command, kill_command', async () => {
        const r = await ok('run_command', { sandbox_id: id, command: 'sleep 60', background: true });
        await ok('kill_command', { sandbox_id: id, command_id: r.command_id });
        const g = await ok('get_command', { sandbox_id: id, command_id: r.command_id, wait_seconds: 10 });
        check(g.status !== 'running', JSON.stringify(g));
    }],
    ['aborting a 2026-07-28 call cancels it (the command stops)', async () => {
        const marker = `/tmp/v2-abort-${process.pid}`;
        const ac = new AbortController();
        const p = A.callTool({ name: 'run_command', arguments: { sandbox_id: id,
            command: `sleep 4; echo survived > ${marker}` } }, { signal: ac.signal });
        await sleep(1000);
        ac.abort();
        await p.then(() => check(false, 'call resolved after abort'), () => {});
        await sleep(5000);
        const r = await ok('run_command', { sandbox_id: id, command: `cat ${marker} 2>/dev/null; true` });
        check(r.stdout === '', `the aborted command ran on: ${r.stdout}`);
    }],
    ['run_command as a task (io.modelcontextprotocol/tasks): CreateTaskResult, tasks/get, cancel',
     async () => {
        if (kind !== 'http') return; // raw JSON-RPC over HTTP: the SDK client has no tasks API
        const r = await rawTool('run_command', { sandbox_id: id, command: 'sleep 1; echo done' });
        check(r.resultType === 'task' && /^[0-9a-f]{32}$/.test(r.taskId), JSON.stringify(r));
        check(r.status === 'working' && Number.isInteger(r.pollIntervalMs), JSON.stringify(r));
        let t;
        for (let i = 0; i < 100; i++) {
            t = await raw('tasks/get', { taskId: r.taskId }, r.taskId);
            if (t.status !== 'working') break;
            await sleep(100);
        }
        check(t.status === 'completed' && t.result.structuredContent.stdout === 'done\n',
              JSON.stringify(t).slice(0, 300));
        check(validators.get('run_command')(t.result.structuredContent), 'outputSchema');
        const long = await rawTool('run_command', { sandbox_id: id, command: 'sleep 60' });
        const ack = await raw('tasks/cancel', { taskId: long.taskId }, long.taskId);
        check(ack.resultType === 'complete' && !('status' in ack), JSON.stringify(ack));
        const c = await raw('tasks/get', { taskId: long.taskId }, long.taskId);
        check(c.status === 'cancelled', JSON.stringify(c));
        const other = await raw('tasks/get', { taskId: long.taskId }, long.taskId, {});
        check(other.error?.code === -32021, `without the extension: ${JSON.stringify(other)}`);
    }],
    ['lifecycle: get, list, update (renew, pause, resume), endpoint, diagnose, host checks', async () => {
        check((await ok('get_sandbox', { sandbox_id: id })).sandbox_id === id, 'get');
        const l = await ok('list_sandboxes', {});
        check(l.sandboxes.some((s) => s.sandbox_id === id), 'listed');
        await ok('update_sandbox', { sandbox_id: id, timeout_seconds: 600 });
        await ok('update_sandbox', { sandbox_id: id, paused: true });
        await ok('update_sandbox', { sandbox_id: id, paused: false });
        await ok('get_endpoint', { sandbox_id: id, port: 8080 });
        await ok('diagnose_sandbox', { sandbox_id: id, what: 'summary' });
        check((await ok('diagnose_sandbox', {})).ok === true, 'host checks');
    }],
    ['a 2025-11-25 client of the same user on the same server: both revisions share the sandbox', async () => {
        // Without a token, loopback HTTP sandboxes belong to the connecting user (local:uid:N),
        // whichever revision the client speaks.
        const res = await legacy.callTool({ name: 'create_sandbox', arguments: {} });
        check(!res.isError, text(res));
        const other = res.structuredContent.sandbox_id;
        const seen = await call('get_sandbox', { sandbox_id: other });
        check(!seen.isError, `the stateless client of the same user must see it: ${text(seen)}`);
        await legacy.callTool({ name: 'destroy_sandbox', arguments: { sandbox_id: other } });
    }],
    ['bad input is an isError result; unknown tool a JSON-RPC error', async () => {
        check((await call('run_command', { sandbox_id: 42, command: 'true' })).isError, 'type');
        let threw = false;
        try { await A.callTool({ name: 'no_such_tool', arguments: {} }); } catch { threw = true; }
        check(threw, 'unknown tool');
    }],
    ['destroy_sandbox', async () => {
        await ok('destroy_sandbox', { sandbox_id: id });
        check((await call('get_sandbox', { sandbox_id: id })).isError, 'gone');
    }],
];

let n = 0, failed = 0;
for (const [name, fn] of cases) {
    n++;
    const t0 = Date.now();
    try {
        await fn();
        console.log(`ok ${n} - ${name} (${Date.now() - t0} ms)`);
    } catch (e) {
        failed++;
        console.log(`not ok ${n} - ${name}`);
        for (const line of String(e.stack || e).split('\n').slice(0, 6)) console.log(`# ${line}`);
    }
}
console.log(`1..${n}`);
await finish(failed ? 1 : 0);
