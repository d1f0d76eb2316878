// OpenSandbox `volumes` on create (issue 36) with the official TypeScript SDK, unchanged, against
// mcpbox's OpenSandbox API with real local sandboxes, through Prism's validating proxy: a `pvc`
// is a named volume (made when missing, as the spec's createIfNotExists default says; refused
// when createIfNotExists is false), kept across sandboxes; a `host` volume is a directory the
// person allowed (--allow-dir), read-only when readOnly; what mcpbox cannot mount is refused.
//   node osapi_volumes.mjs --mcpbox path/to/mcpbox
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { NODE_DIR, SPECS, check, done, parseArgs, requireTooling, startMcpbox, startPrism, tempStateDir, test } from './osapi_lib.mjs';

requireTooling();
const args = parseArgs(process.argv.slice(2));
const require = createRequire(path.join(NODE_DIR, 'x.js'));
const yaml = require('js-yaml');
const { ConnectionConfig, Sandbox } = await import(path.join(NODE_DIR, '@alibaba-group/opensandbox/dist/index.js'));

function v1Spec() {
  const spec = yaml.load(fs.readFileSync(path.join(SPECS, 'sandbox-lifecycle.yml'), 'utf8'));
  spec.paths = Object.fromEntries(Object.entries(spec.paths).map(([p, v]) => ['/v1' + p, v]));
  spec.servers = [{ url: 'http://localhost:8080' }];
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'osapi-spec-')), 'sandbox-lifecycle.v1.json');
  fs.writeFileSync(file, JSON.stringify(spec));
  return file;
}

const KEY = 'osapi-vol-' + process.pid;
const stateDir = tempStateDir('vol');
const allowed = fs.mkdtempSync(path.join(os.tmpdir(), 'osapi-vol-host-'));
fs.writeFileSync(path.join(allowed, 'from-host.txt'), 'host file\n');
fs.mkdirSync(path.join(allowed, 'sub'));
fs.writeFileSync(path.join(allowed, 'sub', 'deep.txt'), 'deep\n');
const claim = 'sdk-cache-' + crypto.randomBytes(3).toString('hex');
const mcpbox = await startMcpbox(args.mcpbox, { key: KEY, stateDir, extraArgs: ['--allow-dir', allowed] });
const prism = await startPrism(v1Spec(), mcpbox.base);
const connectionConfig = new ConnectionConfig({ domain: prism.base.replace('http://', ''), apiKey: KEY,
                                                requestTimeoutSeconds: 60 });
const base = { connectionConfig, image: 'host', timeoutSeconds: 600, networkPolicy: { defaultAction: 'deny' } };
const made = [];

async function create(volumes) {
  const sbx = await Sandbox.create({ ...base, volumes });
  made.push(sbx);
  return sbx;
}

async function sh(sbx, cmd) {
  const ex = await sbx.commands.run(cmd);
  return { code: ex.exitCode, out: ex.logs.stdout.map((m) => m.text).join('\n'),
           err: ex.logs.stderr.map((m) => m.text).join('\n') };
}

async function refused(volumes, re) {
  try {
    const sbx = await Sandbox.create({ ...base, volumes });
    made.push(sbx);
  } catch (e) {
    const text = `${e.message} ${e.error?.message ?? ''} ${JSON.stringify(e.rawBody ?? e.body ?? '')}`;
    check(re.test(text), `refused, but with: ${text}`);
    return;
  }
  throw new Error(`accepted: ${JSON.stringify(volumes)}`);
}

await test('pvc: a missing claim is made (createIfNotExists defaults to true) and written', async () => {
  const sbx = await create([{ name: 'cache', pvc: { claimName: claim, storage: '64Mi' }, mountPath: '/data/cache' }]);
  const r = await sh(sbx, 'echo kept > /data/cache/kept.txt && cat /data/cache/kept.txt');
  check(r.code === 0 && r.out === 'kept', JSON.stringify(r));
});

await test('pvc: a second sandbox shares it, read-only when readOnly', async () => {
  const sbx = await create([{ name: 'cache', pvc: { claimName: claim, createIfNotExists: false },
                              mountPath: '/mnt/cache', readOnly: true }]);
  const r = await sh(sbx, 'cat /mnt/cache/kept.txt; echo x > /mnt/cache/new.txt');
  check(r.out === 'kept' && r.code !== 0 && /Read-only/.test(r.err), JSON.stringify(r));
});

await test('pvc: kept after its sandboxes are gone', async () => {
  for (const s of made.splice(0)) await s.kill();
  const sbx = await create([{ name: 'again', pvc: { claimName: claim, createIfNotExists: false }, mountPath: '/data/c' }]);
  const r = await sh(sbx, 'cat /data/c/kept.txt');
  check(r.out === 'kept', JSON.stringify(r));
});

await test('pvc: createIfNotExists false on a missing claim is refused, naming it', async () => {
  await refused([{ name: 'nope', pvc: { claimName: 'no-such-' + claim, createIfNotExists: false }, mountPath: '/data/n' }],
                /no volume called no-such-/);
});

await test('host: an allowed directory, rw by default, subPath and readOnly', async () => {
  const sbx = await create([
    { name: 'src', host: { path: allowed }, mountPath: '/workspace/src' },
    { name: 'deep', host: { path: allowed }, subPath: 'sub', mountPath: '/mnt/deep', readOnly: true },
  ]);
  const r = await sh(sbx, 'cat /workspace/src/from-host.txt /mnt/deep/deep.txt; echo w > /workspace/src/by-sandbox.txt; echo x > /mnt/deep/no.txt');
  check(r.out === 'host file\ndeep' && /Read-only/.test(r.err), JSON.stringify(r));
  check(fs.readFileSync(path.join(allowed, 'by-sandbox.txt'), 'utf8') === 'w\n', 'rw: written on the host');
  check(!fs.existsSync(path.join(allowed, 'sub', 'no.txt')), 'ro: nothing written');
});

await test('host: a directory not allowed, and a subPath with "..", are refused', async () => {
  await refused([{ name: 'etc', host: { path: '/etc' }, mountPath: '/mnt/etc' }], /outside the host directories/);
  await refused([{ name: 'up', host: { path: allowed }, subPath: '../..', mountPath: '/mnt/up' }], /subPath/);
});

await test('bad volumes: a target outside the allowed roots, ossfs, deleteOnSandboxTermination', async () => {
  await refused([{ name: 'x', pvc: { claimName: claim }, mountPath: '/etc/x' }], /target/);
  await refused([{ name: 'o', ossfs: { bucket: 'b', endpoint: 'e', accessKeyId: 'a', accessKeySecret: 's' },
                   mountPath: '/mnt/o' }], /ossfs/);
  await refused([{ name: 'd', pvc: { claimName: claim, deleteOnSandboxTermination: true }, mountPath: '/mnt/d' }],
                /deleteOnSandboxTermination/);
});

for (const s of made) await s.kill().catch(() => {});
// The volumes' filesystem images are mounted under the state directory (as root): let them go.
for (const line of fs.readFileSync('/proc/self/mounts', 'utf8').split('\n')) {
  const at = line.split(' ')[1];
  if (at && at.startsWith(stateDir + '/')) execFileSync('umount', ['-l', at]);
}
fs.rmSync(allowed, { recursive: true, force: true });
await done();
