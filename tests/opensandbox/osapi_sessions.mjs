// execd's bash sessions through the official OpenSandbox TypeScript SDK (issue 35), unchanged,
// against mcpbox's OpenSandbox API with a real local sandbox: createSession (with a working
// directory), runInSession keeping cwd, variables and functions, stdout and stderr apart, the exit
// code, a timeout that interrupts the command and not the session, deleteSession, and a run in a
// deleted or unknown session refused. The lifecycle goes through Prism's validating proxy.
//   node osapi_sessions.mjs --mcpbox path/to/mcpbox
import path from 'node:path';
import { NODE_DIR, check, done, parseArgs, requireTooling, startMcpbox, tempStateDir, test } from './osapi_lib.mjs';

requireTooling();
const args = parseArgs(process.argv.slice(2));
const { ConnectionConfig, Sandbox } = await import(path.join(NODE_DIR, '@alibaba-group/opensandbox/dist/index.js'));

const KEY = 'osapi-sessions-' + process.pid;
const mcpbox = await startMcpbox(args.mcpbox, { key: KEY, stateDir: tempStateDir('sessions') });
const connectionConfig = new ConnectionConfig({ domain: mcpbox.base.replace('http://', ''), apiKey: KEY,
                                                requestTimeoutSeconds: 60 });
const sbx = await Sandbox.create({ connectionConfig, image: 'host', timeoutSeconds: 600 });
const text = (ex, s) => ex.logs[s].map((m) => m.text).join('\n');
let sid;

await test('createSession in a working directory; state persists across runInSession', async () => {
  sid = await sbx.commands.createSession({ workingDirectory: '/tmp' });
  check(typeof sid === 'string' && sid.length > 0, sid);
  let ex = await sbx.commands.runInSession(sid, 'pwd; export A=1; f() { echo f$A; }; cd /etc');
  check(ex.exitCode === 0 && text(ex, 'stdout') === '/tmp', JSON.stringify(ex.logs));
  ex = await sbx.commands.runInSession(sid, 'pwd; f; echo oops >&2; exit_code_is() { return 3; }; exit_code_is');
  check(text(ex, 'stdout') === '/etc\nf1' && text(ex, 'stderr') === 'oops', JSON.stringify(ex.logs));
  check(ex.exitCode === 3 || (ex.error && ex.error.value === '3'), JSON.stringify([ex.exitCode, ex.error]));
});

await test('a timeout interrupts the command, the session lives on', async () => {
  const ex = await sbx.commands.runInSession(sid, 'B=kept; sleep 60', { timeoutSeconds: 1 });
  check(ex.error, `an error for the interrupted command: ${JSON.stringify(ex)}`);
  const again = await sbx.commands.runInSession(sid, 'echo $B $A');
  check(text(again, 'stdout') === 'kept 1', JSON.stringify(again.logs));
});

await test('two sessions are two shells', async () => {
  const other = await sbx.commands.createSession();
  const ex = await sbx.commands.runInSession(other, 'echo ${A:-unset}; pwd');
  check(text(ex, 'stdout') === 'unset\n/workspace', JSON.stringify(ex.logs));
  await sbx.commands.deleteSession(other);
});

await test('deleteSession ends it; a run there, or in an unknown session, is refused', async () => {
  await sbx.commands.deleteSession(sid);
  let failed = null;
  try {
    const ex = await sbx.commands.runInSession(sid, 'echo should-not-run');
    failed = ex.error ? ex.error.value : null;
    check(!text(ex, 'stdout').includes('should-not-run'), JSON.stringify(ex.logs));
  } catch (e) {
    failed = String(e);
  }
  check(failed && /no such session/.test(failed), `refused: ${failed}`);
  let deleted = null;
  try { await sbx.commands.deleteSession(sid); } catch (e) { deleted = String(e); }
  check(deleted && /404|SESSION_NOT_FOUND|no session/.test(deleted), `second delete: ${deleted}`);
});

await sbx.kill();
await sbx.close();
await done();
