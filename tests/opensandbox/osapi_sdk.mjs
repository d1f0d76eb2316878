// The official OpenSandbox TypeScript SDK (@alibaba-group/opensandbox) end to end against
// mcpbox's OpenSandbox API with real local sandboxes: create, a command with streamed output,
// a background command and its logs, files written and read, endpoints, renew, pause/resume,
// kill. The SDK's lifecycle calls go through Prism's validating proxy (--errors; the official
// spec with its paths under /v1, as the SDK calls them), so a spec violation fails the call.
//   node osapi_sdk.mjs --mcpbox path/to/mcpbox
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { NODE_DIR, SPECS, check, done, parseArgs, requireTooling, startMcpbox, startPrism, tempStateDir, test } from './osapi_lib.mjs';

requireTooling();
const args = parseArgs(process.argv.slice(2));
const require = createRequire(path.join(NODE_DIR, 'x.js'));
const yaml = require('js-yaml');
const { ConnectionConfig, Sandbox, SandboxManager } = await import(path.join(NODE_DIR, '@alibaba-group/opensandbox/dist/index.js'));

// The lifecycle spec with /v1 in front of its paths (the SDK's base URL is http://DOMAIN/v1).
function v1Spec() {
  const spec = yaml.load(fs.readFileSync(path.join(SPECS, 'sandbox-lifecycle.yml'), 'utf8'));
  spec.paths = Object.fromEntries(Object.entries(spec.paths).map(([p, v]) => ['/v1' + p, v]));
  spec.servers = [{ url: 'http://localhost:8080' }];
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'osapi-spec-')), 'sandbox-lifecycle.v1.json');
  fs.writeFileSync(file, JSON.stringify(spec));
  return file;
}

const KEY = 'osapi-sdk-' + process.pid;
const mcpbox = await startMcpbox(args.mcpbox, { key: KEY, stateDir: tempStateDir('sdk') });
const prism = await startPrism(v1Spec(), mcpbox.base);
const domain = prism.base.replace('http://', '');
const connectionConfig = new ConnectionConfig({ domain, apiKey: KEY, requestTimeoutSeconds: 60 });
let sbx;

await test('Sandbox.create: ready through the SDK\'s health check', async () => {
  sbx = await Sandbox.create({ connectionConfig, image: 'host', timeoutSeconds: 600,
                               networkPolicy: { defaultAction: 'deny' }, metadata: { suite: 'sdk' } });
  check(/^sbx-/.test(sbx.id), sbx.id);
  const info = await sbx.getInfo();
  check(info.status.state === 'Running' && info.metadata.suite === 'sdk', JSON.stringify(info));
});

await test('commands.run streams output as it comes, with the exit code', async () => {
  const seen = [];
  const t0 = Date.now();
  const ex = await sbx.commands.run('echo first; sleep 0.6; echo second; echo warn >&2', undefined, {
    onStdout: (m) => seen.push([m.text, Date.now() - t0]),
  });
  check(ex.exitCode === 0, `exit ${ex.exitCode}`);
  check(seen.length === 2 && seen[0][0] === 'first' && seen[1][0] === 'second', JSON.stringify(seen));
  check(seen[1][1] - seen[0][1] >= 400, `streamed, not buffered: ${JSON.stringify(seen)}`);
  check(ex.logs.stderr.map((m) => m.text).join() === 'warn', JSON.stringify(ex.logs.stderr));
  const bad = await sbx.commands.run('exit 5');
  check(bad.exitCode === 5 && bad.error && bad.error.value === '5', JSON.stringify(bad.error));
});

await test('background command: status and logs', async () => {
  const ex = await sbx.commands.run('echo bg-one; sleep 0.3; echo bg-two', { background: true });
  check(ex.id, 'an id');
  let st;
  for (let i = 0; i < 50; i++) {
    st = await sbx.commands.getCommandStatus(ex.id);
    if (!st.running) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  check(st.running === false && st.exitCode === 0, JSON.stringify(st));
  const logs = await sbx.commands.getBackgroundCommandLogs(ex.id);
  check(logs.content === 'bg-one\nbg-two\n' && logs.cursor === 14, JSON.stringify(logs));
  const tail = await sbx.commands.getBackgroundCommandLogs(ex.id, 7);
  check(tail.content === 'bg-two\n', JSON.stringify(tail));
});

await test('files: write, read, info, search, delete', async () => {
  await sbx.files.createDirectories([{ path: '/tmp/sdk', mode: 755 }]);
  await sbx.files.writeFiles([{ path: '/tmp/sdk/hello.txt', data: 'Hello World', mode: 644 },
                              { path: '/tmp/sdk/bin.dat', data: new Uint8Array([0, 1, 2, 255]) }]);
  check(await sbx.files.readFile('/tmp/sdk/hello.txt') === 'Hello World', 'text read back');
  const bytes = await sbx.files.readBytes('/tmp/sdk/bin.dat');
  check(Buffer.from(bytes).equals(Buffer.from([0, 1, 2, 255])), `bytes ${Buffer.from(bytes).toString('hex')}`);
  const found = await sbx.files.search({ path: '/tmp/sdk', pattern: '*.txt' });
  check(found.length === 1 && found[0].path === '/tmp/sdk/hello.txt', JSON.stringify(found));
  await sbx.files.deleteDirectories(['/tmp/sdk']);
  const ls = await sbx.commands.run('ls /tmp/sdk 2>&1 || true');
  check(/No such file/.test(ls.logs.stdout.map((m) => m.text).join()), 'deleted');
});

await test('endpoints: execd through this server; another port forwarded from the host', async () => {
  const e = await sbx.getEndpoint(44772);
  check(e.endpoint.endsWith(`/sandboxes/${sbx.id}/proxy/44772`), JSON.stringify(e));
  await sbx.commands.run('nohup python3 -m http.server 8099 --bind 127.0.0.1 >/dev/null 2>&1 &');
  const url = await sbx.getEndpointUrl(8099);
  check(/^http:\/\/127\.0\.0\.1:\d+$/.test(url), url);
  let body = '';
  for (let i = 0; i < 50 && !body; i++) {
    try { body = await (await fetch(url + '/')).text(); } catch { await new Promise((r) => setTimeout(r, 100)); }
  }
  check(/Directory listing/.test(body), `served through the forward: ${body.slice(0, 80)}`);
});

await test('renew, pause and resume', async () => {
  const before = Date.parse((await sbx.getInfo()).expiresAt);
  await sbx.renew(3600);
  const after = Date.parse((await sbx.getInfo()).expiresAt);
  check(after > before + 2000 * 1000, `expiry moved from ${before} to ${after}`);
  await sbx.pause();
  check((await sbx.getInfo()).status.state === 'Paused', 'paused');
  const resumed = await sbx.resume();
  const ex = await resumed.commands.run('echo back');
  check(ex.logs.stdout[0].text === 'back', JSON.stringify(ex.logs));
  sbx = resumed;
});

await test('SandboxManager lists it; kill removes it', async () => {
  const manager = SandboxManager.create({ connectionConfig });
  const list = await manager.listSandboxInfos({ states: ['Running'], pageSize: 10 });
  check(list.items.some((s) => s.id === sbx.id), JSON.stringify(list.items.map((s) => s.id)));
  await sbx.kill();
  const again = await manager.listSandboxInfos({});
  check(!again.items.some((s) => s.id === sbx.id), 'gone');
  await manager.close();
  await sbx.close();
});

await done();
