// Host workspaces end to end (issue 13) through the official TypeScript SDK over stdio: a git
// repository with a failing test is mounted copy-on-write; the agent fixes it in the sandbox
// (run_command, replace_in_file); review_changes shows exactly that change; apply_changes writes
// it; `git status` on the host shows only it, owned by the person. Then, in the same sandbox: a
// binary file, a deletion, a mode change, a symlink planted to point out of the tree (applied as
// a symlink, never followed), a fifo (not created), a file the person changed on the host
// meanwhile (a conflict until overwrite), a second review that is empty but for the fifo, and a
// second apply sent while one runs (refused). Each apply names the review it applies.
// Runs as root (the repository belongs to another user, whose files the applied ones must be)
// and as an ordinary user (tests/local/rootless).
//
//   node workspace_e2e.mjs --mcpbox BIN
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sdkImport } from '../sdk/lib.mjs';
import { CallToolResultSchema, check, parseArgs, requireBinary, runCases, SKIP, text } from './tools_lib.mjs';

const { Client } = await sdkImport('client/index.js');
const { StdioClientTransport } = await sdkImport('client/stdio.js');

const args = parseArgs(process.argv.slice(2));
const bin = requireBinary(args.mcpbox);
const base = fs.mkdtempSync(path.join(os.tmpdir(), 'mcpbox-ws-e2e-'));
fs.chmodSync(base, 0o755);
const stateDir = path.join(base, 'state');
const allowed = path.join(base, 'projects');
const repo = path.join(allowed, 'proj');
const victim = path.join(base, 'victim');
fs.mkdirSync(stateDir, { mode: 0o700 });
fs.mkdirSync(repo, { recursive: true });
fs.mkdirSync(victim);

// As root the repository belongs to someone else: the applied files must become theirs.
const root = process.getuid() === 0;
const person = root ? { uid: 65534, gid: 65534 } : { uid: process.getuid(), gid: process.getgid() };

const git = (...a) => execFileSync('git', ['-c', 'safe.directory=*', '-C', repo, ...a],
                                   { encoding: 'utf8' });
function makeRepo() {
    fs.writeFileSync(path.join(repo, 'sum.sh'), 'sum() {\n    echo $(($1 - $2))\n}\n');
    fs.writeFileSync(path.join(repo, 'test.sh'),
                     '. ./sum.sh\n[ "$(sum 2 3)" = 5 ] || { echo "FAIL: sum 2 3 = $(sum 2 3)"; exit 1; }\necho ok\n');
    fs.writeFileSync(path.join(repo, 'data.bin'), Buffer.from([0, 1, 2, 3, 255]));
    fs.writeFileSync(path.join(repo, 'old.txt'), 'to be deleted\n');
    fs.writeFileSync(path.join(repo, 'run.sh'), '#!/bin/sh\necho run\n', { mode: 0o644 });
    fs.writeFileSync(path.join(repo, 'notes.txt'), 'the person edits this too\n');
    git('init', '-q');
    git('-c', 'user.email=p@example.invalid', '-c', 'user.name=person', 'add', '.');
    git('-c', 'user.email=p@example.invalid', '-c', 'user.name=person', 'commit', '-qm', 'start');
    if (root) execFileSync('chown', ['-R', `${person.uid}:${person.gid}`, allowed]);
}

let client, transport, stderr = '';
async function connect() {
    client = new Client({ name: 'workspace-e2e', version: '1.0.0' }, { capabilities: {} });
    transport = new StdioClientTransport({
        command: bin, args: ['serve', '--state-dir', stateDir, '--allow-dir', allowed],
        stderr: 'pipe', env: { ...process.env },
    });
    transport.stderr?.on('data', (d) => { stderr = (stderr + d).slice(-16384); });
    await client.connect(transport);
}

async function call(tool, a) {
    return client.callTool({ name: tool, arguments: a }, CallToolResultSchema);
}
async function ok(tool, a) {
    const r = await call(tool, a);
    if (r.isError) throw new Error(`${tool} failed: ${text(r)}`);
    return r.structuredContent;
}
const run = (id, command) => ok('run_command', { sandbox_id: id, command });
// apply_changes names the review it applies: the arguments, with the token of a review of them.
async function reviewed(a) {
    const r = await ok('review_changes', { sandbox_id: a.sandbox_id, ...(a.paths ? { paths: a.paths } : {}) });
    return { ...a, review: r.review };
}
const changesOf = (r) => r.changes.map((c) => `${c.path.replace('/workspace/proj/', '')} ${c.change}` +
                                           `${c.binary ? ' binary' : ''}${c.conflict ? ' conflict' : ''}` +
                                           `${c.applicable === false ? ' not-applicable' : ''}`).join('\n');
const statusOf = (r) => r.results.map((x) => `${x.path.replace('/workspace/proj/', '')} ${x.status}`).join('\n');
const cli = (...a) => execFileSync(bin, ['sandbox', '--state-dir', stateDir, ...a], { encoding: 'utf8' });
const owner = (p) => { const st = fs.lstatSync(p); return `${st.uid}:${st.gid}`; };

let id;

const cases = [
    ['a failing test is fixed in the sandbox; the host is untouched', async () => {
        const c = await call('create_sandbox', {
            mounts: [{ source: repo, target: '/workspace/proj', mode: 'copy-on-write' }],
        });
        if (c.isError && /cannot|unavailable|doctor/i.test(text(c)) && !/mount/i.test(text(c))) {
            console.log(`# SKIP: ${text(c)}`);
            process.exit(SKIP);
        }
        if (c.isError) throw new Error(`create_sandbox: ${text(c)}`);
        id = c.structuredContent.sandbox_id;
        const before = await run(id, 'cd /workspace/proj && sh test.sh');
        check(before.exit_code === 1 && /FAIL: sum 2 3 = -1/.test(before.stdout), JSON.stringify(before));
        await ok('replace_in_file', { sandbox_id: id, path: '/workspace/proj/sum.sh',
                                      old: '$(($1 - $2))', new: '$(($1 + $2))' });
        const after = await run(id, 'cd /workspace/proj && sh test.sh');
        check(after.exit_code === 0 && after.stdout === 'ok\n', JSON.stringify(after));
        check(fs.readFileSync(path.join(repo, 'sum.sh'), 'utf8').includes('$1 - $2'), 'host untouched');
    }],
    ['review_changes shows exactly the fix', async () => {
        const r = await ok('review_changes', { sandbox_id: id });
        check(changesOf(r) === 'sum.sh modified', changesOf(r));
        const want = 'diff --git a/workspace/proj/sum.sh b/workspace/proj/sum.sh\n' +
            '--- a/workspace/proj/sum.sh\n+++ b/workspace/proj/sum.sh\n' +
            '@@ -1,3 +1,3 @@\n sum() {\n-    echo $(($1 - $2))\n+    echo $(($1 + $2))\n }\n';
        check(r.diff === want, `diff was ${JSON.stringify(r.diff)}`);
        check(r.next_offset === null && r.truncated === false, 'whole diff in one page');
        check(r.changes[0].host_path === path.join(repo, 'sum.sh'), r.changes[0].host_path);
        // the CLI shows the same
        check(cli('diff', id) === want, 'mcpbox sandbox diff');
        const stat = cli('diff', id, '--stat');
        check(/^M \/workspace\/proj\/sum\.sh \(\d+ -> \d+ bytes\)\n$/.test(stat), `mcpbox sandbox diff --stat: ${stat}`);
    }],
    ['apply_changes writes it; git status shows only that change, owned by the person', async () => {
        const r = await ok('apply_changes', await reviewed({ sandbox_id: id }));
        check(statusOf(r) === 'sum.sh applied' && r.applied === 1 && r.conflicts === 0, statusOf(r));
        check(git('status', '--porcelain') === ' M sum.sh\n', git('status', '--porcelain'));
        check(owner(path.join(repo, 'sum.sh')) === `${person.uid}:${person.gid}`, owner(path.join(repo, 'sum.sh')));
        check((fs.statSync(path.join(repo, 'sum.sh')).mode & 0o777) === 0o644, 'mode kept');
        check(execFileSync('sh', ['test.sh'], { cwd: repo, encoding: 'utf8' }) === 'ok\n', 'host test passes');
        const again = await ok('review_changes', { sandbox_id: id });
        check(again.changes.length === 0 && again.diff === '', 'nothing left to review');
    }],
    ['binary, deletion, mode, an escaping symlink, a fifo and a host-side conflict', async () => {
        await ok('write_file', { sandbox_id: id, path: '/workspace/proj/data.bin', encoding: 'base64',
                                 content: Buffer.from([9, 0, 8, 0, 7, 254]).toString('base64') });
        await run(id, `cd /workspace/proj && rm old.txt && chmod 755 run.sh && ln -s ${victim} escape ` +
                      `&& mkfifo pipe && printf 'sandbox notes\\n' > notes.txt`);
        // the person edits notes.txt on the host meanwhile
        fs.writeFileSync(path.join(repo, 'notes.txt'), 'the person was here\n');
        const r = await ok('review_changes', { sandbox_id: id });
        check(changesOf(r) === ['data.bin modified binary', 'escape added', 'notes.txt modified conflict',
                                'old.txt deleted', 'pipe added not-applicable', 'run.sh mode'].join('\n'),
              changesOf(r));
        check(r.diff.includes('Binary files a/workspace/proj/data.bin and b/workspace/proj/data.bin differ\n'), 'binary');
        check(r.diff.includes('old mode 100644\nnew mode 100755\n'), 'mode');
        check(r.diff.includes(`new file mode 120000\n--- /dev/null\n+++ b/workspace/proj/escape\n@@ -0,0 +1 @@\n+${victim}\n`), 'symlink');
        check(r.diff.includes('deleted file mode 100644\n--- a/workspace/proj/old.txt\n'), 'deletion');
    }],
    ['apply refuses the conflict, writes the rest exactly, follows no symlink, makes no fifo', async () => {
        const r = await ok('apply_changes', await reviewed({ sandbox_id: id }));
        check(statusOf(r) === ['data.bin applied', 'escape applied', 'notes.txt conflict', 'old.txt applied',
                               'pipe skipped', 'run.sh applied'].join('\n'), statusOf(r));
        check(r.results.find((x) => x.status === 'conflict').reason.includes('overwrite'), 'conflict says what to do');
        check(Buffer.compare(fs.readFileSync(path.join(repo, 'data.bin')), Buffer.from([9, 0, 8, 0, 7, 254])) === 0, 'binary');
        check(!fs.existsSync(path.join(repo, 'old.txt')), 'deleted');
        check((fs.statSync(path.join(repo, 'run.sh')).mode & 0o777) === 0o755, 'executable');
        check(fs.lstatSync(path.join(repo, 'escape')).isSymbolicLink() &&
              fs.readlinkSync(path.join(repo, 'escape')) === victim, 'a symlink, as a symlink');
        check(fs.readdirSync(victim).length === 0, 'nothing written through it');
        check(!fs.existsSync(path.join(repo, 'pipe')), 'no fifo on the host');
        check(fs.readFileSync(path.join(repo, 'notes.txt'), 'utf8') === 'the person was here\n', 'conflict kept');
        for (const f of ['data.bin', 'run.sh', 'escape'])
            check(owner(path.join(repo, f)) === `${person.uid}:${person.gid}`, `${f} owned by ${owner(path.join(repo, f))}`);
        const st = git('status', '--porcelain').split('\n').filter(Boolean).sort().join('\n');
        check(st === [' D old.txt', ' M data.bin', ' M notes.txt', ' M run.sh', ' M sum.sh', '?? escape'].join('\n'), st);
    }],
    ['overwrite applies the conflict; the next review is empty but for the fifo', async () => {
        // the CLI refuses it too (exit 1), naming what to do
        let refused = null;
        try { cli('apply', id, '/workspace/proj/notes.txt', '--yes'); } catch (e) { refused = e; }
        check(refused && refused.status === 1 && /conflict +\/workspace\/proj\/notes.txt: .*overwrite/.test(refused.stdout),
              `mcpbox sandbox apply: ${refused && refused.stdout}`);
        // a relative path is relative to /workspace, as in the file tools
        const r = await ok('apply_changes', await reviewed({ sandbox_id: id, paths: ['proj/notes.txt'], overwrite: true }));
        check(statusOf(r) === 'notes.txt applied', statusOf(r));
        check(fs.readFileSync(path.join(repo, 'notes.txt'), 'utf8') === 'sandbox notes\n', 'overwritten');
        const again = await ok('review_changes', { sandbox_id: id });
        check(changesOf(again) === 'pipe added not-applicable', changesOf(again));
        // the sandbox still sees its own work
        const seen = await run(id, 'cd /workspace/proj && sh test.sh && cat notes.txt && test -p pipe && readlink escape');
        check(seen.stdout === `ok\nsandbox notes\n${victim}\n`, JSON.stringify(seen));
    }],
    ['files and directories the sandbox made unreadable are reviewed and applied with their modes', async () => {
        // As a user the server reads them from inside the sandbox's user namespace (a helper):
        // the user owns them, but mode 0 keeps even the owner out.
        await run(id, 'cd /workspace/proj && mkdir locked && printf "secret\\n" > locked/key && ' +
                      'printf "w\\n" > wonly && chmod 200 wonly locked/key && chmod 300 locked');
        const r = await ok('review_changes', { sandbox_id: id });
        check(changesOf(r) === ['locked added', 'locked/key added', 'pipe added not-applicable',
                                'wonly added'].join('\n'), changesOf(r));
        check(r.diff.includes('+++ b/workspace/proj/locked/key\n@@ -0,0 +1 @@\n+secret\n'), r.diff);
        const a = await ok('apply_changes', await reviewed({ sandbox_id: id, paths: ['/workspace/proj/locked', '/workspace/proj/wonly'] }));
        check(a.applied === 3 && a.failed === 0, statusOf(a));
        check((fs.statSync(path.join(repo, 'locked')).mode & 0o777) === 0o300, 'dir mode');
        check((fs.statSync(path.join(repo, 'wonly')).mode & 0o777) === 0o200, 'file mode');
        fs.chmodSync(path.join(repo, 'locked'), 0o700);
        fs.chmodSync(path.join(repo, 'locked', 'key'), 0o600);
        check(fs.readFileSync(path.join(repo, 'locked', 'key'), 'utf8') === 'secret\n', 'contents');
        check(owner(path.join(repo, 'locked', 'key')) === `${person.uid}:${person.gid}`, 'owner');
        fs.rmSync(path.join(repo, 'locked'), { recursive: true });
        fs.rmSync(path.join(repo, 'wonly'));
        await run(id, 'cd /workspace/proj && chmod 700 locked && rm -rf locked wonly');
    }],
    ['a second apply while one runs is refused, not run over the same files', async () => {
        await run(id, 'cd /workspace/proj && mkdir many && cd many && i=0; ' +
                      'while [ $i -lt 3000 ]; do echo $i > f$i; i=$((i+1)); done');
        const both = await reviewed({ sandbox_id: id });
        const [a, b] = await Promise.all([call('apply_changes', both), call('apply_changes', both)]);
        const refused = [a, b].filter((r) => r.isError);
        const done = [a, b].filter((r) => !r.isError);
        check(refused.length === 1 && /already running/.test(text(refused[0])),
              `expected one refusal: ${text(a).slice(0, 200)} / ${text(b).slice(0, 200)}`);
        check(done[0].structuredContent.applied === 3001 && done[0].structuredContent.failed === 0,
              JSON.stringify(done[0].structuredContent).slice(0, 300));
        check(fs.readdirSync(path.join(repo, 'many')).length === 3000, 'all applied');
        const again = await ok('review_changes', { sandbox_id: id });
        check(changesOf(again) === 'pipe added not-applicable', changesOf(again));
    }],
];

makeRepo();
await connect();
let failed = 1;
try {
    failed = await runCases(cases);
} finally {
    if (id) await call('destroy_sandbox', { sandbox_id: id }).catch(() => {});
    await client.close().catch(() => {});
    if (failed) console.log(`# server stderr:\n# ${stderr.split('\n').slice(-20).join('\n# ')}`);
    // A destroy answered over MCP releases the sandbox's files in the background, and the
    // server is gone soon after: what is left (the overlay's mode-0 work directory as a user)
    // is made removable first.
    try { execFileSync('chmod', ['-R', 'u+rwX', base], { stdio: 'ignore' }); } catch { /* some gone */ }
    try { fs.rmSync(base, { recursive: true, force: true }); } catch (e) { console.log(`# cleanup: ${e.message}`); }
}
process.exit(failed ? 1 : 0);
