// Issue 35, terminals on the opensandbox backend: `mcpbox serve` (stdio) with OPEN_SANDBOX_DOMAIN
// at a second mcpbox serving OpenSandbox's API over real local sandboxes. `terminal start` on an
// osb- sandbox must answer well within the client's 60 s (it once hung: the settling read was
// started from inside curl's callback for the start's stream, and curl refused to add it), and
// so must send, resize, read and close.
//   node terminal_osb.mjs --mcpbox path/to/mcpbox
import { spawn } from 'node:child_process';
import { connect, call, ok, text, parseArgs, requireBinary, tempStateDir, SKIP } from '../e2e/tools/tools_lib.mjs';

const args = parseArgs(process.argv.slice(2));
const bin = requireBinary(args.mcpbox);
const KEY = 'term-osb-' + process.pid + '-' + Math.random().toString(36).slice(2);

function startServer(stateDir) {
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
    child.on('exit', (c) => { if (!done) reject(new Error(`server exited ${c}: ${err}`)); });
  });
}
function check(cond, msg) { if (!cond) throw new Error(msg); }

const server = await startServer(tempStateDir('term-osb-server'));
Object.assign(process.env, {
  OPEN_SANDBOX_DOMAIN: `127.0.0.1:${server.port}`, OPEN_SANDBOX_API_KEY: KEY, OPEN_SANDBOX_REQUEST_TIMEOUT: '30',
});
let conn;
try {
  conn = await connect('stdio', { bin, stateDir: tempStateDir('term-osb') });
} catch (e) {
  console.log(`# SKIP: mcpbox did not start: ${e}`);
  server.child.kill();
  process.exit(SKIP);
}
let failed = 0;
try {
  const s = await ok(conn, 'create_sandbox', { backend: 'opensandbox', image: 'host' });
  const sid = s.sandbox_id;
  check(/^osb-/.test(sid), sid);
  // Each action within 15 s (the SDK client gives up at 60 s; a hang is the defect).
  const timed = async (a) => {
    const t0 = Date.now();
    const r = await Promise.race([call(conn, 'terminal', { sandbox_id: sid, ...a }),
      new Promise((_, rej) => setTimeout(() => rej(new Error(`terminal ${a.action} did not answer within 15 s`)), 15000))]);
    return { r, ms: Date.now() - t0 };
  };
  const { r, ms } = await timed({ action: 'start', command: 'sh' });
  console.log(`# start answered in ${ms} ms: ${text(r).slice(0, 300)}`);
  check(!r.isError, `terminal start failed: ${text(r)}`);
  const tid = r.structuredContent.terminal_id;
  const s2 = await timed({ action: 'send', terminal_id: tid, input: 'echo $((6*7))', keys: ['Enter'] });
  check(!s2.r.isError && /42/.test(s2.r.structuredContent.output || ''), text(s2.r));
  const z = await timed({ action: 'resize', terminal_id: tid, rows: 30, cols: 100 });
  check(!z.r.isError, text(z.r));
  const s3 = await timed({ action: 'send', terminal_id: tid, input: 'stty size', keys: ['Enter'] });
  check(/30 100/.test(s3.r.structuredContent.output || ''), text(s3.r));
  const rd = await timed({ action: 'read', terminal_id: tid, offset: 0 });
  check(/42/.test(rd.r.structuredContent.output) && /30 100/.test(rd.r.structuredContent.output), text(rd.r));
  const c = await timed({ action: 'close', terminal_id: tid });
  check(!c.r.isError, text(c.r));
  console.log('ok 1 - terminal start, send, close on an osb- sandbox answer promptly');
  await ok(conn, 'destroy_sandbox', { sandbox_id: sid });
} catch (e) {
  failed++;
  console.log(`not ok 1 - terminal on an osb- sandbox\n# ${String(e.stack || e).split('\n').join('\n# ')}`);
  console.log(`# mcpbox's stderr:\n# ${(conn.transport.stderrText?.() || '').slice(-3000).split('\n').join('\n# ')}`);
}
await conn.close?.();
server.child.kill('SIGTERM');
process.exit(failed ? 1 : 0);
