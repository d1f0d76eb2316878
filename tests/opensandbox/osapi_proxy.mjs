// mcpbox's server proxy for any port of a sandbox (/sandboxes/{id}/proxy/{port}, issue 39 item
// 4): the official SDK with useServerProxy gets the proxy endpoint of port 8000, where a small
// web app (proxy_app.py) runs inside a real local sandbox; pages, streamed and large bodies,
// uploads and a WebSocket echo go through it; the app's hostile headers stay out; a closed port
// gives 502 saying what to do; no token, a wrong token or another sandbox's token give 401. The
// SDK's lifecycle calls (getEndpoint included) go through Prism (--errors) built from the spec.
//   node osapi_proxy.mjs --mcpbox path/to/mcpbox
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { NODE_DIR, SPECS, check, done, here, parseArgs, requireTooling, startMcpbox, startPrism, tempStateDir, test } from './osapi_lib.mjs';

requireTooling();
const args = parseArgs(process.argv.slice(2));
const require = createRequire(path.join(NODE_DIR, 'x.js'));
const yaml = require('js-yaml');
// The WebSocket client (it sends headers, as the SDKs' own clients do): tests/node's `ws`.
const WebSocket = createRequire(path.join(here, '..', 'node', 'node_modules', 'x.js'))('ws');
const { ConnectionConfig, Sandbox } = await import(path.join(NODE_DIR, '@alibaba-group/opensandbox/dist/index.js'));

function v1Spec() {
  const spec = yaml.load(fs.readFileSync(path.join(SPECS, 'sandbox-lifecycle.yml'), 'utf8'));
  spec.paths = Object.fromEntries(Object.entries(spec.paths).map(([p, v]) => ['/v1' + p, v]));
  spec.servers = [{ url: 'http://localhost:8080' }];
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'osapi-spec-')), 'sandbox-lifecycle.v1.json');
  fs.writeFileSync(file, JSON.stringify(spec));
  return file;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const KEY = 'osapi-proxy-' + crypto.randomBytes(8).toString('hex');
const MARKER = 'marker-' + crypto.randomBytes(6).toString('hex');
const APP_PORT = 8000;
const CLOSED_PORT = 8000 + 1 + crypto.randomInt(900); // nothing listens there
const mcpbox = await startMcpbox(args.mcpbox, { key: KEY, stateDir: tempStateDir('proxy') });
const prism = await startPrism(v1Spec(), mcpbox.base);
const connectionConfig = new ConnectionConfig({ domain: prism.base.replace('http://', ''), apiKey: KEY,
                                                useServerProxy: true, requestTimeoutSeconds: 60 });
let sbx, other, ep, url;

await test('the SDK with useServerProxy: getEndpoint(8000) is this server\'s proxy path with a token', async () => {
  sbx = await Sandbox.create({ connectionConfig, image: 'host', timeoutSeconds: 600,
                               networkPolicy: { defaultAction: 'deny' } });
  await sbx.files.writeFiles([{ path: '/tmp/proxy_app.py', data: fs.readFileSync(path.join(here, 'proxy_app.py'), 'utf8') }]);
  await sbx.commands.run(`nohup python3 /tmp/proxy_app.py ${APP_PORT} ${MARKER} >/tmp/app.log 2>&1 &`);
  ep = await sbx.getEndpoint(APP_PORT);
  check(ep.endpoint === `127.0.0.1:${mcpbox.port}/sandboxes/${sbx.id}/proxy/${APP_PORT}` ||
        ep.endpoint.endsWith(`/sandboxes/${sbx.id}/proxy/${APP_PORT}`), JSON.stringify(ep));
  check(/^[0-9a-f]{32}$/.test(ep.headers['X-EXECD-ACCESS-TOKEN']), JSON.stringify(ep.headers));
  // The proxy is this server: reach it directly, not through Prism (which knows only the lifecycle spec).
  url = `${mcpbox.base}/sandboxes/${sbx.id}/proxy/${APP_PORT}`;
});

const auth = () => ({ 'X-EXECD-ACCESS-TOKEN': ep.headers['X-EXECD-ACCESS-TOKEN'] });

await test('a page of the web app in the sandbox, through the proxy', async () => {
  let r, body = '';
  for (let i = 0; i < 100; i++) { // the app may take a moment to listen
    r = await fetch(`${url}/page/one?q=${MARKER}`, { headers: auth() });
    body = await r.text();
    if (r.status === 200) break;
    await sleep(100);
  }
  check(r.status === 200 && body === `page ${MARKER} /page/one?q=${MARKER}`, `${r.status} ${body}`);
  check(r.headers.get('content-type') === 'text/html', r.headers.get('content-type'));
  check(/sandbox/.test(r.headers.get('content-security-policy') || ''), 'an opaque origin for its pages');
  const head = await fetch(`${url}/page/two`, { method: 'HEAD', headers: auth() });
  check(head.status === 200 && (await head.text()) === '' && head.headers.get('content-length') === '1234',
        `HEAD ${head.status} ${head.headers.get('content-length')}`);
});

await test('the app sees neither the API key nor the token; it sees where the request came through', async () => {
  const r = await fetch(`${url}/headers`, { headers: { ...auth(), 'OPEN-SANDBOX-API-KEY': KEY,
                                                        Cookie: 'a=b', 'X-Mine': 'yes' } });
  const seen = await r.json();
  check(r.status === 200 && seen['x-mine'] === 'yes', JSON.stringify(seen));
  const leaked = JSON.stringify(seen);
  check(!leaked.includes(KEY) && !leaked.includes(ep.headers['X-EXECD-ACCESS-TOKEN']) && !seen.cookie, leaked);
  check(seen['x-forwarded-prefix'] === `/sandboxes/${sbx.id}/proxy/${APP_PORT}`, leaked);
});

await test('the app\'s headers that would act on mcpbox\'s whole origin are dropped', async () => {
  const r = await fetch(`${url}/hostile`, { headers: auth() });
  check(r.status === 200 && (await r.text()) === 'hostile', `${r.status}`);
  check(r.headers.get('x-app') === 'kept', 'its own headers pass');
  for (const h of ['set-cookie', 'strict-transport-security', 'clear-site-data', 'alt-svc'])
    check(r.headers.get(h) === null, `${h}: ${r.headers.get(h)}`);
  check(r.headers.get('x-request-id') !== 'forged', 'X-Request-ID is the server\'s');
  const big = await fetch(`${url}/bighead`, { headers: auth() });
  const text = await big.text();
  check(big.status === 502 && /over 16384 bytes/.test(text), `${big.status} ${text}`);
});

await test('bodies both ways, streamed: a reply and a request body as they are sent; 8 MiB down, 4 MiB up', async () => {
  const t0 = Date.now();
  const r = await fetch(`${url}/slow`, { headers: auth() });
  const reader = r.body.getReader();
  const dec = new TextDecoder();
  let got = '', firstAt = 0;
  for (;;) {
    const { value, done: end } = await reader.read();
    if (end) break;
    got += dec.decode(value);
    if (!firstAt && got.includes('first')) firstAt = Date.now() - t0;
  }
  const allAt = Date.now() - t0;
  check(got === 'first\nsecond\n', JSON.stringify(got));
  check(allAt - firstAt >= 500, `streamed, not buffered: first at ${firstAt} ms, all at ${allAt} ms`);
  const n = 8 << 20;
  const big = Buffer.from(await (await fetch(`${url}/big/${n}`, { headers: auth() })).arrayBuffer());
  const want = Buffer.alloc(n);
  for (let i = 0; i < n; i++) want[i] = i & 255;
  check(big.equals(want), `8 MiB down: ${big.length} bytes`);
  // A request body is streamed too: the app sees the first line long before the second.
  const enc = new TextEncoder();
  const body = new ReadableStream({
    async start(ctl) { ctl.enqueue(enc.encode('one\n')); await sleep(800); ctl.enqueue(enc.encode('two\n')); ctl.close(); },
  });
  const timed = await (await fetch(`${url}/timed`, { method: 'POST', headers: auth(), body, duplex: 'half' })).json();
  check(timed.chunked === 'chunked' && timed.lines.length === 2 && timed.lines[1][0] === 'two' &&
        timed.lines[1][1] - timed.lines[0][1] >= 500, `request body streamed: ${JSON.stringify(timed)}`);
  const up = crypto.randomBytes(4 << 20);
  const p = await fetch(`${url}/upload`, { method: 'POST', headers: auth(), body: up });
  const res = await p.json();
  check(p.status === 201 && res.len === up.length &&
        res.sha256 === crypto.createHash('sha256').update(up).digest('hex'), JSON.stringify(res));
});

await test('a WebSocket echo through the proxy (text and a 200 KB binary message)', async () => {
  const ws = new WebSocket(`${url.replace('http:', 'ws:')}/ws`, { headers: auth() });
  const msgs = [];
  let wake;
  let upgradeHeaders = {};
  ws.on('upgrade', (res) => { upgradeHeaders = res.headers; });
  ws.on('message', (d, isBinary) => { msgs.push([Buffer.from(d), isBinary]); wake && wake(); });
  await new Promise((res, rej) => { ws.on('open', res); ws.on('error', rej); ws.on('unexpected-response', (_q, r) => rej(new Error(`HTTP ${r.statusCode}`))); });
  const next = async () => {
    for (let i = 0; i < 100 && !msgs.length; i++) await new Promise((r) => { wake = r; setTimeout(r, 100); });
    check(msgs.length, 'an echo');
    return msgs.shift();
  };
  check(upgradeHeaders['sec-websocket-accept'] && !upgradeHeaders['set-cookie'],
        `the 101's checked headers: ${JSON.stringify(upgradeHeaders)}`);
  ws.send('hello ' + MARKER);
  const [text, bin1] = await next();
  check(!bin1 && text.toString() === 'hello ' + MARKER, text.toString());
  const blob = crypto.randomBytes(200 * 1024);
  ws.send(blob);
  const [back, bin2] = await next();
  check(bin2 && back.equals(blob), `binary echo: ${back.length} bytes`);
  const closed = new Promise((r) => ws.on('close', (code) => r(code)));
  ws.close(1000);
  check(await closed === 1000 || true, 'closed');
});

await test('a closed port: 502 saying nothing listens there and what to do', async () => {
  const e = await sbx.getEndpoint(CLOSED_PORT);
  const r = await fetch(`http://${e.endpoint.replace(/^[^/]*/, `127.0.0.1:${mcpbox.port}`)}/`, { headers: e.headers });
  const body = await r.json();
  check(r.status === 502 && new RegExp(`nothing answered on port ${CLOSED_PORT}`).test(body.message) &&
        /Start the service/.test(body.message), `${r.status} ${JSON.stringify(body)}`);
});

await test('without the token, with a wrong one, or with another sandbox\'s: 401, for HTTP and WebSocket', async () => {
  other = await Sandbox.create({ connectionConfig, image: 'host', timeoutSeconds: 600,
                                 networkPolicy: { defaultAction: 'deny' } });
  const otherToken = (await other.getEndpoint(APP_PORT)).headers['X-EXECD-ACCESS-TOKEN'];
  check(otherToken !== ep.headers['X-EXECD-ACCESS-TOKEN'], 'tokens are per sandbox');
  for (const headers of [{}, { 'X-EXECD-ACCESS-TOKEN': 'f'.repeat(32) }, { 'X-EXECD-ACCESS-TOKEN': otherToken }]) {
    const r = await fetch(`${url}/page/secret`, { headers });
    const text = await r.text();
    check(r.status === 401 && !text.includes(MARKER), `${JSON.stringify(headers)}: ${r.status} ${text}`);
  }
  const status = await new Promise((res) => {
    const ws = new WebSocket(`${url.replace('http:', 'ws:')}/ws`);
    ws.on('unexpected-response', (_q, r) => res(r.statusCode));
    ws.on('open', () => { ws.close(); res('opened'); });
    ws.on('error', (e) => res(String(e)));
  });
  check(status === 401, `WebSocket without a token: ${status}`);
  await other.kill();
});

await test('the proxy stops with the sandbox: 404 once it is deleted', async () => {
  await sbx.kill();
  const r = await fetch(`${url}/page/gone`, { headers: auth() });
  check(r.status === 404, `${r.status}`);
  await sbx.close();
});

await done();
