// Every sandbox tool end to end, through the official TypeScript SDK client, on the local backend:
// happy paths, bad input, ownership across two clients, long commands with progress, the time
// budget turning a call into a background command, cancellation, output capping, a 10 MiB binary
// round trip. Every successful result is validated against the tool's outputSchema.
//
//   node tools_e2e.mjs --mcpbox BIN --transport stdio|http
// Env: MCPBOX_E2E_LONG_SECONDS (default 10; the full run uses 60),
//      MCPBOX_E2E_BIG_MIB (default 100), MCPBOX_E2E_BINARY_MIB (default 10).
// Exits 77 when this host cannot create local sandboxes (create_sandbox says why).
import crypto from 'node:crypto';
import fs from 'node:fs';
import {
    call, check, connect, fails, httpServer, ok, parseArgs, requireBinary, runCases, SKIP, sleep,
    startHttpServer, tempStateDir, text,
} from './tools_lib.mjs';

const args = parseArgs(process.argv.slice(2));
const bin = requireBinary(args.mcpbox);
const kind = args.transport || 'stdio';
const LONG_S = Number(process.env.MCPBOX_E2E_LONG_SECONDS || 10);
const BIG_MIB = Number(process.env.MCPBOX_E2E_BIG_MIB || 100);
const BIN_MIB = Number(process.env.MCPBOX_E2E_BINARY_MIB || 10);
const MISSING = 'sbx-00000000deadbeef';
const cleanups = [];

const stateDir = tempStateDir(`tools-${kind}`);
// Client A is the transport under test; client B is another owner on the same state directory:
// a client of a second HTTP server that has a token (owner "token:..."). (Two loopback clients of
// one user share their sandboxes: HTTP without a token gives them the owner local:uid:N.)
const server = await httpServer(bin, stateDir);
cleanups.push(() => server.stop());
const tokenB = `tools-e2e-${process.pid}`;
const serverB = await startHttpServer(bin, ['--token', tokenB], { stateDir });
cleanups.push(() => serverB.stop());
const A = kind === 'stdio'
    ? await connect('stdio', { bin, stateDir, name: 'A' })
    : await connect('http', { url: server.url, name: 'A' });
const B = await connect('http', { url: serverB.url, name: 'B',
                                  headers: { Authorization: `Bearer ${tokenB}` } });
cleanups.push(() => A.close(), () => B.close());

async function finish(code) {
    for (const f of cleanups.reverse()) { try { await f(); } catch { /* best effort */ } }
    fs.rmSync(stateDir, { recursive: true, force: true });
    process.exit(code);
}

// ---- can this host create sandboxes at all? ----
const first = await call(A, 'create_sandbox', { metadata: { test: 'tools-e2e' } });
if (first.isError) {
    // Skip only when the host really cannot run local sandboxes (the doctor's required checks
    // fail, or the backend is not built in); a failure on a capable host is a bug.
    const msg = text(first);
    console.log(`# create_sandbox failed: ${msg}`);
    const doc = /not enabled/.test(msg) ? null : await call(A, 'diagnose_sandbox', {});
    if (doc === null || doc.isError || doc.structuredContent.ok === false) {
        for (const c of doc?.structuredContent?.checks ?? [])
            if (!c.ok) console.log(`# doctor: ${c.name}: ${c.detail}`);
        console.log('# SKIP: this host cannot create local sandboxes');
        await finish(SKIP);
    }
    console.log('not ok 1 - create_sandbox fails although doctor says this host can run sandboxes');
    await finish(1);
}
const sb = first.structuredContent;
const id = sb.sandbox_id;
console.log(`# sandbox ${id} (${kind})`);

const sameButId = (m, ident) => m.replaceAll(ident, '<id>');

const cases = [
    ['tools/list has the tools of a local-only server, with output schemas', async () => {
        // the local backend has snapshots (issue 36) and code contexts (issue 34): both listed
        check(A.tools.has('snapshot_sandbox') && A.tools.has('run_code'), 'snapshot_sandbox and run_code listed');
        for (const n of ['create_sandbox', 'list_sandboxes', 'get_sandbox', 'destroy_sandbox',
            'update_sandbox', 'run_command', 'get_command',
            'kill_command', 'write_file', 'read_file', 'list_files', 'search_files',
            'replace_in_file', 'move_path', 'delete_path', 'make_directory', 'get_endpoint',
            'diagnose_sandbox']) {
            check(A.tools.has(n), `tool ${n} listed`);
            check(A.tools.get(n).outputSchema, `${n} has an outputSchema`);
        }
    }],
    ['create_sandbox result', async () => {
        check(/^sbx-[0-9a-f]{16}$/.test(id), `local id form: ${id}`);
        check(sb.backend === 'local' && sb.state === 'running', JSON.stringify(sb));
    }],
    ['list_sandboxes shows it, filtered by metadata', async () => {
        const l = await ok(A, 'list_sandboxes', { metadata: { test: 'tools-e2e' } });
        check(l.sandboxes.some((s) => s.sandbox_id === id), 'listed');
        const l2 = await ok(A, 'list_sandboxes', { metadata: ['test=tools-e2e'], state: null });
        check(l2.sandboxes.some((s) => s.sandbox_id === id), 'listed by a KEY=VALUE label');
        const l3 = await ok(A, 'list_sandboxes', { metadata: ['test=other'] });
        check(!l3.sandboxes.some((s) => s.sandbox_id === id), 'label filter');
        const r = await ok(A, 'list_sandboxes', { state: 'paused' });
        check(!r.sandboxes.some((s) => s.sandbox_id === id), 'state filter');
    }],
    ['get_sandbox', async () => {
        const g = await ok(A, 'get_sandbox', { sandbox_id: id });
        check(g.sandbox_id === id && g.state === 'running', JSON.stringify(g));
        check(g.network === false && g.network_policy === null, `no egress: ${JSON.stringify(g)}`);
    }],
    ['network_policy: bad policies refused precisely; none to change on a network:false sandbox', async () => {
        await fails(A, 'create_sandbox', { network_policy: { egress: [{ action: 'allow', target: '1.2.3.4' }] } },
            /network_policy\.egress\[0\]\.target "1\.2\.3\.4" is an IP address/);
        await fails(A, 'create_sandbox', { network: false, network_policy: { default_action: 'allow' } },
            /network: false turns egress off entirely/);
        await fails(A, 'update_sandbox', { sandbox_id: id, network_policy: { egress: [{ action: 'allow', target: 'pypi.org' }] } },
            /created with network: false and no network_policy/);
        await fails(A, 'update_sandbox', { sandbox_id: id, network_policy: {} }, /needs default_action and\/or egress/);
        await fails(A, 'update_sandbox', { sandbox_id: id }, /changes nothing without paused, timeout_seconds or network_policy/);
    }],
    ['run_command happy path: exit code, stdout, stderr, cwd, env, stdin', async () => {
        const r = await ok(A, 'run_command', {
            sandbox_id: id, command: 'echo out; echo err >&2; echo "$FOO"; cat; exit 3',
            env: { FOO: 'bar' }, stdin: 'from-stdin',
        });
        check(r.exit_code === 3 && r.status === 'exited', JSON.stringify(r));
        check(r.stdout === 'out\nbar\nfrom-stdin', `stdout ${JSON.stringify(r.stdout)}`);
        check(r.stderr === 'err\n', `stderr ${JSON.stringify(r.stderr)}`);
        check(r.truncated === false && typeof r.command_id === 'string', 'fields');
        const p = await ok(A, 'run_command', { sandbox_id: id, command: 'mkdir -p d1 && cd d1 && pwd' });
        const w = await ok(A, 'run_command', { sandbox_id: id, command: 'pwd', cwd: p.stdout.trim() });
        check(w.stdout.trim() === p.stdout.trim(), 'cwd honoured');
    }],
    ['run_command output is binary-safe (invalid UTF-8 replaced)', async () => {
        const r = await ok(A, 'run_command', { sandbox_id: id, command: "printf 'a\\377b'" });
        check(r.stdout === 'a\uFFFDb', JSON.stringify(r.stdout));
    }],
    ['run_command timeout_seconds kills the command', async () => {
        const r = await ok(A, 'run_command', { sandbox_id: id, command: 'sleep 30', timeout_seconds: 1 });
        check(r.status === 'timed_out' && r.duration_ms < 15000, JSON.stringify(r));
    }],
    [`a ${LONG_S} s command sends progress and completes`, async () => {
        const progress = [];
        const t0 = Date.now();
        const r = await ok(A, 'run_command',
            { sandbox_id: id, command: `for i in $(seq ${LONG_S}); do echo tick $i; sleep 1; done; echo finished`,
              wait_seconds: LONG_S + 30 },
            { onprogress: (p) => progress.push({ ...p, t: Date.now() - t0 }),
              timeout: 8000, resetTimeoutOnProgress: true, maxTotalTimeout: (LONG_S + 60) * 1000 });
        check(r.exit_code === 0 && r.stdout.endsWith('finished\n'), JSON.stringify(r).slice(0, 300));
        const expected = Math.floor(LONG_S / 3);
        check(progress.length >= expected, `${progress.length} progress notifications, want >= ${expected}`);
        check(progress.some((p) => /tick/.test(p.message || '')), 'progress carries the output tail');
        for (let i = 1; i < progress.length; i++)
            check(progress[i].progress > progress[i - 1].progress, 'progress grows');
        let gap = 0;
        for (let i = 1; i < progress.length; i++) gap = Math.max(gap, progress[i].t - progress[i - 1].t);
        console.log(`# ${progress.length} progress notifications in ${Date.now() - t0} ms, largest gap ${gap} ms`);
        check(gap < 3500, `largest gap between progress notifications ${gap} ms`);
    }],
    ['past its budget a command goes to the background; get_command finishes it', async () => {
        const r = await ok(A, 'run_command',
            { sandbox_id: id, command: 'echo started; sleep 4; echo fin', wait_seconds: 1 });
        check(r.status === 'running' && r.command_id, JSON.stringify(r));
        check(r.stdout.startsWith('started'), 'output so far');
        const g = await ok(A, 'get_command',
            { sandbox_id: id, command_id: r.command_id, wait_seconds: 20 }, { timeout: 40000 });
        check(g.status === 'exited' && g.exit_code === 0, JSON.stringify(g));
        check(/started\n[\s\S]*fin\n/.test(g.output), `output ${JSON.stringify(g.output)}`);
        check(g.eof === true, 'eof');
    }],
    ['background:true returns at once; kill_command stops it', async () => {
        const t0 = Date.now();
        const r = await ok(A, 'run_command', { sandbox_id: id, command: 'sleep 60', background: true });
        check(r.status === 'running' && Date.now() - t0 < 5000, JSON.stringify(r));
        // the answer is true: the final status once SIGKILL has landed (never "running")
        const k = await ok(A, 'kill_command', { sandbox_id: id, command_id: r.command_id });
        check(k.status === 'killed' || k.status === 'killing', `kill_command answered ${JSON.stringify(k)}`);
        const g = await ok(A, 'get_command', { sandbox_id: id, command_id: r.command_id, wait_seconds: 10 });
        check(g.status !== 'running', `status after kill: ${g.status}`);
    }],
    ['cancellation kills the command', async () => {
        const marker = `cancel-${Date.now()}`;
        const ac = new AbortController();
        const p = call(A, 'run_command', { sandbox_id: id, command: `echo $$ > ${marker}.pid; sleep 30; echo survived > ${marker}.after` },
            { signal: ac.signal });
        await sleep(1500);
        ac.abort('test cancels');
        let aborted = false;
        try { await p; } catch { aborted = true; }
        check(aborted, 'the SDK reports the abort');
        await sleep(1500);
        const pid = (await ok(A, 'read_file', { sandbox_id: id, path: `${marker}.pid` })).content.trim();
        const alive = await ok(A, 'run_command', { sandbox_id: id, command: `kill -0 ${pid} 2>/dev/null && echo alive || echo gone` });
        check(alive.stdout.trim() === 'gone', `process ${pid} after cancel: ${alive.stdout.trim()}`);
    }],
    [`${BIG_MIB} MiB of output stays within the cap, head and tail kept`, async () => {
        const cap = 16384;
        const r = await ok(A, 'run_command', {
            sandbox_id: id, max_output_bytes: cap,
            command: `echo BEGIN; head -c ${BIG_MIB * 1048576} /dev/zero | tr '\\0' x; echo; echo END`,
            // Under ASan on a loaded machine this takes longer than the default 50 s budget: wait
            // for the end (allowed past 50 s with a progress token, whose heartbeats reset the timer).
            wait_seconds: 600,
        }, { timeout: 170000, onprogress: () => {}, resetTimeoutOnProgress: true });
        check(r.exit_code === 0, `exit ${r.exit_code}`);
        check(r.truncated === true, 'truncated');
        check(Buffer.byteLength(r.stdout) <= cap + 200, `stdout is ${Buffer.byteLength(r.stdout)} bytes`);
        check(r.stdout.startsWith('BEGIN\nxxx'), 'head kept');
        check(r.stdout.endsWith('xxx\nEND\n'), 'tail kept');
        check(/\[\.\.\. \d+ bytes cut; call get_command with offset/.test(r.stdout), 'cut marker');
        check(r.stdout_bytes >= BIG_MIB * 1048576, `stdout_bytes ${r.stdout_bytes}`);
        const g = await ok(A, 'get_command', { sandbox_id: id, command_id: r.command_id, offset: 0, limit: 100 });
        check(g.output.startsWith('BEGIN'), 'the full output stays retrievable');
    }],
    [`binary round trip ${BIN_MIB} MiB base64 with equal sha256`, async () => {
        const data = crypto.randomBytes(BIN_MIB * 1048576);
        const sha = crypto.createHash('sha256').update(data).digest('hex');
        const w = await ok(A, 'write_file', { sandbox_id: id, path: 'rand.bin', content: data.toString('base64'), encoding: 'base64' },
                           { timeout: 120000 });
        check(w.sha256 === sha && w.size === data.length, JSON.stringify(w));
        // Read back in ranges: one read_file returns at most 7 MiB, whose base64 still fits the
        // 10 MiB message limit of the SDK's stdio client.
        const parts = [];
        const step = Math.ceil(data.length / 2);
        for (let off = 0; off < data.length; off += step) {
            const res = await call(A, 'read_file', { sandbox_id: id, path: 'rand.bin', offset: off, length: step },
                                   { timeout: 120000 });
            check(!res.isError, `read at ${off}: ${text(res).slice(0, 200)}`);
            const r = res.structuredContent;
            check(r.encoding === 'base64' && r.binary === true && r.size === data.length, 'binary as base64');
            check(r.truncated === (off + step < data.length), `truncated at ${off}`);
            const back = Buffer.from(r.content, 'base64');
            check(r.sha256 === crypto.createHash('sha256').update(back).digest('hex'), 'sha256 of the range echoed');
            check(text(res).length < 4096, 'the text block names the content instead of repeating it');
            parts.push(back);
        }
        check(crypto.createHash('sha256').update(Buffer.concat(parts)).digest('hex') === sha,
              'sha256 of the bytes read back equals the original');
        const part = await ok(A, 'read_file', { sandbox_id: id, path: 'rand.bin', offset: 1000, length: 16, encoding: 'base64' });
        check(Buffer.from(part.content, 'base64').equals(data.subarray(1000, 1016)), 'range read');
        check(part.truncated === true && part.size === data.length, 'range fields');
    }],
    ['write_file/read_file text, append, mode', async () => {
        const w = await ok(A, 'write_file', { sandbox_id: id, path: 'notes/a.txt', content: 'héllo\n' });
        check(w.size === 7 && w.sha256 === crypto.createHash('sha256').update('héllo\n').digest('hex'), JSON.stringify(w));
        await ok(A, 'write_file', { sandbox_id: id, path: 'notes/a.txt', content: 'more\n', append: true });
        const r = await ok(A, 'read_file', { sandbox_id: id, path: 'notes/a.txt' });
        check(r.content === 'héllo\nmore\n' && r.encoding === 'utf-8' && r.binary === false, JSON.stringify(r));
        await ok(A, 'write_file', { sandbox_id: id, path: 'run.sh', content: '#!/bin/sh\necho ran\n', mode: '755' });
        const x = await ok(A, 'run_command', { sandbox_id: id, command: './run.sh' });
        check(x.stdout === 'ran\n', `executable: ${JSON.stringify(x)}`);
    }],
    ['list_files, search_files, replace_in_file, move_path, make_directory, delete_path', async () => {
        await ok(A, 'make_directory', { sandbox_id: id, path: 'tree/sub' });
        await ok(A, 'write_file', { sandbox_id: id, path: 'tree/sub/x.py', content: 'print(1)\nprint(1)\n' });
        const l = await ok(A, 'list_files', { sandbox_id: id, path: './tree/', depth: 2 });
        check(l.entries.some((e) => e.path.endsWith('sub/x.py')), JSON.stringify(l).slice(0, 400));
        // paths come back tidy, modes as the octal strings write_file takes
        check(!/\/\.\/|\/\/|\/$/.test(l.path) && l.entries.every((e) => !e.path.includes('/./')), JSON.stringify(l).slice(0, 400));
        const xe = l.entries.find((e) => e.path.endsWith('sub/x.py'));
        check(xe.mode === '644', `mode ${JSON.stringify(xe)}`);
        const s = await ok(A, 'search_files', { sandbox_id: id, path: 'tree', pattern: '*.py' });
        check(s.matches.some((m) => m.endsWith('x.py')), JSON.stringify(s));
        // a unique match by default, like the edit tools models know; all: true for every one
        await fails(A, 'replace_in_file', { sandbox_id: id, path: 'tree/sub/x.py', old: 'print(1)', new: 'print(2)' },
            /occurs 2 times.*all: true/);
        const r1 = await ok(A, 'replace_in_file', { sandbox_id: id, path: 'tree/sub/x.py', old: 'print(1)\nprint(1)', new: 'print(3)\nprint(1)' });
        check(r1.replacements === 1, JSON.stringify(r1));
        const rp = await ok(A, 'replace_in_file', { sandbox_id: id, path: 'tree/sub/x.py', old: 'print(', new: 'print(2+', all: true });
        check(rp.replacements === 2, JSON.stringify(rp));
        await ok(A, 'replace_in_file', { sandbox_id: id, path: 'tree/sub/x.py', old: '2+3', new: '2' });
        await ok(A, 'replace_in_file', { sandbox_id: id, path: 'tree/sub/x.py', old: '2+1', new: '2', all: null });
        await ok(A, 'move_path', { sandbox_id: id, source: 'tree/sub/x.py', destination: 'tree/y.py' });
        const r = await ok(A, 'read_file', { sandbox_id: id, path: 'tree/y.py' });
        check(r.content === 'print(2)\nprint(2)\n', r.content);
        await ok(A, 'delete_path', { sandbox_id: id, path: 'tree', recursive: true });
        await fails(A, 'read_file', { sandbox_id: id, path: 'tree/y.py' }, /./);
    }],
    ['get_endpoint, diagnose_sandbox, doctor', async () => {
        const e = await ok(A, 'get_endpoint', { sandbox_id: id, port: 8080 });
        check(typeof e.url === 'string' && e.url.length > 0, JSON.stringify(e));
        for (const what of ['summary', 'events', 'logs', 'inspect'])
            await ok(A, 'diagnose_sandbox', { sandbox_id: id, what });
        // metrics from the sandbox's cgroups, CPU sampled while a busy loop runs in it
        const busy = await ok(A, 'run_command', { sandbox_id: id, command: 'i=0; while [ $i -lt 3000000 ]; do i=$((i+1)); done', background: true });
        const m = (await ok(A, 'diagnose_sandbox', { sandbox_id: id, what: 'metrics' })).metrics;
        check(m.sandbox_id === id && m.memory_used_bytes > 0 && m.pids >= 1 && m.cpu_count > 0, JSON.stringify(m));
        check(m.memory_total_bytes === null || m.memory_total_bytes >= m.memory_used_bytes, JSON.stringify(m));
        check(m.cpu_used_pct === null || (m.cpu_used_pct > 0 && m.cpu_used_pct <= 110), `busy cpu ${JSON.stringify(m)}`);
        await ok(A, 'kill_command', { sandbox_id: id, command_id: busy.command_id });
        const d = await ok(A, 'diagnose_sandbox', {}); // no sandbox: the host's checks
        check(d.ok === true && d.checks.length > 0, 'this host passed create, so its checks agree');
    }],
    ['local backend: snapshots and code contexts work (issues 34 and 36)', async () => {
        const s = await ok(A, 'snapshot_sandbox', { action: 'create', sandbox_id: id });
        check(s.state === 'ready' && s.sandbox_id === id, JSON.stringify(s));
        const l = await ok(A, 'snapshot_sandbox', { action: 'list' });
        check(l.snapshots.some((x) => x.snapshot_id === s.snapshot_id), JSON.stringify(l));
        await ok(A, 'snapshot_sandbox', { action: 'delete', snapshot_id: s.snapshot_id });
        await fails(A, 'snapshot_sandbox', { action: 'delete', snapshot_id: 'snap_1' }, /no snapshot/);
        await fails(A, 'create_sandbox', { backend: 'local', snapshot_id: 'snap_1' }, /no snapshot/);
        // run_code works locally (tests/local/code has the rest); an unknown context says what to do
        await fails(A, 'run_code', { sandbox_id: id, code: '1', context_id: 'ctx-none' }, /no code context.*action list/);
        await fails(A, 'run_code', { sandbox_id: MISSING, code: '1' }, /no sandbox|not found|list_sandboxes/i);
        await fails(A, 'snapshot_sandbox', { action: 'bogus' }, /action|enum/i);
    }],
    ['bad input: wrong types and missing fields are errors; unknown fields are named', async () => {
        await fails(A, 'run_command', { sandbox_id: 42, command: 'true' }, /sandbox_id|type|string/i);
        await fails(A, 'run_command', { sandbox_id: id }, /command/);
        await fails(A, 'read_file', { sandbox_id: id, path: 'x', bogus: 1 }, /bogus/);
        // the argument policy (docs/tools-design.md): null is absent, a client's own key is
        // dropped silently, any other unknown key is dropped and named in the result
        await ok(A, 'write_file', { sandbox_id: id, path: 'policy.txt', content: 'p' });
        const r = await call(A, 'read_file', { sandbox_id: id, path: 'policy.txt', offset: null,
                                               encoding: null, wait_for_previous: true, lenght: 5 });
        check(!r.isError && r.structuredContent.content === 'p', text(r));
        check(/ignored unknown argument "lenght"/.test(text(r)) && !/wait_for_previous/.test(text(r)), text(r));
        check(JSON.stringify(r.structuredContent.ignored_arguments) === '["lenght"]', text(r));
        const q = await call(A, 'read_file', { sandbox_id: id, path: 'policy.txt', wait_for_previous: false });
        check(!q.isError && q.content.length === 1, text(q));
        await fails(A, 'read_file', { sandbox_id: id, path: null }, /path/);
        // today's forms of env (an object) and sizes (integers) still work beside the advertised ones
        const e = await ok(A, 'run_command', { sandbox_id: id, command: 'echo $X$Y', env: { X: 'a' } });
        check(e.stdout === 'a\n', e.stdout);
        const e2 = await ok(A, 'run_command', { sandbox_id: id, command: 'echo $X$Y', env: ['X=b', 'Y=c=d'] });
        check(e2.stdout === 'bc=d\n', e2.stdout);
        await fails(A, 'run_command', { sandbox_id: id, command: 'true', env: ['NOEQUALS'] }, /env/);
        await fails(A, 'write_file', { sandbox_id: id, path: 'y', content: '%%%', encoding: 'base64' }, /base64/);
        await fails(A, 'create_sandbox', { memory: 'lots' }, /memory/);
    }],
    ['bad paths are errors, and none escapes the sandbox', async () => {
        await fails(A, 'read_file', { sandbox_id: id, path: 'no/such/file' }, /./);
        await fails(A, 'list_files', { sandbox_id: id, path: 'no/such/dir' }, /./);
        // A host file the sandbox must never see, through .. or a symlink.
        const secret = crypto.randomBytes(16).toString('hex');
        const hostFile = `${stateDir}/host-secret.txt`;
        fs.writeFileSync(hostFile, secret);
        await ok(A, 'run_command', { sandbox_id: id, command: `ln -sf ${hostFile} escape-link` });
        for (const path of ['escape-link', `../../../../../../..${hostFile}`, hostFile]) {
            const r = await call(A, 'read_file', { sandbox_id: id, path });
            check(r.isError || !String(r.structuredContent.content).includes(secret),
                  `host file readable through ${path}`);
        }
        const c = await ok(A, 'run_command', { sandbox_id: id, command: `cat ${hostFile} escape-link 2>/dev/null; true` });
        check(!c.stdout.includes(secret), 'host file readable by a command');
    }],
    ['a missing sandbox: actionable error', async () => {
        const m = await fails(A, 'get_sandbox', { sandbox_id: MISSING }, /list_sandboxes/);
        check(m.includes(MISSING), m);
        await fails(A, 'run_command', { sandbox_id: 'not-an-id', command: 'true' }, /sbx-|list_sandboxes/);
    }],
    ["another client's sandbox is reported exactly like a missing one", async () => {
        const missing = sameButId(await fails(B, 'get_sandbox', { sandbox_id: MISSING }), MISSING);
        for (const [tool, a] of [['get_sandbox', {}], ['run_command', { command: 'id' }],
            ['read_file', { path: 'notes/a.txt' }], ['write_file', { path: 'p', content: 'x' }],
            ['destroy_sandbox', {}], ['diagnose_sandbox', {}], ['update_sandbox', { paused: true }]]) {
            const msg = await fails(B, tool, { sandbox_id: id, ...a });
            check(sameButId(msg, id) === missing, `${tool}: "${msg}" vs "${missing}"`);
        }
        const l = await ok(B, 'list_sandboxes', {});
        check(!l.sandboxes.some((s) => s.sandbox_id === id), 'not in the other client list');
        await ok(A, 'get_sandbox', { sandbox_id: id }); // still there for its owner
    }],
    ['resource template, prompt and completion', async () => {
        const t = await A.client.listResourceTemplates();
        check(t.resourceTemplates.some((x) => x.uriTemplate === 'sandbox://{sandbox_id}/{+path}'), 'template listed');
        const pwd = (await ok(A, 'run_command', { sandbox_id: id, command: 'pwd' })).stdout.trim();
        const rr = await A.client.readResource({ uri: `sandbox://${id}${pwd}/notes/a.txt` });
        check(rr.contents[0].text === 'héllo\nmore\n', JSON.stringify(rr));
        let denied = false;
        try { await B.client.readResource({ uri: `sandbox://${id}${pwd}/notes/a.txt` }); } catch { denied = true; }
        check(denied, 'another client cannot read it');
        const p = await A.client.getPrompt({ name: 'troubleshoot_sandbox', arguments: { sandbox_id: id } });
        check(p.messages[0].content.text.includes(id) && /diagnose_sandbox/.test(p.messages[0].content.text), 'prompt');
        const c = await A.client.complete({ ref: { type: 'ref/prompt', name: 'troubleshoot_sandbox' },
                                            argument: { name: 'sandbox_id', value: 'sbx-' } });
        check(c.completion.values.includes(id), JSON.stringify(c));
        const cb = await B.client.complete({ ref: { type: 'ref/prompt', name: 'troubleshoot_sandbox' },
                                             argument: { name: 'sandbox_id', value: 'sbx-' } });
        check(!cb.completion.values.includes(id), 'completions only offer your own sandboxes');
    }],
    ['update_sandbox: paused refuses work until resumed; timeout_seconds extends expiry', async () => {
        const p = await ok(A, 'update_sandbox', { sandbox_id: id, paused: true });
        check(p.state === 'paused', JSON.stringify(p));
        await fails(A, 'run_command', { sandbox_id: id, command: 'true' }, /paused; call update_sandbox with paused: false/);
        await fails(A, 'read_file', { sandbox_id: id, path: 'notes/a.txt' }, /paused/);
        const r = await ok(A, 'update_sandbox', { sandbox_id: id, paused: false });
        check(r.state === 'running', JSON.stringify(r));
        await ok(A, 'run_command', { sandbox_id: id, command: 'true' });
        const n = await ok(A, 'update_sandbox', { sandbox_id: id, timeout_seconds: 7200 });
        check(n.expires_at && Date.parse(n.expires_at) > Date.now() + 7000 * 1000, JSON.stringify(n));
        // both at once: the expiry first, then the pause; the answer is the sandbox after both
        const b = await ok(A, 'update_sandbox', { sandbox_id: id, timeout_seconds: 9000, paused: true });
        check(b.state === 'paused' && Date.parse(b.expires_at) > Date.now() + 8900 * 1000, JSON.stringify(b));
        check((await ok(A, 'update_sandbox', { sandbox_id: id, paused: false })).state === 'running', 'resumed');
    }],
    ['destroy; a destroyed sandbox is an actionable error', async () => {
        const d = await ok(A, 'destroy_sandbox', { sandbox_id: id });
        check(d.destroyed === true && d.sandbox_id === id, JSON.stringify(d));
        // idempotent, as annotated: a second call succeeds for its owner, not for anyone else
        const d2 = await ok(A, 'destroy_sandbox', { sandbox_id: id });
        check(d2.destroyed === true && /already gone/.test(d2.note), JSON.stringify(d2));
        await fails(B, 'destroy_sandbox', { sandbox_id: id }, /no sandbox .* among yours/);
        await fails(A, 'run_command', { sandbox_id: id, command: 'true' }, /list_sandboxes|create_sandbox/);
        await fails(A, 'get_sandbox', { sandbox_id: id }, /./);
        const l = await ok(A, 'list_sandboxes', {});
        check(!l.sandboxes.some((s) => s.sandbox_id === id && s.state === 'running'), 'gone from the list');
    }],
];

const failed = await runCases(cases);
if (failed && A.transport.stderrText) console.log('# server stderr tail:\n# ' + A.transport.stderrText().slice(-3000).split('\n').join('\n# '));
if (failed) console.log('# http server stderr tail:\n# ' + server.stderr().slice(-3000).split('\n').join('\n# '));
await finish(failed ? 1 : 0);
