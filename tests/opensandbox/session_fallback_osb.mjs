// Issue 35, MCP sessions on the opensandbox backend where the remote has no execd sessions:
// POST /session answers 404 (the fake OpenSandbox server has none), so run_command's session
// runs on mcpbox's helper scripts over /command instead, and its result's note says so, on the
// first command (found out then) and on the next (remembered). The helper's trailer (cwd) shows
// that the helper ran; the command's own output does not come back on the fake, whose commands
// write to sockets (Node's stdio), which the helper's shell cannot reopen through /proc.
//   node session_fallback_osb.mjs --mcpbox path/to/mcpbox
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { check, connect, ok, parseArgs, requireBinary, runCases, tempStateDir, SKIP } from '../e2e/tools/tools_lib.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const args = parseArgs(process.argv.slice(2));
const bin = requireBinary(args.mcpbox);
const KEY = 'sess-fb-' + process.pid + '-' + Math.random().toString(36).slice(2);

function startFake() {
  const child = spawn(process.execPath, [path.join(here, 'fake-server.mjs')], {
    stdio: ['pipe', 'pipe', 'inherit'], env: { ...process.env, FAKE_API_KEY: KEY },
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

const fake = await startFake();
Object.assign(process.env, {
  OPEN_SANDBOX_DOMAIN: `127.0.0.1:${fake.port}`, OPEN_SANDBOX_API_KEY: KEY, OPEN_SANDBOX_REQUEST_TIMEOUT: '10',
});
let conn;
try {
  conn = await connect('stdio', { bin, stateDir: tempStateDir('sess-fb') });
} catch (e) {
  console.log(`# SKIP: mcpbox did not start: ${e}`);
  fake.child.kill();
  process.exit(SKIP);
}
let sid;
// The fake runs commands on this host: the helper's session shells live under the sandbox's
// TMPDIR, made for this run so that no earlier run's shells count against the cap of 8, and
// ended below so that none outlives this one.
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'mcpbox-sess-fb-tmp-'));
function endShells() {
  for (const d of fs.readdirSync(tmp, { recursive: true }))
    if (path.basename(d) === 'pid') {
      try { process.kill(+fs.readFileSync(path.join(tmp, d), 'utf8'), 'SIGKILL'); } catch { /* gone */ }
    }
  fs.rmSync(tmp, { recursive: true, force: true });
}
const failed = await runCases([
  ['a remote without /session: the session runs on the helper scripts, and the note says so', async () => {
    sid = (await ok(conn, 'create_sandbox', { backend: 'opensandbox', image: 'ubuntu:24.04', env: { TMPDIR: tmp } })).sandbox_id;
    const name = 'fb' + process.pid;
    const a = await ok(conn, 'run_command', { sandbox_id: sid, session: name, command: 'true' });
    check(/no bash sessions \(POST \/session answered 404\).*helper shell/.test(a.note || ''), JSON.stringify(a));
    check(/\/workspace$/.test(a.session.cwd || ''), `the helper's trailer came back: ${JSON.stringify(a)}`);
    const b = await ok(conn, 'run_command', { sandbox_id: sid, session: name, command: 'true' });
    check(/no bash sessions.*helper shell/.test(b.note || '') && /\/workspace$/.test(b.session.cwd || ''), JSON.stringify(b));
    check(!/#/.test(a.command_id + b.command_id), 'the helper\'s commands are /command ones');
  }],
]);
if (failed) console.log(`# front's stderr:\n# ${(conn.transport.stderrText?.() || '').slice(-3000).split('\n').join('\n# ')}`);
await conn.close();
fake.child.kill('SIGTERM');
endShells();
process.exit(failed ? 1 : 0);
