// Issue 17 point 2: no tool call waits past a client's timeout. The TypeScript SDK client (1.32)
// times a request out after 60 s unless progress resets its timer. Run at the same time:
//  - get_command wait_seconds 80 and run_command wait_seconds 80, no progress token: each
//    returns status "running" by ~50 s instead of the SDK's "Request timed out";
//  - get_command wait_seconds 56 with a progress token (heartbeats reset the timer): honoured;
//  - run_command as a 2026-07-28 task: the task completes at ~50 s with the command id and
//    status "running", as the same call does on 2025-11-25.
//   node waits.mjs --mcpbox PATH
import { parseArgs, requireBinary, sdkImport, startHttpServer, tempStateDir } from '../sdk/lib.mjs';

const { Client } = await sdkImport('client/index.js');
const { StreamableHTTPClientTransport } = await sdkImport('client/streamableHttp.js');
const args = parseArgs(process.argv.slice(2));
const bin = requireBinary(args.mcpbox);
const server = await startHttpServer(bin, ['--local-pool', '0'], { stateDir: tempStateDir('waits') });
let failed = 0;
const check = (cond, what) => {
    console.log(`${cond ? 'ok' : 'not ok'} - ${what}`);
    if (!cond) failed++;
};

const client = new Client({ name: 'waits-e2e', version: '1.0.0' }, { capabilities: {} });
await client.connect(new StreamableHTTPClientTransport(new URL(server.url)));
const tool = async (name, a, opts) => {
    const res = await client.callTool({ name, arguments: a }, undefined, opts);
    if (res.isError) throw new Error(`${name}: ${JSON.stringify(res.content)}`);
    return res.structuredContent;
};
const id = (await tool('create_sandbox', {})).sandbox_id;
const bg = await tool('run_command', { sandbox_id: id, command: 'sleep 200', background: true });

async function timed(fn) {
    const t0 = Date.now();
    try {
        return { value: await fn(), s: (Date.now() - t0) / 1000 };
    } catch (e) {
        return { error: String(e), s: (Date.now() - t0) / 1000 };
    }
}

const MODERN = '2026-07-28';
async function raw(method, params, name) {
    const headers = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream',
                      'MCP-Protocol-Version': MODERN, 'Mcp-Method': method, 'Mcp-Name': name };
    const body = { jsonrpc: '2.0', id: 1, method, params: { ...params, _meta: {
        'io.modelcontextprotocol/protocolVersion': MODERN,
        'io.modelcontextprotocol/clientCapabilities': { extensions: { 'io.modelcontextprotocol/tasks': {} } } } } };
    const res = await fetch(server.url, { method: 'POST', headers, body: JSON.stringify(body) });
    const msg = await res.json();
    if (msg.error) throw new Error(JSON.stringify(msg.error));
    return msg.result;
}
async function taskRun() {
    const t = await raw('tools/call', { name: 'run_command', arguments: { sandbox_id: id, command: 'sleep 200' } },
                        'run_command');
    if (t.resultType !== 'task') throw new Error(`not a task: ${JSON.stringify(t)}`);
    for (const end = Date.now() + 70000; ;) {
        const g = await raw('tasks/get', { taskId: t.taskId }, t.taskId);
        if (g.status !== 'working') return g;
        if (Date.now() > end) throw new Error('the task was still working after 70 s');
        await new Promise((r) => setTimeout(r, 500));
    }
}

let beats = 0;
const [get80, run80, getProgress, task] = await Promise.all([
    timed(() => tool('get_command', { sandbox_id: id, command_id: bg.command_id, wait_seconds: 80 })),
    timed(() => tool('run_command', { sandbox_id: id, command: 'sleep 200', wait_seconds: 80 })),
    timed(() => tool('get_command', { sandbox_id: id, command_id: bg.command_id, wait_seconds: 56 },
                     { onprogress: () => beats++, resetTimeoutOnProgress: true })),
    timed(taskRun),
]);
console.log(`# get80 ${JSON.stringify(get80).slice(0, 300)}`);
console.log(`# run80 ${JSON.stringify(run80).slice(0, 300)}`);
console.log(`# getProgress ${JSON.stringify(getProgress).slice(0, 300)} beats=${beats}`);
console.log(`# task ${JSON.stringify(task).slice(0, 400)}`);
check(get80.value?.status === 'running' && get80.s < 55,
      `get_command wait_seconds 80 without a progress token returns "running" before the client times out (${get80.s} s)`);
check(/50 s/.test(get80.value?.note ?? ''), 'get_command says it stopped waiting at 50 s');
check(run80.value?.status === 'running' && run80.value.command_id && run80.s < 55,
      `run_command wait_seconds 80 without a progress token returns the command id in time (${run80.s} s)`);
check(getProgress.value?.status === 'running' && getProgress.s >= 55 && beats > 0,
      `with a progress token get_command waits the full 56 s, heartbeats reset the timer (${getProgress.s} s, ${beats} beats)`);
const tr = task.value?.result?.structuredContent;
check(task.value?.status === 'completed' && tr?.status === 'running' && /^\S+$/.test(tr?.command_id ?? '') &&
      task.s >= 45 && task.s < 58,
      `a 2026-07-28 task hands back the command id at ~50 s (${task.s} s)`);
// Sandboxes outlive their server (a restart adopts them): this one would run until its TTL.
await tool('destroy_sandbox', { sandbox_id: id });
await client.close();
await server.stop();
console.log(`1..5`);
process.exit(failed ? 1 : 0);
