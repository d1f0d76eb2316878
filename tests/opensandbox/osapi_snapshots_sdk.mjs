// Snapshots through mcpbox's OpenSandbox API with the official TypeScript SDK, unchanged
// (issue 36): SandboxManager.createSnapshot, getSnapshot, listSnapshots, deleteSnapshot and
// Sandbox.create({snapshotId}), on real local sandboxes, through Prism's validating proxy
// (--errors) so that a reply off the spec fails the call. Another API key sees none of it.
//   node osapi_snapshots_sdk.mjs --mcpbox path/to/mcpbox
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

function v1Spec() {
  const spec = yaml.load(fs.readFileSync(path.join(SPECS, 'sandbox-lifecycle.yml'), 'utf8'));
  spec.paths = Object.fromEntries(Object.entries(spec.paths).map(([p, v]) => ['/v1' + p, v]));
  spec.servers = [{ url: 'http://localhost:8080' }];
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'osapi-spec-')), 'sandbox-lifecycle.v1.json');
  fs.writeFileSync(file, JSON.stringify(spec));
  return file;
}

const KEY = 'osapi-snap-' + process.pid;
const stateDir = tempStateDir('snap');
const mcpbox = await startMcpbox(args.mcpbox, { key: KEY, stateDir });
const prism = await startPrism(v1Spec(), mcpbox.base);
const domain = prism.base.replace('http://', '');
const connectionConfig = new ConnectionConfig({ domain, apiKey: KEY, requestTimeoutSeconds: 60 });
const manager = SandboxManager.create({ connectionConfig });
const deny = { defaultAction: 'deny' };
let src, snap, restored;

await test('createSnapshot of a running sandbox: Ready, named', async () => {
  src = await Sandbox.create({ connectionConfig, image: 'host', networkPolicy: deny, env: { SNAP: 'v' } });
  await src.files.writeFiles([{ path: '/workspace/keep.txt', data: 'kept by the snapshot', mode: 640 }]);
  snap = await manager.createSnapshot(src.id, { name: 'sdk-snap' });
  check(/^snap-/.test(snap.id) && snap.sandboxId === src.id && snap.name === 'sdk-snap', JSON.stringify(snap));
  check(snap.status.state === 'Ready', JSON.stringify(snap.status));
  const ex = await src.commands.run('echo still running');
  check(ex.logs.stdout[0].text === 'still running', 'the source runs on');
});

await test('getSnapshot and listSnapshots (filters, pagination)', async () => {
  const got = await manager.getSnapshot(snap.id);
  check(got.id === snap.id && got.status.state === 'Ready', JSON.stringify(got));
  const all = await manager.listSnapshots({});
  check(all.items.length === 1 && all.items[0].id === snap.id && all.pagination.totalItems === 1, JSON.stringify(all));
  const bySandbox = await manager.listSnapshots({ sandboxId: src.id, states: ['Ready'] });
  check(bySandbox.items.length === 1, JSON.stringify(bySandbox));
  const failed = await manager.listSnapshots({ states: ['Failed'] });
  check(failed.items.length === 0, JSON.stringify(failed));
});

await test('Sandbox.create({snapshotId}): the files and env are back', async () => {
  restored = await Sandbox.create({ connectionConfig, snapshotId: snap.id, networkPolicy: deny });
  check(restored.id !== src.id, restored.id);
  check(await restored.files.readFile('/workspace/keep.txt') === 'kept by the snapshot', 'file restored');
  const ex = await restored.commands.run('stat -c %a /workspace/keep.txt; echo $SNAP');
  check(ex.logs.stdout.map((m) => m.text).join(',') === '640,v', JSON.stringify(ex.logs.stdout));
});

await test('another API key sees no snapshot and cannot restore it; unknown ids are 404', async () => {
  const other = await startMcpbox(args.mcpbox, { key: KEY + '-other', stateDir });
  const h = { 'OPEN-SANDBOX-API-KEY': KEY + '-other', 'Content-Type': 'application/json' };
  const list = await (await fetch(`${other.base}/v1/snapshots`, { headers: h })).json();
  check(list.items.length === 0, JSON.stringify(list));
  const get = await fetch(`${other.base}/v1/snapshots/${snap.id}`, { headers: h });
  check(get.status === 404, `another owner's snapshot: ${get.status}`);
  const del = await fetch(`${other.base}/v1/snapshots/${snap.id}`, { method: 'DELETE', headers: h });
  check(del.status === 404, `another owner's delete: ${del.status}`);
  const made = await fetch(`${other.base}/v1/sandboxes`, { method: 'POST', headers: h,
                                                           body: JSON.stringify({ snapshotId: snap.id }) });
  check([400, 404].includes(made.status) && /no snapshot/.test(await made.clone().text()), `another owner's restore: ${made.status} ${await made.text()}`);
  const bad = await fetch(`${mcpbox.base}/v1/snapshots/..%2f..%2fetc`, { headers: { ...h, 'OPEN-SANDBOX-API-KEY': KEY } });
  check(bad.status === 404, `a crafted id: ${bad.status}`);
  const both = await fetch(`${mcpbox.base}/v1/sandboxes`, { method: 'POST', headers: { ...h, 'OPEN-SANDBOX-API-KEY': KEY },
                                                          body: JSON.stringify({ snapshotId: snap.id, image: { uri: 'host' } }) });
  check(both.status === 400, `image and snapshotId: ${both.status}`);
  let err = '';
  try { await manager.getSnapshot('snap-00000000'); } catch (e) { err = String(e); }
  check(/404|NOT_FOUND|not found|no snapshot/i.test(err), `getSnapshot of an unknown id: ${err}`);
});

await test('deleteSnapshot: gone from get and list; the restored sandbox keeps its files', async () => {
  await manager.deleteSnapshot(snap.id);
  let threw = false;
  try { await manager.getSnapshot(snap.id); } catch { threw = true; }
  check(threw, 'deleted');
  check((await manager.listSnapshots({})).items.length === 0, 'list empty');
  check(await restored.files.readFile('/workspace/keep.txt') === 'kept by the snapshot', 'still there');
  await restored.kill();
  await src.kill();
  await manager.close();
});

await done();
