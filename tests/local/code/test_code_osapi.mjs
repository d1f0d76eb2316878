// OpenSandbox's code interpreter (/code, /code/context, /code/contexts, /code/contexts/{id})
// served over local sandboxes (issue 34). The official TypeScript SDK (@alibaba-group/opensandbox)
// has no code-interpreter client (its types name the paths only), so: the SDK makes the sandbox
// and gives execd's endpoint, the context calls go through Prism's validating proxy of the
// official execd spec, and the event streams (which Prism buffers) are read directly and each
// event checked against ServerStreamEvent, as tests/opensandbox/osapi_contract.mjs does.
//   node test_code_osapi.mjs --mcpbox path/to/mcpbox
import path from 'node:path';
import { NODE_DIR, check, done, parseArgs, requireTooling, startMcpbox, startPrism, tempStateDir, test, through } from '../../opensandbox/osapi_lib.mjs';

requireTooling();
const args = parseArgs(process.argv.slice(2));
const { ConnectionConfig, Sandbox } = await import(path.join(NODE_DIR, '@alibaba-group/opensandbox/dist/index.js'));

const KEY = 'code-osapi-' + process.pid + '-' + Math.random().toString(36).slice(2);
const mcpbox = await startMcpbox(path.resolve(args.mcpbox), { key: KEY, stateDir: tempStateDir('code') });
const connectionConfig = new ConnectionConfig({ domain: mcpbox.base.replace('http://', ''), apiKey: KEY,
                                                requestTimeoutSeconds: 60 });
let sbx, execdBase, tok, X;

async function stream(body, where = '/code') {
  const r = await fetch(`${execdBase}${where}`, { method: 'POST', headers: { ...tok, 'Content-Type': 'application/json', Accept: 'text/event-stream' }, body: JSON.stringify(body) });
  const text = await r.text();
  if (r.status !== 200) return { status: r.status, text };
  check(r.headers.get('content-type') === 'text/event-stream', r.headers.get('content-type'));
  const events = text.split('\n\n').filter(Boolean).map((l) => JSON.parse(l));
  const types = ['init', 'status', 'error', 'stdout', 'stderr', 'result', 'execution_complete', 'execution_count', 'ping'];
  for (const e of events) {
    check(types.includes(e.type) && Number.isInteger(e.timestamp), `event ${JSON.stringify(e)}`);
    if (e.error) check(typeof e.error.ename === 'string' && typeof e.error.evalue === 'string' && Array.isArray(e.error.traceback), JSON.stringify(e));
    if (e.results) check(typeof e.results === 'object' && typeof e.results.text === 'string', JSON.stringify(e));
  }
  return { status: 200, events };
}
const of = (s, type) => s.events.filter((e) => e.type === type);

await test('the SDK makes a local sandbox and names its execd', async () => {
  sbx = await Sandbox.create({ connectionConfig, image: 'host', timeoutSeconds: 600 });
  const e = await sbx.getEndpoint(44772);
  execdBase = `http://${e.endpoint}`;
  tok = e.headers || {};
  X = (await startPrism('execd-api.yaml', execdBase)).base;
});

let py;
await test('POST /code/context, then runs keep state: stdout, result, execution_count', async () => {
  const c = await through(X, 'POST', '/code/context', { headers: tok, body: { language: 'python' }, expect: 200 });
  py = c.json.id;
  check(/^ctx-/.test(py) && c.json.language === 'python', c.text);
  const a = await stream({ context: { id: py, language: 'python' }, code: 'x = 2\nprint("hi")\nx * 21' });
  check(a.status === 200, a.text);
  check(a.events[0].type === 'init' && a.events[0].text === py, JSON.stringify(a.events[0]));
  check(of(a, 'stdout').map((e) => e.text).join('') === 'hi\n', JSON.stringify(a.events));
  check(of(a, 'result')[0].results.text === '42', JSON.stringify(a.events));
  check(a.events[a.events.length - 1].type === 'execution_complete', JSON.stringify(a.events));
  const n = of(a, 'execution_count')[0].execution_count;
  const b = await stream({ context: { id: py }, code: 'x' });
  check(of(b, 'result')[0].results.text === '2', JSON.stringify(b.events));
  check(of(b, 'execution_count')[0].execution_count === n + 1, JSON.stringify(b.events));
});

await test('an error event with ename, evalue and traceback', async () => {
  const s = await stream({ context: { id: py }, code: 'def f():\n    return 1 / 0\nf()' });
  const e = of(s, 'error')[0].error;
  check(e.ename === 'ZeroDivisionError' && e.traceback.some((l) => l.includes('1 / 0')), JSON.stringify(e));
});

await test('GET /code/contexts?language= and /code/contexts/{id}', async () => {
  const l = await through(X, 'GET', '/code/contexts?language=python', { headers: tok, expect: 200 });
  check(l.json.some((c) => c.id === py && c.language === 'python'), l.text);
  const g = await through(X, 'GET', `/code/contexts/${py}`, { headers: tok, expect: 200 });
  check(g.json.id === py, g.text);
  await through(X, 'GET', '/code/contexts/ctx-nosuch', { headers: tok, expect: 404 });
});

await test('DELETE /code?id= interrupts a run at once; the context keeps its state', async () => {
  const run = stream({ context: { id: py }, code: 'import time\ntime.sleep(60)' });
  await new Promise((r) => setTimeout(r, 800));
  const t0 = Date.now();
  await through(X, 'DELETE', `/code?id=${py}`, { headers: tok, expect: 200, raw: true });
  const s = await run;
  check(Date.now() - t0 < 2000, `answered after ${Date.now() - t0} ms`);
  check(of(s, 'error')[0].error.ename === 'KeyboardInterrupt', JSON.stringify(s.events));
  const after = await stream({ context: { id: py }, code: 'x' });
  check(of(after, 'result')[0].results.text === '2', JSON.stringify(after.events));
});

await test('a language without a context id runs in that language\'s default context; bash', async () => {
  const d = await stream({ context: { language: 'python' }, code: '1 + 1' });
  check(of(d, 'result')[0].results.text === '2', JSON.stringify(d.events));
  const c = await through(X, 'POST', '/code/context', { headers: tok, body: { language: 'bash' }, expect: 200 });
  await stream({ context: { id: c.json.id }, code: 'N=6' });
  const s = await stream({ context: { id: c.json.id }, code: 'echo $((N * 7))' });
  check(of(s, 'stdout').map((e) => e.text).join('') === '42\n', JSON.stringify(s.events));
  await through(X, 'DELETE', '/code/contexts?language=bash', { headers: tok, expect: 200, raw: true });
  const l = await through(X, 'GET', '/code/contexts?language=bash', { headers: tok, expect: 200 });
  check(l.json.length === 0, l.text);
});

await test('DELETE /code/contexts/{id}; an unknown context is 404; stateless /code still a shell', async () => {
  await through(X, 'DELETE', `/code/contexts/${py}`, { headers: tok, expect: 200, raw: true });
  await through(X, 'GET', `/code/contexts/${py}`, { headers: tok, expect: 404 });
  const s = await stream({ context: { id: py }, code: '1' });
  check(s.status === 404, `${s.status} ${s.text}`);
  const sh = await stream({ code: 'echo stateless' });
  check(sh.events[1].text === 'stateless', JSON.stringify(sh.events));
});

await test('an image without the interpreter: a clear error naming it', async () => {
  const bare = await Sandbox.create({ connectionConfig, image: 'host', timeoutSeconds: 600,
                                      env: { PATH: '/nonexistent' } });
  const e = await bare.getEndpoint(44772);
  const r = await fetch(`http://${e.endpoint}/code/context`, { method: 'POST', headers: { ...(e.headers || {}), 'Content-Type': 'application/json' }, body: JSON.stringify({ language: 'python' }) });
  const text = await r.text();
  check(r.status === 400 && /no python3 on PATH/.test(text), `${r.status} ${text}`);
  await bare.kill();
});

await sbx?.kill();
await done();
