// Host mounts end to end through the official TypeScript SDK over stdio (issue 13), with no
// option at all: a stdio server allows the directory it starts in (where Claude Code starts it,
// the project). A git repository with a failing test is mounted copy-on-write by default (a
// relative source); the agent fixes it, the host stays untouched until review and apply, after
// which git status shows exactly that change, owned by the person. Then rw (lands as the person
// with the sandbox's mode), ro, and the allowlist's refusals (outside, "..", a symlink out, a
// bad target or mode). workspace_e2e.mjs covers review/apply themselves in depth.
//
//   node mounts_e2e.mjs --mcpbox BIN
// Exits 77 when this host cannot create local sandboxes.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sdkImport } from '../sdk/lib.mjs';
import { check, parseArgs, requireBinary, runCases, SKIP, tempStateDir, text } from './tools_lib.mjs';

const { Client } = await sdkImport('client/index.js');
const { StdioClientTransport } = await sdkImport('client/stdio.js');

const args = parseArgs(process.argv.slice(2));
const bin = requireBinary(args.mcpbox);
const root = process.getuid() === 0;
const person = root ? [4242, 4243] : [process.getuid(), process.getgid()];

const base = fs.mkdtempSync(path.join(os.tmpdir(), 'mbx-ws-e2e-'));
fs.chmodSync(base, 0o755);
const project = path.join(base, 'projects');       // the directory the client starts mcpbox in
const repo = path.join(project, 'calc');
const outside = path.join(base, 'outside');
fs.mkdirSync(repo, { recursive: true });
fs.mkdirSync(outside);
fs.writeFileSync(path.join(outside, 'secret'), 'outside\n');
fs.writeFileSync(path.join(repo, 'add.sh'), '#!/bin/sh\n# adds two numbers\necho $(($1 - $2))\n');
fs.writeFileSync(path.join(repo, 'test.sh'),
                 '#!/bin/sh\nr=$(sh ./add.sh 2 3)\n[ "$r" = 5 ] || { echo "FAIL: 2+3 gave $r"; exit 1; }\necho PASS\n');
fs.chmodSync(path.join(repo, 'test.sh'), 0o755);
const git = (...a) => execFileSync('git', ['-c', 'safe.directory=*', '-C', repo, ...a],
                                   { encoding: 'utf8' });
git('init', '-q');
git('-c', 'user.email=p@example.com', '-c', 'user.name=person', 'add', '.');
git('-c', 'user.email=p@example.com', '-c', 'user.name=person', 'commit', '-qm', 'calc');
if (root) execFileSync('chown', ['-R', `${person[0]}:${person[1]}`, repo]);

const stateDir = tempStateDir('mounts-e2e');
const client = new Client({ name: 'workspace-e2e', version: '1.0.0' }, { capabilities: {} });
const transport = new StdioClientTransport({
    command: bin, args: ['serve', '--state-dir', stateDir, '--local-pool', '0'], cwd: project,
    env: { ...process.env }, stderr: 'pipe',
});
await client.connect(transport);

async function finish(code) {
    try { await client.close(); } catch { /* gone */ }
    fs.rmSync(stateDir, { recursive: true, force: true });
    fs.rmSync(base, { recursive: true, force: true });
    process.exit(code);
}

async function tool(name, a) {
    return client.callTool({ name, arguments: a });
}
async function ok(name, a) {
    const r = await tool(name, a);
    if (r.isError) throw new Error(`${name}: ${text(r)}`);
    return r.structuredContent;
}
async function refused(a, ...words) {
    const r = await tool('create_sandbox', a);
    check(r.isError, `create_sandbox ${JSON.stringify(a)} refused`);
    for (const w of words) check(text(r).includes(w), `"${w}" in: ${text(r)}`);
}

const probe = await tool('create_sandbox', {});
if (probe.isError) {
    console.log(`# SKIP: ${text(probe)}`);
    await finish(SKIP);
}
await ok('destroy_sandbox', { sandbox_id: probe.structuredContent.sandbox_id });

const sh = (id, command) => ok('run_command', { sandbox_id: id, command });
let id;
let reviewToken;

const cases = [
    ['create_sandbox mounts the project copy-on-write by default (relative source, no option)', async () => {
        const sb = await ok('create_sandbox', { mounts: [{ source: 'calc', target: '/workspace/calc' }] });
        id = sb.sandbox_id;
        const info = await ok('get_sandbox', { sandbox_id: id });
        check(info.mounts?.[0]?.mode === 'copy-on-write', `get_sandbox shows the mount: ${JSON.stringify(info.mounts)}`);
        check(info.mounts[0].source === fs.realpathSync(repo), 'its source is the real path');
    }],
    ['the test fails in the sandbox, as on the host', async () => {
        const r = await sh(id, 'cd /workspace/calc && ./test.sh');
        check(r.exit_code === 1 && r.stdout.includes('FAIL: 2+3 gave -1'), `test output: ${r.stdout}`);
    }],
    ['the agent fixes it with the file tools; the test passes; the host is untouched', async () => {
        await ok('replace_in_file', { sandbox_id: id, path: '/workspace/calc/add.sh',
                                      old: '$(($1 - $2))', new: '$(($1 + $2))' });
        const r = await sh(id, 'cd /workspace/calc && ./test.sh && touch /tmp/scratch');
        check(r.exit_code === 0 && r.stdout.includes('PASS'), `test output: ${r.stdout}`);
        check(git('status', '--porcelain') === '', 'git status on the host is clean before apply');
        check(fs.readFileSync(path.join(repo, 'add.sh'), 'utf8').includes('$1 - $2'), 'host file unchanged');
    }],
    ['review_changes shows exactly the fix', async () => {
        const rv = await ok('review_changes', { sandbox_id: id });
        reviewToken = rv.review; // what apply_changes names: it writes only what this showed
        check(rv.changes.length === 1, `one change: ${JSON.stringify(rv.changes)}`);
        check(rv.changes[0].path === '/workspace/calc/add.sh' && rv.changes[0].change === 'modified',
              `the change: ${JSON.stringify(rv.changes[0])}`);
        check(rv.diff.includes('-echo $(($1 - $2))') && rv.diff.includes('+echo $(($1 + $2))'),
              `the diff: ${rv.diff}`);
    }],
    ['apply_changes writes it; git status shows only that change, owned by the person', async () => {
        const ap = await ok('apply_changes', { sandbox_id: id, review: reviewToken });
        check(ap.applied === 1 && ap.conflicts === 0, `apply: ${JSON.stringify(ap)}`);
        check(git('status', '--porcelain') === ' M add.sh\n', `git status: ${git('status', '--porcelain')}`);
        check(git('diff').includes('+echo $(($1 + $2))'), 'git diff shows the fix');
        const st = fs.statSync(path.join(repo, 'add.sh'));
        check(st.uid === person[0] && st.gid === person[1], `add.sh owned by ${st.uid}:${st.gid}`);
        await ok('destroy_sandbox', { sandbox_id: id });
    }],
    ['an rw mount writes to the host as the person; ro cannot be written', async () => {
        const sb = await ok('create_sandbox', { mounts: [
            { source: 'calc', target: '/workspace/calc', mode: 'rw' },
            { source: 'calc', target: '/mnt/calc', mode: 'ro' }] });
        const r = await sh(sb.sandbox_id, 'echo notes > /workspace/calc/NOTES && chmod 600 /workspace/calc/NOTES && ! echo x > /mnt/calc/x');
        check(r.exit_code === 0, `rw/ro: ${r.stdout} ${r.stderr}`);
        const st = fs.statSync(path.join(repo, 'NOTES'));
        check(st.uid === person[0] && st.gid === person[1] && (st.mode & 0o777) === 0o600,
              `NOTES ${st.uid}:${st.gid} ${(st.mode & 0o777).toString(8)}`);
        check(!fs.existsSync(path.join(repo, 'x')), 'nothing written through ro');
        await ok('destroy_sandbox', { sandbox_id: sb.sandbox_id });
    }],
    ['paths outside the allowlist, ".." and symlinks out are refused, naming --allow-dir', async () => {
        fs.symlinkSync('../outside', path.join(project, 'escape'));
        await refused({ mounts: [{ source: outside, target: '/mnt/o' }] }, '--allow-dir');
        await refused({ mounts: [{ source: '../outside', target: '/mnt/o' }] }, 'leaves');
        await refused({ mounts: [{ source: 'calc/../../outside', target: '/mnt/o' }] }, 'leaves');
        await refused({ mounts: [{ source: 'escape', target: '/mnt/o' }] }, 'leaves');
        await refused({ mounts: [{ source: 'calc', target: '/etc/calc' }] }, '/workspace');
        await refused({ mounts: [{ source: 'calc', target: '/mnt/c', mode: 'write' }] }, 'copy-on-write');
    }],
];

const failed = await runCases(cases);
await finish(failed ? 1 : 0);
