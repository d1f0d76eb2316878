// End to end through MCP: `mcpbox serve` (stdio) with OPEN_SANDBOX_DOMAIN pointing at the fake
// OpenSandbox server, driven by the official TypeScript SDK client. Every sandbox tool runs on an
// "osb-" sandbox; injected faults end in tool errors that say what happened, within deadlines.
//   node e2e_mcp.mjs --mcpbox path/to/mcpbox
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { connect, call, ok, text, parseArgs, requireBinary, tempStateDir, SKIP } from '../e2e/tools/tools_lib.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const args = parseArgs(process.argv.slice(2));
const bin = requireBinary(args.mcpbox);
const KEY = 'e2e-key-' + process.pid;

function startFake() {
  const child = spawn(process.execPath, [path.join(here, 'fake-server.mjs')], {
    stdio: ['pipe', 'pipe', 'inherit'],
    env: { ...process.env, FAKE_API_KEY: KEY, FAKE_PING_MS: '500', FAKE_GRACE_MS: '1000' },
  });
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
      const m = /listening (\d+)/.exec(out);
      if (m) resolve({ child, port: +m[1] });
    });
    child.on('exit', (c) => reject(new Error(`fake server exited ${c}`)));
  });
}

async function control(port, p, body) {
  const r = await fetch(`http://127.0.0.1:${port}${p}`, { method: 'POST', body: JSON.stringify(body) });
  return r.json();
}

let n = 0, failed = 0;
async function test(name, fn) {
  n++;
  try {
    await fn();
    console.log(`ok ${n} - ${name}`);
  } catch (e) {
    failed++;
    console.log(`not ok ${n} - ${name}\n# ${String(e.stack || e).split('\n').join('\n# ')}`);
  }
}
function check(cond, msg) { if (!cond) throw new Error(msg); }
async function fails(conn, tool, a, re, within) {
  const t0 = Date.now();
  const res = await call(conn, tool, a);
  const ms = Date.now() - t0;
  check(res.isError, `${tool} should fail, got ${JSON.stringify(res.structuredContent)}`);
  check(re.test(text(res)), `${tool} error "${text(res)}" does not match ${re}`);
  if (within) check(ms < within, `${tool} took ${ms} ms, want < ${within}`);
  return text(res);
}

const fake = await startFake();
const stateDir = tempStateDir('osb-e2e');
Object.assign(process.env, {
  OPEN_SANDBOX_DOMAIN: `127.0.0.1:${fake.port}`, OPEN_SANDBOX_API_KEY: KEY,
  OPEN_SANDBOX_REQUEST_TIMEOUT: '2',
});
let conn;
try {
  conn = await connect('stdio', { bin, stateDir });
} catch (e) {
  console.log(`# SKIP: mcpbox did not start: ${e}`);
  fake.child.kill();
  process.exit(SKIP);
}
let sid;

await test('create_sandbox on the opensandbox backend', async () => {
  const s = await ok(conn, 'create_sandbox', { backend: 'opensandbox', image: 'ubuntu:24.04', cpu: 0.5, memory: '512m', env: { GREETING: 'hi' } });
  check(/^osb-/.test(s.sandbox_id), `id ${s.sandbox_id}`);
  check(s.state === 'running', `state ${s.state}`);
  sid = s.sandbox_id;
});

await test('get, list, renew, pause, resume', async () => {
  check((await ok(conn, 'get_sandbox', { sandbox_id: sid })).state === 'running', 'get');
  const l = await ok(conn, 'list_sandboxes', {});
  check(l.sandboxes.some((s) => s.sandbox_id === sid), 'listed');
  const r = await ok(conn, 'renew_sandbox', { sandbox_id: sid, timeout_seconds: 3600 });
  check(Date.parse(r.expires_at) > Date.now() + 3500e3, `expires_at ${r.expires_at}`);
  check((await ok(conn, 'pause_sandbox', { sandbox_id: sid })).state === 'paused', 'paused');
  await fails(conn, 'run_command', { sandbox_id: sid, command: 'true' }, /paused|resume/i);
  check((await ok(conn, 'resume_sandbox', { sandbox_id: sid })).state === 'running', 'resumed');
});

await test('run_command streams progress, exit codes, stdin, env', async () => {
  const r = await ok(conn, 'run_command', { sandbox_id: sid, command: 'echo $GREETING; cat; exit 4', stdin: 'fed\n' });
  check(r.exit_code === 4 && r.stdout === 'hi\nfed\n', JSON.stringify(r));
  const progress = [];
  const t0 = Date.now();
  const p = await ok(conn, 'run_command', { sandbox_id: sid, command: 'for i in 1 2 3 4 5 6; do echo tick$i; sleep 0.5; done' },
    { onprogress: (x) => progress.push({ ...x, t: Date.now() - t0 }), resetTimeoutOnProgress: true });
  check(p.status === 'exited' && p.stdout.includes('tick6'), JSON.stringify(p));
  check(progress.length >= 1, `${progress.length} progress notifications`);
});

await test('background command, get_command, kill_command', async () => {
  const b = await ok(conn, 'run_command', { sandbox_id: sid, command: 'echo a; sleep 0.4; echo b', background: true });
  check(b.status === 'running' && b.command_id, JSON.stringify(b));
  const g = await ok(conn, 'get_command', { sandbox_id: sid, command_id: b.command_id, wait_seconds: 5 });
  check(g.eof && g.output === 'a\nb\n', JSON.stringify(g));
  const s = await ok(conn, 'run_command', { sandbox_id: sid, command: 'sleep 30', background: true });
  const k = await ok(conn, 'kill_command', { sandbox_id: sid, command_id: s.command_id });
  check(k.status === 'killed', JSON.stringify(k));
  const g2 = await ok(conn, 'get_command', { sandbox_id: sid, command_id: s.command_id, wait_seconds: 8 });
  check(g2.status === 'killed', JSON.stringify(g2));
});

await test('files: write, read, list, search, replace, move, mkdir, delete', async () => {
  const w = await ok(conn, 'write_file', { sandbox_id: sid, path: 'src/app.py', content: 'print("hello")\n' });
  check(w.size === 15, JSON.stringify(w));
  const r = await ok(conn, 'read_file', { sandbox_id: sid, path: 'src/app.py' });
  check(r.content === 'print("hello")\n', JSON.stringify(r));
  check((await ok(conn, 'list_files', { sandbox_id: sid, path: 'src' })).entries.length === 1, 'list');
  check((await ok(conn, 'search_files', { sandbox_id: sid, path: '/workspace', pattern: '*.py' })).matches.length === 1, 'search');
  check((await ok(conn, 'replace_in_file', { sandbox_id: sid, path: 'src/app.py', old: 'hello', new: 'world' })).replacements === 1, 'replace');
  await ok(conn, 'make_directory', { sandbox_id: sid, path: 'out' });
  await ok(conn, 'move_path', { sandbox_id: sid, source: 'src/app.py', destination: 'out/app.py' });
  check((await ok(conn, 'read_file', { sandbox_id: sid, path: 'out/app.py' })).content === 'print("world")\n', 'moved');
  await ok(conn, 'delete_path', { sandbox_id: sid, path: 'out', recursive: true });
  await fails(conn, 'read_file', { sandbox_id: sid, path: 'out/app.py' }, /no such file/i);
});

await test('get_endpoint and diagnose_sandbox', async () => {
  const e = await ok(conn, 'get_endpoint', { sandbox_id: sid, port: 8080 });
  check(/^http:\/\/127\.0\.0\.1:\d+\//.test(e.url), e.url);
  for (const what of ['summary', 'logs', 'events', 'inspect'])
    await ok(conn, 'diagnose_sandbox', { sandbox_id: sid, what });
});

await test('faults end in clear tool errors within their deadlines', async () => {
  await control(fake.port, '/_faults', [{ match: 'GET /v1/sandboxes/', kind: 'status', status: 500, message: 'database on fire' }]);
  await fails(conn, 'get_sandbox', { sandbox_id: sid }, /500.*database on fire/);
  await control(fake.port, '/_faults', [{ match: 'GET /v1/sandboxes/', kind: 'hang', times: 5 }]);
  await fails(conn, 'get_sandbox', { sandbox_id: sid }, /did not answer within/, 6000);
  await control(fake.port, '/_reset', {});
  await control(fake.port, '/_faults', [{ match: '/command', kind: 'cut', after: 1 }]);
  const r = await call(conn, 'run_command', { sandbox_id: sid, command: 'echo first; sleep 2; echo second' });
  const body = JSON.stringify(r.structuredContent || text(r));
  check(/lost|broke/.test(body), `cut stream: ${body}`);
  await control(fake.port, '/_reset', {});
  const bad = await fails(conn, 'create_sandbox', { backend: 'opensandbox', image: 'pullfail/x' }, /pull/);
  check(!bad.includes(KEY), 'no key in errors');
});

await test('destroy_sandbox', async () => {
  check((await ok(conn, 'destroy_sandbox', { sandbox_id: sid })).destroyed === true, 'destroyed');
  await fails(conn, 'get_sandbox', { sandbox_id: sid }, /no sandbox|not exist|list_sandboxes/i);
});

await conn.close();
fake.child.stdin.end();
fake.child.kill('SIGTERM');
fs.rmSync(stateDir, { recursive: true, force: true });
console.log(`1..${n}`);
process.exit(failed ? 1 : 0);
