// Code contexts outlive the mcpbox that made them, through OpenSandbox's API (issue 34): one
// `mcpbox serve --opensandbox-api` makes a sandbox, a named python context, the python default
// and a bash context, then stops; a second process on the same state serves them with their
// state and execution counts (raw HTTP per execd's spec, as the SDK has no code client), lists
// them by language, deletes one; a third finds the deleted one gone. As root and as a user
// (tests/local/rootless).
//   node test_code_restart_osapi.mjs --mcpbox path/to/mcpbox
import path from 'node:path';
import { NODE_DIR, check, done, parseArgs, requireTooling, startMcpbox, tempStateDir, test } from '../../opensandbox/osapi_lib.mjs';

requireTooling();
const args = parseArgs(process.argv.slice(2));
const { ConnectionConfig, Sandbox } = await import(path.join(NODE_DIR, '@alibaba-group/opensandbox/dist/index.js'));
const KEY = 'code-restart-' + process.pid + '-' + Math.random().toString(36).slice(2);
const stateDir = tempStateDir('code-restart');
const bin = path.resolve(args.mcpbox);
let server, sbxId, execd, tok, py, bash;

async function serve() { // a new mcpbox process on the same state, and execd's endpoint through it
  server = await startMcpbox(bin, { key: KEY, stateDir });
  const connectionConfig = new ConnectionConfig({ domain: server.base.replace('http://', ''), apiKey: KEY,
                                                  requestTimeoutSeconds: 60 });
  const sbx = sbxId ? await Sandbox.connect({ sandboxId: sbxId, connectionConfig })
                    : await Sandbox.create({ connectionConfig, image: 'host', timeoutSeconds: 600 });
  sbxId = sbx.id;
  const e = await sbx.getEndpoint(44772);
  execd = `http://${e.endpoint}`;
  tok = e.headers || {};
  return sbx;
}

async function stop() { // SIGTERM, and it must exit 0 without a sanitizer report
  const c = server.child;
  const exited = new Promise((r) => c.on('exit', (code, sig) => r(code ?? sig)));
  c.kill('SIGTERM');
  const code = await exited;
  check(code === 0 && !/Sanitizer|runtime error:/.test(c.errTail), `mcpbox stopped with ${code}: ${c.errTail}`);
}

async function call(method, p, body) {
  const r = await fetch(execd + p, { method, headers: { ...tok, 'Content-Type': 'application/json' },
                                     body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  let json;
  try { json = JSON.parse(text); } catch { json = undefined; }
  return { status: r.status, text, json };
}

async function run(body) {
  const r = await fetch(`${execd}/code`, { method: 'POST', headers: { ...tok, 'Content-Type': 'application/json', Accept: 'text/event-stream' }, body: JSON.stringify(body) });
  const text = await r.text();
  check(r.status === 200, `POST /code ${JSON.stringify(body)}: ${r.status} ${text}`);
  const events = text.split('\n\n').filter(Boolean).map((l) => JSON.parse(l));
  const of = (type) => events.filter((e) => e.type === type);
  return { events, text, of,
           result: of('result')[0]?.results?.text, count: of('execution_count')[0]?.execution_count,
           stdout: of('stdout').map((e) => e.text).join('') };
}

await test('the first process: contexts with state', async () => {
  await serve();
  py = (await call('POST', '/code/context', { language: 'python' })).json.id;
  bash = (await call('POST', '/code/context', { language: 'bash' })).json.id;
  check(/^ctx-/.test(py) && /^ctx-/.test(bash), `${py} ${bash}`);
  const a = await run({ context: { id: py, language: 'python' }, code: 'x = 41' });
  check(a.count === 1, a.text);
  await run({ context: { language: 'python' }, code: 'd = 5' });
  await run({ context: { id: bash, language: 'bash' }, code: 'V=7; cd /tmp' });
  await stop();
});

await test('a second process: the same state, counts going on, list by language', async () => {
  await serve();
  const a = await run({ context: { id: py, language: 'python' }, code: 'x + 1' });
  check(a.result === '42' && a.count === 2, a.text);
  const d = await run({ context: { language: 'python' }, code: 'd * 2' });
  check(d.result === '10' && d.count === 2, d.text);
  const b = await run({ context: { id: bash, language: 'bash' }, code: 'echo $V $PWD' });
  check(b.stdout === '7 /tmp\n', b.text);
  const l = await call('GET', '/code/contexts?language=python');
  check(l.status === 200 && l.json.some((c) => c.id === py) && l.json.every((c) => c.language === 'python') &&
        !l.json.some((c) => c.id === bash), l.text);
  const g = await call('GET', `/code/contexts/${bash}`);
  check(g.status === 200 && g.json.language === 'bash', g.text);
  const del = await call('DELETE', `/code/contexts/${bash}`);
  check(del.status === 200, del.text);
  check((await call('GET', `/code/contexts/${bash}`)).status === 404, 'deleted, yet found');
  await stop();
});

await test('a third process: the deleted context stays gone, the others live', async () => {
  const sbx = await serve();
  check((await call('GET', `/code/contexts/${bash}`)).status === 404, 'a deleted context came back');
  const l = await call('GET', '/code/contexts?language=bash');
  check(l.status === 200 && l.json.length === 0, l.text);
  const a = await run({ context: { id: py, language: 'python' }, code: 'x' });
  check(a.result === '41' && a.count === 3, a.text);
  await sbx.kill();
});

await done();
