// Drives examples/agent/agent.mjs (copied beside this file by run_agent.sh) against the real
// mcpbox binary: stdio (the example spawns mcpbox) or HTTP (we start `mcpbox serve --http
// 127.0.0.1:0`). Checks the program's result, the sha256 read_file echoes, and that the sandbox
// is gone afterwards. Exits 77, saying why, when this build has no create_sandbox tool or the
// host cannot run local sandboxes (per diagnose_sandbox's host checks).
import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { connect, runTask, EXPECTED } from './agent.mjs';

const SKIP = 77;
const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];

// The HTTP server we started, killed on every way out (process.exit skips finally blocks).
let server = null;
function stopServer() {
    if (server && server.child.exitCode === null) server.child.kill('SIGTERM');
}
process.on('exit', stopServer);
function fail(msg) { console.log(`not ok - ${msg}`); process.exit(1); }
function skip(msg) { console.log(`SKIP: ${msg}`); process.exit(SKIP); }

function startHttp(bin) {
    return new Promise((resolve, reject) => {
        const child = spawn(bin, ['serve', '--http', '127.0.0.1:0'], { stdio: ['ignore', 'ignore', 'pipe'] });
        let err = '';
        const timer = setTimeout(() => reject(new Error(`no "listening on" line in 15 s: ${err}`)), 15000);
        child.stderr.on('data', (d) => {
            err += d;
            const m = /listening on (http:\/\/\S+)/.exec(err);
            if (m) { clearTimeout(timer); resolve({ child, url: m[1] }); }
        });
        child.on('exit', (code) => { clearTimeout(timer); reject(new Error(`mcpbox exited ${code}: ${err}`)); });
    });
}

async function hostCannotRunSandboxes(client) {
    const res = await client.callTool({ name: 'diagnose_sandbox', arguments: {} }).catch(() => null);
    const doc = res?.structuredContent;
    if (!doc || doc.ok !== false) return null;
    return doc.checks.filter((c) => !c.ok).map((c) => `${c.name}: ${c.detail ?? ''} fix: ${c.fix ?? ''}`).join('; ');
}

function backendsBuiltIn(bin) {
    const m = /^backends: (.*)$/m.exec(execFileSync(bin, ['--version'], { encoding: 'utf8' }));
    return m ? m[1].split(/[ ,]+/) : [];
}

async function main() {
    const backends = backendsBuiltIn(args.mcpbox);
    if (!backends.includes('local'))
        skip(`this build has no local backend (mcpbox --version: backends: ${backends.join(', ') || 'none'})`);
    if (args.transport === 'http') server = await startHttp(args.mcpbox);
    const client = await connect(server ? { http: server.url } : { mcpbox: args.mcpbox });
    try {
        const { tools } = await client.listTools();
        const names = tools.map((t) => t.name);
        if (!names.includes('create_sandbox'))
            skip(`create_sandbox is not in tools/list of this build (tools: ${names.join(', ') || 'none'}); the sandbox tools or the local backend are not linked in yet`);
        const lines = [];
        let outcome;
        try {
            outcome = await runTask(client, { log: (l) => lines.push(l) });
        } catch (e) {
            const why = lines.length === 0 ? await hostCannotRunSandboxes(client) : null;
            if (why) skip(`this host cannot run local sandboxes: ${why}`);
            fail(`${e.message}\n# steps: ${lines.join(' / ')}`);
        }
        for (const l of lines) console.log(`# ${l}`);
        if (outcome.exit_code !== 0) fail(`exit code ${outcome.exit_code}`);
        if (outcome.result !== EXPECTED) fail(`result ${JSON.stringify(outcome.result)} != ${JSON.stringify(EXPECTED)}`);
        const sha = createHash('sha256').update(EXPECTED).digest('hex');
        if (outcome.sha256 !== sha) fail(`read_file sha256 ${outcome.sha256} != ${sha}`);
        const after = await client.callTool({ name: 'get_sandbox', arguments: { sandbox_id: outcome.sandbox_id } });
        const state = after.structuredContent?.state;
        if (!after.isError && state !== 'destroyed') fail(`sandbox still there after cleanup (state ${state})`);
        console.log(`ok - agent example over ${args.transport}: create, write, run, read, destroy`);
    } finally {
        await client.close();
        if (server) {
            server.child.removeAllListeners('exit');
            stopServer();
        }
    }
}

main().catch((e) => fail(e.stack || e.message));
