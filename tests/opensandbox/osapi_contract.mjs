// Contract: every answer of mcpbox's OpenSandbox API (serve --opensandbox-api, real local
// sandboxes) passes Prism's validating proxy (--errors) built from the official specs in ./specs:
// the lifecycle API at /v1 and, for one sandbox, execd through the server-proxy path. Errors must
// come in OpenSandbox's shape too.
//   node osapi_contract.mjs --mcpbox path/to/mcpbox
import { check, done, parseArgs, requireTooling, startMcpbox, startPrism, tempStateDir, test, through } from './osapi_lib.mjs';

requireTooling();
const args = parseArgs(process.argv.slice(2));
const KEY = 'osapi-contract-' + process.pid;
const auth = { 'OPEN-SANDBOX-API-KEY': KEY };
const mcpbox = await startMcpbox(args.mcpbox, { key: KEY, stateDir: tempStateDir('contract') });
const life = await startPrism('sandbox-lifecycle.yml', `${mcpbox.base}/v1`);
const L = life.base;
const create = (extra = {}) => ({ image: { uri: 'host' }, entrypoint: ['tail', '-f', '/dev/null'],
  resourceLimits: { cpu: '1', memory: '1Gi' }, timeout: 600, networkPolicy: { defaultAction: 'deny' },
  metadata: { suite: 'contract', run: String(process.pid) }, ...extra });
let id, id2;

await test('create answers 202 with a Sandbox in the spec', async () => {
  const r = await through(L, 'POST', '/sandboxes', { headers: auth, body: create(), expect: 202 });
  id = r.json.id;
  check(/^sbx-/.test(id), `id ${id}`);
  check(r.json.status.state === 'Running', `state ${r.json.status.state}`);
  check(r.headers.get('x-request-id'), 'X-Request-ID');
  const r2 = await through(L, 'POST', '/sandboxes', { headers: auth, body: create({ metadata: { suite: 'contract', other: 'yes' } }), expect: 202 });
  id2 = r2.json.id;
});

await test('no key: 401 MISSING_API_KEY; a wrong one: 401 INVALID_API_KEY', async () => {
  const r = await fetch(`${mcpbox.base}/v1/sandboxes`);
  check(r.status === 401 && (await r.json()).code === 'MISSING_API_KEY', `status ${r.status}`);
  const r2 = await through(L, 'GET', '/sandboxes', { headers: { 'OPEN-SANDBOX-API-KEY': 'nope' }, expect: 401 });
  check(r2.json.code === 'INVALID_API_KEY', r2.text);
});

await test('get, list with state and metadata filters and pages', async () => {
  const g = await through(L, 'GET', `/sandboxes/${id}`, { headers: auth, expect: 200 });
  check(g.json.id === id && g.json.metadata.suite === 'contract', g.text);
  const all = await through(L, 'GET', '/sandboxes?state=Running&state=Paused', { headers: auth, expect: 200 });
  check(all.json.items.length === 2, `items ${all.json.items.length}`);
  const meta = encodeURIComponent('suite=contract&other=yes');
  const f = await through(L, 'GET', `/sandboxes?metadata=${meta}`, { headers: auth, expect: 200 });
  check(f.json.items.length === 1 && f.json.items[0].id === id2, f.text);
  const p1 = await through(L, 'GET', '/sandboxes?page=1&pageSize=1', { headers: auth, expect: 200 });
  check(p1.json.items.length === 1 && p1.json.pagination.hasNextPage && p1.json.pagination.totalPages === 2, p1.text);
  const p2 = await through(L, 'GET', '/sandboxes?page=2&pageSize=1', { headers: auth, expect: 200 });
  check(p2.json.items[0].id !== p1.json.items[0].id && !p2.json.pagination.hasNextPage, p2.text);
  const none = await through(L, 'GET', '/sandboxes?state=Paused', { headers: auth, expect: 200 });
  check(none.json.items.length === 0, none.text);
});

await test('endpoints: execd through the server proxy with its token; other ports forwarded', async () => {
  const e = await through(L, 'GET', `/sandboxes/${id}/endpoints/44772?use_server_proxy=true`, { headers: auth, expect: 200 });
  check(e.json.endpoint.endsWith(`/sandboxes/${id}/proxy/44772`), e.text);
  check(/^[0-9a-f]{32}$/.test(e.json.headers['X-EXECD-ACCESS-TOKEN']), e.text);
  const f = await through(L, 'GET', `/sandboxes/${id}/endpoints/8080`, { headers: auth, expect: 200 });
  check(/^127\.0\.0\.1:\d+$/.test(f.json.endpoint), f.text);
});

await test('pause, then resume: 202 and the state follows; pausing twice is 409', async () => {
  await through(L, 'POST', `/sandboxes/${id}/pause`, { headers: auth, expect: 202 });
  const g = await through(L, 'GET', `/sandboxes/${id}`, { headers: auth, expect: 200 });
  check(g.json.status.state === 'Paused', g.text);
  const again = await through(L, 'POST', `/sandboxes/${id}/pause`, { headers: auth, expect: 409 });
  check(again.json.code && again.json.message, again.text);
  await through(L, 'POST', `/sandboxes/${id}/resume`, { headers: auth, expect: 202 });
  const r = await through(L, 'POST', `/sandboxes/${id}/resume`, { headers: auth, expect: 409 });
  check(/not Paused/.test(r.json.message), r.text);
});

await test('renew-expiration sets the new time; a past one is refused', async () => {
  const at = new Date(Date.now() + 3600e3).toISOString();
  const r = await through(L, 'POST', `/sandboxes/${id}/renew-expiration`, { headers: auth, body: { expiresAt: at }, expect: 200 });
  check(Math.abs(Date.parse(r.json.expiresAt) - Date.parse(at)) < 2000, r.text);
  const g = await through(L, 'GET', `/sandboxes/${id}`, { headers: auth, expect: 200 });
  check(g.json.expiresAt === r.json.expiresAt, g.text);
  const past = await through(L, 'POST', `/sandboxes/${id}/renew-expiration`, { headers: auth, body: { expiresAt: '2001-01-01T00:00:00Z' }, expect: 400 });
  check(/future/.test(past.json.message), past.text);
});

await test('diagnostics: the spec\'s descriptor with scope, the legacy text views without', async () => {
  const diag = await startPrism('diagnostic-api.yml', `${mcpbox.base}/v1`);
  for (const kind of ['logs', 'events']) {
    const r = await through(diag.base, 'GET', `/sandboxes/${id}/diagnostics/${kind}?scope=all`, { headers: auth, expect: 200 });
    check(r.json.kind === kind && r.json.delivery === 'inline' && typeof r.json.content === 'string', r.text);
  }
  const legacy = await fetch(`${mcpbox.base}/v1/sandboxes/${id}/diagnostics/summary`, { headers: auth });
  check(legacy.status === 200 && legacy.headers.get('content-type').startsWith('text/plain'), `summary ${legacy.status}`);
});

await test('what local sandboxes cannot do answers an error naming it, never success', async () => {
  const cases = [
    ['POST', '/sandboxes', create({ volumes: [{ name: 'v', mountPath: '/data', ossfs: { bucket: 'my-bucket', endpoint: 'oss-cn-hangzhou.aliyuncs.com', accessKeyId: 'ak', accessKeySecret: 'sk' } }] }), /ossfs/],
    ['POST', '/sandboxes', create({ resourceLimits: { cpu: '1', memory: '1Gi', gpu: '1' } }), /gpu/],
    ['PATCH', `/sandboxes/${id}/metadata`, { team: 'x' }, /metadata/],
    ['GET', `/sandboxes/${id}/endpoints/44772?expires=1999999999`, undefined, /expires/],
  ];
  for (const [m, p, body, re] of cases) {
    const r = await through(L, m, p, { headers: auth, body, expect: 400 });
    check(r.json.code === 'SANDBOX::API_NOT_SUPPORTED' && re.test(r.json.message), `${m} ${p}: ${r.text}`);
  }
  const img = await through(L, 'POST', '/sandboxes', { headers: auth, body: create({ image: { uri: 'No Such Image!' } }), expect: 400 });
  check(/No Such Image!/.test(img.json.message), img.text);
});

await test('snapshots (issue 36): create 202, get, list, delete 204, then 404; all on the spec', async () => {
  const c = await through(L, 'POST', `/sandboxes/${id}/snapshots`, { headers: auth, body: { name: 'contract' }, expect: 202 });
  check(c.json.sandboxId === id && c.json.name === 'contract' && c.json.status.state === 'Ready', c.text);
  check((c.headers.get('location') || '').endsWith(`/v1/snapshots/${c.json.id}`), `Location: ${c.headers.get('location')}`);
  const g = await through(L, 'GET', `/snapshots/${c.json.id}`, { headers: auth, expect: 200 });
  check(g.json.id === c.json.id, g.text);
  const l = await through(L, 'GET', `/snapshots?sandboxId=${id}&state=Ready&pageSize=5`, { headers: auth, expect: 200 });
  check(l.json.items.length === 1 && l.json.pagination.pageSize === 5, l.text);
  await through(L, 'DELETE', `/snapshots/${c.json.id}`, { headers: auth, expect: 204 });
  const gone = await through(L, 'GET', `/snapshots/${c.json.id}`, { headers: auth, expect: 404 });
  check(gone.json.code === 'SANDBOX::NOT_FOUND', gone.text);
});

await test('delete: 204, then 404 in the spec\'s error shape', async () => {
  await through(L, 'DELETE', `/sandboxes/${id2}`, { headers: auth, expect: 204 });
  const g = await through(L, 'GET', `/sandboxes/${id2}`, { headers: auth, expect: 404 });
  check(g.json.code === 'SANDBOX::NOT_FOUND', g.text);
  await through(L, 'DELETE', `/sandboxes/${id2}`, { headers: auth, expect: 404 });
});

await test('another key sees none of these sandboxes', async () => {
  const other = await startMcpbox(args.mcpbox, { key: KEY + '-other', stateDir: mcpbox.stateDir });
  const r = await fetch(`${other.base}/v1/sandboxes/${id}`, { headers: { 'OPEN-SANDBOX-API-KEY': KEY + '-other' } });
  check(r.status === 404, `status ${r.status}`);
});

// ---- the egress sidecar's /policy (issue 14) ------------------------------------------------------

await test('networkPolicy egress rules are a network policy: bad targets refused precisely', async () => {
  const r = await through(L, 'POST', '/sandboxes', { headers: auth, expect: 400,
    body: create({ networkPolicy: { defaultAction: 'deny', egress: [{ action: 'allow', target: '10.0.0.1' }] } }) });
  check(r.json.code === 'SANDBOX::INVALID_PARAMETER' && /networkPolicy\.egress\[0\]\.target "10\.0\.0\.1" is an IP address/.test(r.json.message), r.text);
});

const egEp = (await through(L, 'GET', `/sandboxes/${id}/endpoints/18080`, { headers: auth, expect: 200 })).json;
const eg = await startPrism('egress-api.yaml', `http://${egEp.endpoint}`);

await test('egress /policy: GET shows the all-or-nothing network of a sandbox without a policy; PATCH and DELETE refuse it', async () => {
  check(egEp.endpoint.endsWith(`/sandboxes/${id}/proxy/18080`) && /^[0-9a-f]{32}$/.test(egEp.headers['X-EXECD-ACCESS-TOKEN']), JSON.stringify(egEp));
  const g = await through(eg.base, 'GET', '/policy', { headers: egEp.headers, expect: 200 });
  check(g.json.status === 'ok' && g.json.mode === 'deny_all' && g.json.policy.defaultAction === 'deny' &&
    g.json.policy.egress.length === 0 && /without a network policy/.test(g.json.reason), g.text);
  const p = await through(eg.base, 'PATCH', '/policy', { headers: egEp.headers, body: [{ action: 'allow', target: 'pypi.org' }], expect: 400 });
  check(/created without a network policy/.test(p.text), p.text);
  const d = await through(eg.base, 'DELETE', '/policy', { headers: egEp.headers, body: ['pypi.org'], expect: 400 });
  check(/created without a network policy/.test(d.text), d.text);
  const bad = await fetch(`http://${egEp.endpoint}/policy`, { method: 'PATCH', headers: { ...egEp.headers, 'Content-Type': 'application/json' }, body: '{}' });
  check(bad.status === 400 && /non-empty JSON array of rules/.test(await bad.text()), `PATCH {}: ${bad.status}`);
  const noToken = await fetch(`http://${egEp.endpoint}/policy`);
  check(noToken.status === 401, `no token: ${noToken.status}`);
});

// ---- execd through the server proxy ------------------------------------------------------------
const ep = (await through(L, 'GET', `/sandboxes/${id}/endpoints/44772`, { headers: auth, expect: 200 })).json;
const execdBase = `http://${ep.endpoint}`;
const tok = ep.headers;
const ex = await startPrism('execd-api.yaml', execdBase);
const X = ex.base;

// Prism buffers event streams and flags them (docs/internals/opensandbox-wire.md §10): those are
// read directly and
// every event checked against ServerStreamEvent by hand.
async function stream(body, headers = tok, where = '/command') {
  const r = await fetch(`${execdBase}${where}`, { method: 'POST', headers: { ...headers, 'Content-Type': 'application/json', Accept: 'text/event-stream' }, body: JSON.stringify(body) });
  const text = await r.text();
  if (r.status !== 200) return { status: r.status, text };
  check(r.headers.get('content-type') === 'text/event-stream', r.headers.get('content-type'));
  check(text.endsWith('\n\n'), 'events end with a blank line');
  const events = text.split('\n\n').filter(Boolean).map((l) => JSON.parse(l));
  const types = ['init', 'status', 'error', 'stdout', 'stderr', 'result', 'execution_complete', 'execution_count', 'ping'];
  for (const e of events) {
    check(types.includes(e.type) && Number.isInteger(e.timestamp), `event ${JSON.stringify(e)}`);
    if (e.error) check(typeof e.error.ename === 'string' && typeof e.error.evalue === 'string' && Array.isArray(e.error.traceback), JSON.stringify(e));
  }
  return { status: 200, events };
}

await test('execd: ping, and no token gives execd\'s 401', async () => {
  await through(X, 'GET', '/ping', { headers: tok, expect: 200, raw: true });
  const r = await fetch(`${execdBase}/ping`);
  check(r.status === 401 && /X-EXECD-ACCESS-TOKEN/.test((await r.json()).error), `status ${r.status}`);
});

await test('execd: a command streams init, one event per line, execution_complete', async () => {
  const s = await stream({ command: 'echo hello; echo oops >&2; printf "a\\n\\nb"' });
  const t = s.events.map((e) => e.type);
  check(t[0] === 'init' && /^cmd-/.test(s.events[0].text), t.join());
  check(t[t.length - 1] === 'execution_complete' && !t.includes('error'), t.join());
  const out = s.events.filter((e) => e.type === 'stdout').map((e) => e.text);
  check(JSON.stringify(out) === JSON.stringify(['hello', 'a', '\n', 'b']), JSON.stringify(out));
  check(s.events.some((e) => e.type === 'stderr' && e.text === 'oops'), 'stderr');
});

await test('execd: a non-zero exit ends with error CommandExecError and the code', async () => {
  const s = await stream({ command: 'exit 7' });
  const last = s.events[s.events.length - 1];
  check(last.type === 'error' && last.error.evalue === '7' && last.error.traceback[0] === 'exit status 7', JSON.stringify(last));
  const k = await stream({ command: 'sleep 5', timeout: 300 });
  const kl = k.events[k.events.length - 1];
  check(kl.type === 'error' && kl.error.evalue === '-1', JSON.stringify(kl));
});

await test('execd: cwd and envs; uid answers NOT_SUPPORTED', async () => {
  const s = await stream({ command: 'pwd; echo $OSAPI_X', cwd: '/tmp', envs: { OSAPI_X: 'y' } });
  const out = s.events.filter((e) => e.type === 'stdout').map((e) => e.text);
  check(out[0] === '/tmp' && out[1] === 'y', JSON.stringify(out));
  const u = await through(X, 'POST', '/command', { headers: tok, body: { command: 'id', uid: 1000 }, expect: 400 });
  check(u.json.code === 'NOT_SUPPORTED' && /uid/.test(u.json.message), u.text);
});

await test('execd: background command, status and logs with a byte cursor, interrupt', async () => {
  const s = await stream({ command: 'echo one; sleep 0.3; echo two; sleep 30', background: true });
  check(s.events.length === 2 && s.events[1].type === 'execution_complete', JSON.stringify(s.events));
  const cid = s.events[0].text;
  let st = await through(X, 'GET', `/command/status/${cid}`, { headers: tok, expect: 200 });
  check(st.json.running === true && st.json.content.startsWith('echo one'), st.text);
  await new Promise((r) => setTimeout(r, 600));
  const l1 = await through(X, 'GET', `/command/${cid}/logs`, { headers: tok, expect: 200, raw: true });
  check(l1.text === 'one\ntwo\n', JSON.stringify(l1.text));
  const cur = l1.headers.get('execd-commands-tail-cursor');
  check(cur === '8', `cursor ${cur}`);
  const l2 = await through(X, 'GET', `/command/${cid}/logs?cursor=4`, { headers: tok, expect: 200, raw: true });
  check(l2.text === 'two\n', JSON.stringify(l2.text));
  await through(X, 'DELETE', `/command?id=${cid}`, { headers: tok, expect: 200, raw: true });
  for (let i = 0; i < 50 && st.json.running; i++) {
    await new Promise((r) => setTimeout(r, 100));
    st = await through(X, 'GET', `/command/status/${cid}`, { headers: tok, expect: 200 });
  }
  check(st.json.running === false && st.json.finished_at, st.text);
  await through(X, 'GET', '/command/status/cmd-nope', { headers: tok, expect: 404 });
});

await test('execd: upload, download (whole and Range), info, list, search', async () => {
  const form = new FormData();
  form.append('metadata', new Blob([JSON.stringify({ path: '/tmp/osapi/a.txt', mode: 640 })], { type: 'application/json' }), 'metadata');
  form.append('file', new Blob(['hello world\n']), 'a.txt');
  form.append('metadata', new Blob([JSON.stringify({ path: '/tmp/osapi/sub/b.py', mode: 755 })], { type: 'application/json' }), 'metadata');
  form.append('file', new Blob(['print(1)\n']), 'b.py');
  await through(X, 'POST', '/files/upload', { headers: tok, body: form, expect: 200, raw: true });
  const d = await through(X, 'GET', '/files/download?path=/tmp/osapi/a.txt', { headers: tok, expect: 200, raw: true });
  check(d.text === 'hello world\n', JSON.stringify(d.text));
  const r = await fetch(`${execdBase}/files/download?path=/tmp/osapi/a.txt`, { headers: { ...tok, Range: 'bytes=6-10' } });
  check(r.status === 206 && (await r.text()) === 'world' && r.headers.get('content-range') === 'bytes 6-10/12', `range ${r.status}`);
  const info = await through(X, 'GET', '/files/info?path=/tmp/osapi/a.txt&path=/tmp/osapi/sub', { headers: tok, expect: 200 });
  check(info.json['/tmp/osapi/a.txt'].size === 12 && info.json['/tmp/osapi/a.txt'].mode === 640, info.text);
  check(info.json['/tmp/osapi/sub'].type === 'directory', info.text);
  const list = await through(X, 'GET', '/directories/list?path=/tmp/osapi&depth=2', { headers: tok, expect: 200 });
  check(list.json.some((f) => f.path.endsWith('/sub/b.py') && f.mode === 755), list.text);
  const found = await through(X, 'GET', '/files/search?path=/tmp/osapi&pattern=*.py', { headers: tok, expect: 200 });
  check(found.json.length === 1 && found.json[0].path.endsWith('b.py'), found.text);
  await through(X, 'GET', '/files/info?path=/tmp/osapi/none', { headers: tok, expect: 404 });
});

await test('execd: replace, move, permissions, mkdir, delete', async () => {
  const rep = await through(X, 'POST', '/files/replace?verbose=true', { headers: tok, body: { '/tmp/osapi/a.txt': { old: 'world', new: 'there' } }, expect: 200 });
  check(rep.json['/tmp/osapi/a.txt'].replacedCount === 1, rep.text);
  await through(X, 'POST', '/files/mv', { headers: tok, body: [{ src: '/tmp/osapi/a.txt', dest: '/tmp/osapi/c.txt' }], expect: 200, raw: true });
  const d = await through(X, 'GET', '/files/download?path=/tmp/osapi/c.txt', { headers: tok, expect: 200, raw: true });
  check(d.text === 'hello there\n', JSON.stringify(d.text));
  await through(X, 'POST', '/files/permissions', { headers: tok, body: { '/tmp/osapi/c.txt': { mode: 600 } }, expect: 200, raw: true });
  const i = await through(X, 'GET', '/files/info?path=/tmp/osapi/c.txt', { headers: tok, expect: 200 });
  check(i.json['/tmp/osapi/c.txt'].mode === 600, i.text);
  await through(X, 'POST', '/directories', { headers: tok, body: { '/tmp/osapi/x/y': { mode: 700 } }, expect: 200, raw: true });
  const di = await through(X, 'GET', '/files/info?path=/tmp/osapi/x/y', { headers: tok, expect: 200 });
  check(di.json['/tmp/osapi/x/y'].type === 'directory' && di.json['/tmp/osapi/x/y'].mode === 700, di.text);
  await through(X, 'DELETE', '/files?path=/tmp/osapi/c.txt', { headers: tok, expect: 200, raw: true });
  await through(X, 'DELETE', '/directories?path=/tmp/osapi', { headers: tok, expect: 200, raw: true });
  await through(X, 'GET', '/files/info?path=/tmp/osapi', { headers: tok, expect: 404 });
});

await test('execd: /metrics/watch sends a Metrics line per second until the client leaves', async () => {
  const ac = new AbortController();
  const t0 = Date.now();
  const r = await fetch(`${execdBase}/metrics/watch`, { headers: tok, signal: ac.signal });
  check(r.status === 200, `status ${r.status}`);
  const reader = r.body.getReader();
  let buf = '';
  while (buf.split('\n').length < 3) buf += new TextDecoder().decode((await reader.read()).value);
  const lines = buf.split('\n').filter(Boolean).slice(0, 2).map((l) => JSON.parse(l));
  check(lines.every((m) => m.cpu_count > 0 && m.timestamp > 0 && m.mem_used_mib >= 0), buf);
  check(Date.now() - t0 >= 900, `a second apart: ${Date.now() - t0} ms`);
  ac.abort();
  await through(X, 'GET', '/ping', { headers: tok, expect: 200, raw: true }); // the server goes on
});

await test('execd: metrics; code contexts (tests/local/code has the rest); sessions are served', async () => {
  const m = await through(X, 'GET', '/metrics', { headers: tok, expect: 200 });
  check(m.json.cpu_count > 0 && m.json.mem_used_mib >= 0 && m.json.timestamp > 0, m.text);
  const c = await through(X, 'POST', '/code/context', { headers: tok, body: { language: 'python' }, expect: 200 });
  check(c.json.language === 'python' && typeof c.json.id === 'string', c.text);
  const s = await through(X, 'POST', '/session', { headers: tok, body: { cwd: '/tmp' }, expect: 200 });
  check(typeof s.json.session_id === 'string' && s.json.session_id.length > 0, s.text); // issue 35
  await through(X, 'DELETE', `/session/${s.json.session_id}`, { headers: tok, expect: 200, raw: true });
  const k = await stream({ context: { id: c.json.id, language: 'python' }, code: '1+1' }, tok, '/code');
  check(k.events.some((e) => e.type === 'result' && e.results.text === '2'), JSON.stringify(k.events));
  // without a context, execd runs code as a shell command (the spec's stateless example)
  const sh = await stream({ code: 'echo stateless' }, tok, '/code');
  const t = sh.events.map((e) => e.type);
  check(t[0] === 'init' && sh.events[1].text === 'stateless' && t[t.length - 1] === 'execution_complete', JSON.stringify(sh.events));
});

await through(L, 'DELETE', `/sandboxes/${id}`, { headers: auth, expect: 204 });
await done();
