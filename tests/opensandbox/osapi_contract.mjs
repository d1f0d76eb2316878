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

await test('what local sandboxes cannot do answers an error naming it, never success', async () => {
  const cases = [
    ['POST', '/sandboxes', create({ volumes: [{ name: 'v', mountPath: '/data', host: { path: '/tmp' } }] }), /volumes/],
    ['POST', '/sandboxes', create({ networkPolicy: { defaultAction: 'deny', egress: [{ action: 'allow', target: 'pypi.org' }] } }), /egress rules/],
    ['POST', '/sandboxes', create({ resourceLimits: { cpu: '1', memory: '1Gi', gpu: '1' } }), /gpu/],
    ['POST', `/sandboxes/${id}/snapshots`, {}, /snapshots/],
    ['PATCH', `/sandboxes/${id}/metadata`, { team: 'x' }, /metadata/],
    ['GET', `/sandboxes/${id}/endpoints/44772?expires=1999999999`, undefined, /expires/],
  ];
  for (const [m, p, body, re] of cases) {
    const r = await through(L, m, p, { headers: auth, body, expect: 400 });
    check(r.json.code === 'SANDBOX::API_NOT_SUPPORTED' && re.test(r.json.message), `${m} ${p}: ${r.text}`);
  }
  const img = await through(L, 'POST', '/sandboxes', { headers: auth, body: create({ image: { uri: 'no-such-image-osapi' } }), expect: 400 });
  check(/no-such-image-osapi/.test(img.json.message), img.text);
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

await through(L, 'DELETE', `/sandboxes/${id}`, { headers: auth, expect: 204 });
done();
