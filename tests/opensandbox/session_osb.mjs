// Issue 35, MCP sessions on the opensandbox backend: run_command's `session` on an osb- sandbox
// maps onto execd's bash sessions (POST /session, /session/{id}/run, DELETE /session/{id}).
// The remote is a second mcpbox serving OpenSandbox's API over real local sandboxes; the front
// is `mcpbox serve` (stdio) with OPEN_SANDBOX_DOMAIN pointing at it.
//
// Checked: state kept across commands (cd, export, functions), the cwd after each command,
// stdout and stderr apart with the exit status, output without a final newline byte-exact, a
// line that looks like the end marker (with another nonce) passed through, stdin, a timeout
// (the command is stopped, the session lives on), a session the remote lost (said plainly,
// the next command starts a fresh one), a restart of the front between two commands, two
// sessions at once (each waits for the other: they must run concurrently), the cap of 8,
// output capped head+tail, get_command and kill_command on the command_id, a session of one
// sandbox unreachable from another, and two first commands of one name racing (no session
// leaked on the remote).
//   node session_osb.mjs --mcpbox path/to/mcpbox
import { spawn } from 'node:child_process';
import {
  call, check, connect, fails, ok, parseArgs, requireBinary, runCases, tempStateDir, text, SKIP,
} from '../e2e/tools/tools_lib.mjs';

const args = parseArgs(process.argv.slice(2));
const bin = requireBinary(args.mcpbox);
const KEY = 'sess-osb-' + process.pid + '-' + Math.random().toString(36).slice(2);

function startRemote(stateDir) {
  const child = spawn(bin, ['serve', '--http', '127.0.0.1:0', '--opensandbox-api', '--state-dir', stateDir,
                            '--local-pool', '0'],
                      { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, MCPBOX_OPENSANDBOX_API_KEY: KEY } });
  return new Promise((resolve, reject) => {
    let err = '', done = false;
    child.stderr.on('data', (d) => {
      err = (err + d).slice(-8192);
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)\/mcp/.exec(err);
      if (m && !done) { done = true; resolve({ child, port: +m[1] }); }
    });
    child.on('exit', (c) => { if (!done) reject(new Error(`remote exited ${c}: ${err}`)); });
  });
}

const remote = await startRemote(tempStateDir('sess-osb-remote'));
Object.assign(process.env, {
  OPEN_SANDBOX_DOMAIN: `127.0.0.1:${remote.port}`, OPEN_SANDBOX_API_KEY: KEY, OPEN_SANDBOX_REQUEST_TIMEOUT: '30',
});
const frontState = tempStateDir('sess-osb-front');
let conn;
try {
  conn = await connect('stdio', { bin, stateDir: frontState });
} catch (e) {
  console.log(`# SKIP: mcpbox did not start: ${e}`);
  remote.child.kill();
  process.exit(SKIP);
}

let sid, sid2, sid3;
const run = (a) => ok(conn, 'run_command', { sandbox_id: sid, ...a });

// The remote's execd for the sandbox (the endpoint its lifecycle API gives), to act as a remote would.
async function execd(path, method, id = sid) {
  const base = `http://127.0.0.1:${remote.port}`;
  const h = { 'OPEN-SANDBOX-API-KEY': KEY };
  const ep = await (await fetch(`${base}/v1/sandboxes/${id.slice(4)}/endpoints/44772`, { headers: h })).json();
  const url = (/^https?:/.test(ep.endpoint) ? '' : 'http://') + ep.endpoint + path;
  return fetch(url, { method, headers: { ...h, ...(ep.headers || {}) } });
}
const sessionOf = (r) => r.command_id.slice(0, r.command_id.indexOf('#'));

const cases = [
  ['a session on an osb- sandbox keeps cd, export and functions; cwd reported', async () => {
    sid = (await ok(conn, 'create_sandbox', { backend: 'opensandbox', image: 'host' })).sandbox_id;
    check(/^osb-/.test(sid), sid);
    const r1 = await run({ session: 'main', command: 'cd /tmp && export FOO=bar && f() { echo "fn-$1"; }' });
    check(r1.exit_code === 0 && r1.session.name === 'main' && r1.session.cwd === '/tmp', JSON.stringify(r1));
    check(/#/.test(r1.command_id), `a session command's id names its session: ${r1.command_id}`);
    const r2 = await run({ session: 'main', command: 'echo "$FOO"; f x; pwd; echo oops >&2; (exit 3)' });
    check(r2.stdout === 'bar\nfn-x\n/tmp\n' && r2.stderr === 'oops\n', JSON.stringify(r2));
    check(r2.exit_code === 3 && r2.session.cwd === '/tmp', JSON.stringify(r2));
    const r3 = await run({ session: 'main', command: 'printf abc', cwd: '/' });
    check(r3.stdout === 'abc' && r3.session.cwd === '/', JSON.stringify(r3));
  }],
  ['a forged end marker, stdin, env are the command\'s own', async () => {
    const fake = '0123456789abcdef0123456789abcdef done 0 /forged';
    const r = await run({ session: 'main', command: `echo; echo '${fake}'; cat; echo "$ZED"`, stdin: 'in-put\n',
                          env: { ZED: "it's" } });
    check(r.stdout === `\n${fake}\nin-put\nit's\n` && r.exit_code === 0 && r.session.cwd === '/', JSON.stringify(r));
  }],
  ['a timeout stops the command, the session lives on', async () => {
    const r = await run({ session: 'main', command: 'echo before; sleep 30', timeout_seconds: 2 });
    check(r.status === 'timed_out' && /timeout_seconds/.test(r.note || '') && r.stdout === 'before\n', JSON.stringify(r));
    const r2 = await run({ session: 'main', command: 'echo "$FOO"; f y' });
    check(r2.stdout === 'bar\nfn-y\n', JSON.stringify(r2));
  }],
  ['output capped head and tail; get_command on the command_id', async () => {
    const r = await run({ session: 'main', command: 'seq 1 100000', max_output_bytes: 2000 });
    check(r.truncated === true && r.stdout.startsWith('1\n2\n') && r.stdout.endsWith('99999\n100000\n'), JSON.stringify(r).slice(0, 400));
    check(r.stdout_bytes === 588895, `stdout_bytes ${r.stdout_bytes} (the marker is not counted)`);
    const g = await ok(conn, 'get_command', { sandbox_id: sid, command_id: r.command_id, offset: 588895 - 7 });
    check(g.output === '100000\n' && g.status === 'exited', JSON.stringify(g));
  }],
  ['a session the remote lost says so; the next command starts a fresh one', async () => {
    const r = await run({ session: 'main', command: 'true' });
    const del = await execd(`/session/${encodeURIComponent(sessionOf(r))}`, 'DELETE');
    check(del.status === 200, `remote DELETE /session answered ${del.status}`);
    await fails(conn, 'run_command', { sandbox_id: sid, session: 'main', command: 'echo x' },
                /no longer has this session.*run it again/);
    const r2 = await run({ session: 'main', command: 'echo "[$FOO]"; pwd' });
    check(r2.stdout.startsWith('[]\n') && r2.exit_code === 0, JSON.stringify(r2));
    check(sessionOf(r2) !== sessionOf(r), 'a new execd session');
  }],
  ['`exit` in a session: its status, then the session is said lost, then a fresh one', async () => {
    await run({ session: 'ex', command: 'EX=1' });
    const r = await run({ session: 'ex', command: 'echo bye; exit 3' });
    check(r.exit_code === 3 && r.stdout === 'bye\n' && r.session.cwd === null && /did not report/.test(r.note || ''), JSON.stringify(r));
    await fails(conn, 'run_command', { sandbox_id: sid, session: 'ex', command: 'true' }, /no longer has this session/);
    const r2 = await run({ session: 'ex', command: 'echo "[$EX]"' });
    check(r2.stdout === '[]\n', JSON.stringify(r2));
  }],
  ['the session survives a restart of the front mcpbox', async () => {
    await run({ session: 'keep', command: 'cd /var && K=kept' });
    await conn.close();
    conn = await connect('stdio', { bin, stateDir: frontState });
    const r = await run({ session: 'keep', command: 'echo "$K"; pwd' });
    check(r.stdout === 'kept\n/var\n' && r.session.cwd === '/var', JSON.stringify(r));
  }],
  ['two sessions at once run concurrently and apart', async () => {
    const d = `/tmp/sess-osb-${process.pid}`;
    const wait = (me, other) => `mkdir -p ${d}; cd ${d}; touch ${me}; for i in $(seq 200); do [ -e ${other} ] && break; sleep 0.05; done; [ -e ${other} ] && echo ${me}-saw-${other}`;
    const [a, b] = await Promise.all([
      run({ session: 'left', command: wait('l', 'r'), timeout_seconds: 30 }),
      run({ session: 'right', command: wait('r', 'l'), timeout_seconds: 30 }),
    ]);
    check(a.stdout === 'l-saw-r\n' && b.stdout === 'r-saw-l\n', JSON.stringify([a, b]));
    check(sessionOf(a) !== sessionOf(b), 'two execd sessions');
  }],
  ['kill_command ends the session (execd has no interrupt); the next command starts fresh', async () => {
    await run({ session: 'kill', command: 'KV=1' });
    const bg = await run({ session: 'kill', command: 'sleep 60', background: true });
    check(bg.status === 'running', JSON.stringify(bg));
    const k = await ok(conn, 'kill_command', { sandbox_id: sid, command_id: bg.command_id });
    check(k.status === 'killed', JSON.stringify(k));
    const g = await ok(conn, 'get_command', { sandbox_id: sid, command_id: bg.command_id });
    check(g.status === 'killed', JSON.stringify(g));
    const r = await run({ session: 'kill', command: 'echo "[$KV]"' });
    check(r.stdout === '[]\n', JSON.stringify(r));
    await fails(conn, 'get_command', { sandbox_id: sid, command_id: 'nosuch#00000000' }, /no command/);
  }],
  ['at most 8 sessions per sandbox; a session is its sandbox\'s own', async () => {
    sid2 = (await ok(conn, 'create_sandbox', { backend: 'opensandbox', image: 'host' })).sandbox_id;
    for (let i = 0; i < 8; i++)
      await ok(conn, 'run_command', { sandbox_id: sid2, session: `c${i}`, command: `V=${i}` });
    await fails(conn, 'run_command', { sandbox_id: sid2, session: 'c8', command: 'true' }, /most sessions it may have \(8\)/);
    const r = await ok(conn, 'run_command', { sandbox_id: sid2, session: 'c3', command: 'echo "$V"' });
    check(r.stdout === '3\n', JSON.stringify(r));
    const other = await run({ session: 'c3', command: 'echo "[$V]"' }); // sid's own c3: fresh
    check(other.stdout === '[]\n', JSON.stringify(other));
    await fails(conn, 'run_command', { sandbox_id: sid2, session: '../main', command: 'true' }, /session/);
  }],
  ['two first commands of one new name at once leave one execd session (no leak past the cap)', async () => {
    sid3 = (await ok(conn, 'create_sandbox', { backend: 'opensandbox', image: 'host' })).sandbox_id;
    const both = await Promise.all([0, 1].map((i) =>
      call(conn, 'run_command', { sandbox_id: sid3, session: 'race', command: `echo r${i}` })));
    check(both.some((r) => !r.isError), JSON.stringify(both.map(text)));
    for (const r of both)
      check(!r.isError || /running another command|refused/.test(text(r)), text(r));
    // The remote (mcpbox) counts live shells in the sandbox: a leaked session would refuse the 8th.
    for (let i = 0; i < 7; i++)
      await ok(conn, 'run_command', { sandbox_id: sid3, session: `n${i}`, command: 'true' });
  }],
];

let failed = await runCases(cases);
if (failed) console.log(`# front's stderr:\n# ${(conn.transport.stderrText?.() || '').slice(-3000).split('\n').join('\n# ')}`);
for (const id of [sid, sid2, sid3].filter(Boolean))
  await call(conn, 'destroy_sandbox', { sandbox_id: id }).catch(() => {});
await conn.close();
remote.child.kill('SIGTERM');
process.exit(failed ? 1 : 0);
