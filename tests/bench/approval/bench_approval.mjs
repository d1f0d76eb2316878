// What an approval costs an agent (issue 38), through MCP over stdio with the official SDK
// clients, beside an honest floor in the same run: the same tool call that needs no question.
// The person answers at once (zero think time), so the figures are the protocol's cost only:
//  - update_sandbox with a name on the person's list (floor) against a name beyond it, asked
//    through elicitation/create (2025-11-25, SDK v1) and through an InputRequiredResult and a
//    retry (2026-07-28, SDK v2);
//  - write_file + review_changes + apply_changes of one file with --approve apply=allow (floor)
//    against apply=ask (the question's own review, then the form).
//
//   node tests/bench/approval/bench_approval.mjs --mcpbox build-rel/mcpbox [--n 200]
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
process.env.MCPBOX_NODE_MODULES ??= path.join(here, '..', '..', 'node', 'node_modules');
const { parseArgs, tempStateDir } = await import('../../e2e/sdk/lib.mjs');
const { accept, connect, Person } = await import('../../e2e/approval/approval_lib.mjs');

const args = parseArgs(process.argv.slice(2));
const bin = path.resolve(args.mcpbox);
const n = Number(args.n || 200);
const project = fs.mkdtempSync(path.join(os.tmpdir(), 'mbx-bench-approval-'));
const stateDir = tempStateDir('bench-approval');

async function client(revision, extra) {
    const person = new Person();
    person.says(accept('Allow once'));
    return connect({ revision, transport: 'stdio', bin, cwd: project, person,
                     args: ['serve', '--state-dir', stateDir, '--local-pool', '0',
                            '--approve-egress-allow', 'listed.example', ...extra] });
}
const policy = (name) => ({ network_policy: { egress: [{ action: 'allow', target: name }] } });
async function ok(c, tool, a) {
    const r = await c.call(tool, a);
    if (r.isError) throw new Error(`${tool}: ${JSON.stringify(r.content)}`);
    return r.structuredContent;
}
async function timed(fn) {
    const ms = [];
    for (let i = 0; i < n; i++) {
        const t0 = process.hrtime.bigint();
        await fn(i);
        ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    ms.sort((a, b) => a - b);
    return { median: ms[Math.floor(ms.length / 2)], p90: ms[Math.floor(ms.length * 0.9)] };
}
const fmt = (r) => `median ${r.median.toFixed(3)} ms, p90 ${r.p90.toFixed(3)} ms`;

for (const revision of ['2025', '2026']) {
    const c = await client(revision, []);
    const id = (await ok(c, 'create_sandbox', policy('listed.example'))).sandbox_id;
    const floor = await timed(() => ok(c, 'update_sandbox', { sandbox_id: id, ...policy('listed.example') }));
    const asked = await timed((i) => ok(c, 'update_sandbox', { sandbox_id: id, ...policy(`n${i}.example`) }));
    console.log(`update_sandbox ${revision}: no question: ${fmt(floor)}; asked: ${fmt(asked)}`);
    await ok(c, 'destroy_sandbox', { sandbox_id: id });
    await c.close();
}

for (const mode of ['allow', 'ask']) {
    const c = await client('2025', ['--approve', `apply=${mode}`]);
    const id = (await ok(c, 'create_sandbox', { mounts: [{ source: project, target: '/workspace/p' }] })).sandbox_id;
    const r = await timed(async (i) => {
        await ok(c, 'write_file', { sandbox_id: id, path: '/workspace/p/f.txt', content: `v${i}\n` });
        const rev = await ok(c, 'review_changes', { sandbox_id: id });
        await ok(c, 'apply_changes', { sandbox_id: id, review: rev.review });
    });
    console.log(`write_file + review_changes + apply_changes, apply=${mode}: ${fmt(r)}`);
    await ok(c, 'destroy_sandbox', { sandbox_id: id });
    await c.close();
}
fs.rmSync(project, { recursive: true, force: true });
fs.rmSync(stateDir, { recursive: true, force: true });
