// End to end through MCP: `mcpbox serve` (stdio) with OPEN_SANDBOX_DOMAIN pointing at the fake
// OpenSandbox server, driven by the official TypeScript SDK client. Every sandbox tool runs on an
// "osb-" sandbox; injected faults end in tool errors that say what happened, within deadlines.
// With --real, OPEN_SANDBOX_DOMAIN points at a second mcpbox serving OpenSandbox's API
// (serve --http --opensandbox-api) over real local sandboxes: the same suite, a real round trip
// (mcpbox's OpenSandbox client against mcpbox's OpenSandbox server). What local sandboxes do not
// have (snapshots, code interpreters, diagnostics) must then fail with an error that says so; the
// fault injections need the fake and are skipped.
//   node e2e_mcp.mjs --mcpbox path/to/mcpbox [--real]
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

// A second mcpbox serving OpenSandbox's API over local sandboxes, in place of the fake.
function startReal(stateDir) {
  const child = spawn(bin, ['serve', '--http', '127.0.0.1:0', '--opensandbox-api', '--state-dir', stateDir,
                            '--local-pool', '0', '--approve', 'egress=allow'],
                      { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, MCPBOX_OPENSANDBOX_API_KEY: KEY } });
  let result = null;
  return new Promise((resolve, reject) => {
    let err = '';
    child.stderr.on('data', (d) => {
      err = (err + d).slice(-8192);
      if (result) result.errTail = err;
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)\/mcp/.exec(err);
      if (m && !result) { result = { child, port: +m[1], errTail: err }; resolve(result); }
    });
    child.on('exit', (c) => reject(new Error(`mcpbox --opensandbox-api exited ${c}: ${err}`)));
  });
}

const real = !!args.real;
async function fakeOnly(name, fn) {
  if (!real) return test(name, fn);
  n++;
  console.log(`ok ${n} - ${name} # SKIP needs the fake server's fault injection`);
}
// Local sandboxes serve code contexts too (issue 34, no Jupyter): the run_code cases run in both
// modes, a real round trip with --real; 'run_code on an image without Jupyter' needs the fake.
async function needsJupyter(name, fn) {
  return test(name, fn);
}
const fake = real ? await startReal(tempStateDir('osb-e2e-server')) : await startFake();
const IMAGE = real ? 'host' : 'ubuntu:24.04';
const stateDir = tempStateDir('osb-e2e');
Object.assign(process.env, {
  OPEN_SANDBOX_DOMAIN: `127.0.0.1:${fake.port}`, OPEN_SANDBOX_API_KEY: KEY,
  OPEN_SANDBOX_REQUEST_TIMEOUT: real ? '30' : '2',
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
  const s = await ok(conn, 'create_sandbox', { backend: 'opensandbox', image: IMAGE, cpu: 0.5, memory: '512m', env: { GREETING: 'hi' } });
  check(/^osb-/.test(s.sandbox_id), `id ${s.sandbox_id}`);
  check(s.state === 'running', `state ${s.state}`);
  sid = s.sandbox_id;
});

await test('get, list, update: renew, pause, resume', async () => {
  check((await ok(conn, 'get_sandbox', { sandbox_id: sid })).state === 'running', 'get');
  const l = await ok(conn, 'list_sandboxes', {});
  check(l.sandboxes.some((s) => s.sandbox_id === sid), 'listed');
  const r = await ok(conn, 'update_sandbox', { sandbox_id: sid, timeout_seconds: 3600 });
  check(Date.parse(r.expires_at) > Date.now() + 3500e3, `expires_at ${r.expires_at}`);
  check((await ok(conn, 'update_sandbox', { sandbox_id: sid, paused: true })).state === 'paused', 'paused');
  await fails(conn, 'run_command', { sandbox_id: sid, command: 'true' }, /paused|resume/i);
  check((await ok(conn, 'update_sandbox', { sandbox_id: sid, paused: false })).state === 'running', 'resumed');
});

// Issue 14: network_policy through MCP to networkPolicy and the egress sidecar's /policy: the
// fake's sidecar, or (--real) mcpbox's own /policy over a local sandbox with a network policy.
async function sidecarPolicy(rid) {
  if (!real) return (await fetch(`http://127.0.0.1:${fake.port}/_policy?id=${rid}`)).json();
  const ep = await (await fetch(`http://127.0.0.1:${fake.port}/v1/sandboxes/${rid}/endpoints/18080`,
    { headers: { 'OPEN-SANDBOX-API-KEY': KEY } })).json();
  return (await (await fetch(`http://${ep.endpoint}/policy`, { headers: ep.headers })).json()).policy;
}
await test('network_policy: create, get, update_sandbox, refusals', async () => {
  const s = await ok(conn, 'create_sandbox', { backend: 'opensandbox', image: IMAGE,
    network_policy: { egress: [{ action: 'allow', target: 'PyPI.org' }] } });
  check(s.network === true && s.network_policy.default_action === 'deny' &&
    s.network_policy.egress[0].target === 'pypi.org', JSON.stringify(s));
  const policy = () => sidecarPolicy(s.sandbox_id.slice(4));
  check(JSON.stringify(await policy()) === '{"defaultAction":"deny","egress":[{"action":"allow","target":"pypi.org"}]}',
    `sidecar at create: ${JSON.stringify(await policy())}`);
  const n = await ok(conn, 'update_sandbox', { sandbox_id: s.sandbox_id, network_policy: {
    egress: [{ action: 'allow', target: '*.pythonhosted.org' }, { action: 'allow', target: 'pypi.org' }] } });
  check(n.network_policy.egress.length === 2, JSON.stringify(n));
  check(JSON.stringify((await policy()).egress.map((r) => r.target)) === '["*.pythonhosted.org","pypi.org"]',
    `sidecar after set: ${JSON.stringify(await policy())}`);
  if (real) { // the change reached the enforcement: DNS inside is answered from the new policy
    const dns = await ok(conn, 'run_command', { sandbox_id: s.sandbox_id,
      command: 'getent hosts files.pythonhosted.org >/dev/null && echo allowed; getent hosts github.com >/dev/null || echo refused' });
    check(dns.stdout === 'allowed\nrefused\n', `lookups inside: ${JSON.stringify(dns)}`);
  }
  await fails(conn, 'update_sandbox', { sandbox_id: s.sandbox_id, network_policy: { default_action: 'allow' } },
    /cannot change default_action/);
  await fails(conn, 'create_sandbox', { backend: 'opensandbox', image: IMAGE,
    network_policy: { egress: [{ action: 'allow', target: 'a.org', ports: [443] }] } }, /limits ports/);
  await fails(conn, 'update_sandbox', { sandbox_id: sid, network_policy: { egress: [] } }, /created without network_policy/);
  await ok(conn, 'destroy_sandbox', { sandbox_id: s.sandbox_id });
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
  check(/^http:\/\/127\.0\.0\.1:\d+(\/|$)/.test(e.url), e.url);
  for (const what of ['summary', 'logs', 'events', 'inspect'])
    await ok(conn, 'diagnose_sandbox', { sandbox_id: sid, what });
});

// Issue 35: sessions on an osb- sandbox, over the remote's plain exec.
if (real) await test('run_command session on the opensandbox backend', async () => {
  const a = await ok(conn, 'run_command', { sandbox_id: sid, session: 'osb', command: 'cd /tmp && export K=kept' });
  check(a.session.cwd === '/tmp', JSON.stringify(a));
  const b = await ok(conn, 'run_command', { sandbox_id: sid, session: 'osb', command: 'echo $PWD $K' });
  check(b.stdout === '/tmp kept\n', JSON.stringify(b));
});

// Real: mcpbox's own OpenSandbox API keeps local snapshots (issue 36), so the round trip below
// runs against it too: a local snapshot restored as an opensandbox-backend sandbox.
if (real) await test('snapshot_sandbox: a paused source is refused', async () => {
  await ok(conn, 'update_sandbox', { sandbox_id: sid, paused: true });
  await fails(conn, 'snapshot_sandbox', { action: 'create', sandbox_id: sid }, /paused.*update_sandbox with paused: false/);
  await ok(conn, 'update_sandbox', { sandbox_id: sid, paused: false });
});

await test('snapshot_sandbox: create, list, restore with create_sandbox, delete', async () => {
  await ok(conn, 'write_file', { sandbox_id: sid, path: 'keep.txt', content: 'v1' });
  const c = await ok(conn, 'snapshot_sandbox', { action: 'create', sandbox_id: sid, name: 'before-v2' });
  check(c.state === 'ready' && /^snap[_-]/.test(c.snapshot_id) && c.name === 'before-v2' && c.sandbox_id === sid, JSON.stringify(c));
  await ok(conn, 'write_file', { sandbox_id: sid, path: 'keep.txt', content: 'v2' });
  const l = await ok(conn, 'snapshot_sandbox', { action: 'list', sandbox_id: sid, state: 'ready' });
  check(l.snapshots.length === 1 && l.snapshots[0].snapshot_id === c.snapshot_id, JSON.stringify(l));
  const g = await ok(conn, 'snapshot_sandbox', { action: 'get', snapshot_id: c.snapshot_id });
  check(g.snapshot_id === c.snapshot_id && g.state === 'ready', JSON.stringify(g));
  const r = await ok(conn, 'create_sandbox', { snapshot_id: c.snapshot_id }); // backend follows the snapshot
  check(/^osb-/.test(r.sandbox_id) && r.state === 'running' && r.sandbox_id !== sid, JSON.stringify(r));
  check((await ok(conn, 'read_file', { sandbox_id: r.sandbox_id, path: 'keep.txt' })).content === 'v1', 'restored content');
  await ok(conn, 'destroy_sandbox', { sandbox_id: r.sandbox_id });
  check((await ok(conn, 'snapshot_sandbox', { action: 'delete', snapshot_id: c.snapshot_id })).deleted === true, 'deleted');
  await fails(conn, 'snapshot_sandbox', { action: 'delete', snapshot_id: c.snapshot_id }, /no snapshot.*list/);
  await fails(conn, 'create_sandbox', { snapshot_id: c.snapshot_id }, /no snapshot/);
  await fails(conn, 'snapshot_sandbox', { action: 'create' }, /needs sandbox_id/);
  await fails(conn, 'snapshot_sandbox', { action: 'delete' }, /needs snapshot_id/);
});

await fakeOnly('snapshot_sandbox errors: paused source, a runtime without snapshots', async () => {
  await ok(conn, 'update_sandbox', { sandbox_id: sid, paused: true });
  await fails(conn, 'snapshot_sandbox', { action: 'create', sandbox_id: sid }, /paused.*update_sandbox with paused: false/);
  await ok(conn, 'update_sandbox', { sandbox_id: sid, paused: false });
  await control(fake.port, '/_config', { snapshots: 'unsupported' });
  await fails(conn, 'snapshot_sandbox', { action: 'create', sandbox_id: sid }, /cannot snapshot.*read_file/, 5000);
  await control(fake.port, '/_reset', {});
});

await test('review_changes and apply_changes say what to use instead (no copy-on-write mounts)', async () => {
  await fails(conn, 'review_changes', { sandbox_id: sid },
              /opensandbox backend has no copy-on-write mounts.*read_file.*local/);
  await fails(conn, 'apply_changes', { sandbox_id: sid, overwrite: true },
              /opensandbox backend has no copy-on-write mounts.*review_changes and apply_changes/);
});

await test('diagnose_sandbox what=metrics', async () => {
  const m = await ok(conn, 'diagnose_sandbox', { sandbox_id: sid, what: 'metrics' });
  check(m.what === 'metrics' && m.metrics.memory_used_bytes > 0 && m.metrics.cpu_count >= 1, JSON.stringify(m));
  check(m.metrics.memory_total_bytes >= m.metrics.memory_used_bytes && typeof m.metrics.timestamp === 'string', JSON.stringify(m));
});

await needsJupyter('run_code: default context keeps state, results, errors, progress, timeout', async () => {
  const cs = await ok(conn, 'create_sandbox', { backend: 'opensandbox', image: real ? IMAGE : 'opensandbox/code-interpreter:v1.0.1' });
  const cid = cs.sandbox_id;
  try {
    const a = await ok(conn, 'run_code', { sandbox_id: cid, code: 'x = 20\nprint("hello")\nx + 1' });
    check(a.status === 'ok' && a.stdout === 'hello\n' && a.results[0].text === '21' && a.execution_count === 1, JSON.stringify(a));
    check(a.language === 'python' && a.error === null && a.context_id, JSON.stringify(a));
    const b = await ok(conn, 'run_code', { sandbox_id: cid, code: 'x * 2' });
    check(b.results[0].text === '40' && b.context_id === a.context_id, JSON.stringify(b));
    const e = await ok(conn, 'run_code', { sandbox_id: cid, code: 'undefined_name' });
    check(e.status === 'error' && e.error.name === 'NameError', JSON.stringify(e));
    const big = await ok(conn, 'run_code', { sandbox_id: cid, code: 'for i in range(5): display(str(i) * 300000)' });
    // --real: mcpbox's /code keeps 1 MiB of results too; execd's stream has no count of the rest,
    // so it says so on stderr
    check(big.results.length === 3 && (real ? /2 results left out/.test(big.stderr)
                                            : big.results_dropped === 2 && big.truncated === true && /results_dropped/.test(big.note)),
      JSON.stringify({ ...big, results: big.results.length }));
    check(b.results_dropped === 0 && b.truncated === false && b.note === undefined, JSON.stringify(b));
    const progress = [];
    const p = await ok(conn, 'run_code', { sandbox_id: cid, code: 'import time\nfor i in range(5):\n    print("step", i)\n    time.sleep(0.7)' },
      { onprogress: (x) => progress.push(x), resetTimeoutOnProgress: true });
    check(p.status === 'ok' && p.stdout.includes('step 4'), JSON.stringify(p));
    check(progress.length >= 1 && /running code/.test(progress[0].message), JSON.stringify(progress));
    const t0 = Date.now();
    const t = await ok(conn, 'run_code', { sandbox_id: cid, code: 'import time\ntime.sleep(30)', timeout_seconds: 1 });
    check(t.status === 'timed_out' && /timeout_seconds/.test(t.note) && Date.now() - t0 < 6000, JSON.stringify(t));
    check((await ok(conn, 'run_code', { sandbox_id: cid, code: 'x' })).results[0].text === '20', 'state kept after the interrupt');
  } finally {
    await ok(conn, 'destroy_sandbox', { sandbox_id: cid });
  }
});

await needsJupyter('run_code: contexts (create, list, interrupt, delete) and cancellation interrupts', async () => {
  const cs = await ok(conn, 'create_sandbox', { backend: 'opensandbox', image: real ? IMAGE : 'opensandbox/code-interpreter:v1.0.1' });
  const cid = cs.sandbox_id;
  try {
    const c = await ok(conn, 'run_code', { sandbox_id: cid, action: 'create', language: 'python' });
    check(c.context_id && c.language === 'python', JSON.stringify(c));
    const r = await ok(conn, 'run_code', { sandbox_id: cid, context_id: c.context_id, code: 'y = 5\ny' });
    check(r.context_id === c.context_id && r.results[0].text === '5', JSON.stringify(r));
    const l = await ok(conn, 'run_code', { sandbox_id: cid, action: 'list' });
    check(l.contexts.some((x) => x.context_id === c.context_id), JSON.stringify(l));
    check((await ok(conn, 'run_code', { sandbox_id: cid, action: 'interrupt', context_id: c.context_id })).interrupted === true, 'interrupt');
    // a cancelled call interrupts its code: the context is free again at once
    const ac = new AbortController();
    const slow = call(conn, 'run_code', { sandbox_id: cid, context_id: c.context_id, code: 'import time\ntime.sleep(30)' }, { signal: ac.signal }).catch((e) => e);
    await new Promise((ok2) => setTimeout(ok2, 700));
    ac.abort();
    await slow;
    let after;
    for (let i = 0; i < 20; i++) { // the interrupt reaches the kernel shortly after the cancel
      after = await call(conn, 'run_code', { sandbox_id: cid, context_id: c.context_id, code: 'y + 1' });
      if (!after.isError) break;
      await new Promise((ok2) => setTimeout(ok2, 100));
    }
    check(!after.isError && after.structuredContent.results[0].text === '6', `after cancel: ${text(after)}`);
    check((await ok(conn, 'run_code', { sandbox_id: cid, action: 'delete', context_id: c.context_id })).deleted === true, 'delete');
    await fails(conn, 'run_code', { sandbox_id: cid, context_id: c.context_id, code: '1' }, /no code context/);
    await fails(conn, 'run_code', { sandbox_id: cid, action: 'delete' }, /needs context_id/);
    await fails(conn, 'run_code', { sandbox_id: cid }, /needs code/);
  } finally {
    await ok(conn, 'destroy_sandbox', { sandbox_id: cid });
  }
});

await fakeOnly('run_code on an image without Jupyter: a clear error within the deadline', async () => {
  await fails(conn, 'run_code', { sandbox_id: sid, code: 'print(1)' }, /no code interpreter.*code-interpreter.*run_command/, 5000);
  await control(fake.port, '/_config', { noJupyter: 'hang' });
  await fails(conn, 'run_code', { sandbox_id: sid, code: 'print(1)' }, /no code interpreter.*did not answer/, 8000);
  await control(fake.port, '/_reset', {});
});

await fakeOnly('faults end in clear tool errors within their deadlines', async () => {
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
if (fake.child.stdin) fake.child.stdin.end();
if (real) { // the serving mcpbox must stop cleanly (a sanitizer build reports here)
  const exited = new Promise((r) => fake.child.on('exit', (code, sig) => r(code ?? sig)));
  fake.child.kill('SIGTERM');
  const code = await Promise.race([exited, new Promise((r) => setTimeout(() => r('hung'), 15000))]);
  if (code !== 0 || /Sanitizer|runtime error:/.test(fake.errTail)) {
    failed++;
    console.log(`not ok - the --opensandbox-api mcpbox stopped with ${code}\n# ${fake.errTail.split('\n').join('\n# ')}`);
  }
}
fake.child.kill('SIGTERM');
fs.rmSync(stateDir, { recursive: true, force: true });
console.log(`1..${n}`);
process.exit(failed ? 1 : 0);
