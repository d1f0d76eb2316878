// OpenSandbox's Credential Vault (issue 37) through the official TypeScript SDK
// (@alibaba-group/opensandbox), unchanged, against mcpbox's OpenSandbox API with a real local
// sandbox: credentialProxy on create; credentialVault create, get, patch (with and without a
// stale expectedRevision), delete, and the credentials and bindings listings, all sanitized; the
// sandbox's requests to the bound host carry the credential, replaced after a patch, gone after
// delete; a sandbox without credentialProxy refuses a vault. Run inside the egress tests'
// network namespace by tests/local/egress/test_secrets_vault.py, which serves the test host and
// its request log.
//   node osapi_vault_sdk.mjs --mcpbox PATH --log FILE --host NAME:PORT
import fs from 'node:fs';
import path from 'node:path';
import { NODE_DIR, check, done, parseArgs, requireTooling, startMcpbox, startPrism, tempStateDir, test, through } from './osapi_lib.mjs';

requireTooling();
const args = parseArgs(process.argv.slice(2));
const { ConnectionConfig, Sandbox } = await import(path.join(NODE_DIR, '@alibaba-group/opensandbox/dist/index.js'));
const KEY = 'osapi-vault-' + process.pid;
const V1 = 'v1-' + Math.random().toString(16).slice(2);
const V2 = 'v2-' + Math.random().toString(16).slice(2);
const [HOST] = args.host.split(':');
const mcpbox = await startMcpbox(args.mcpbox, { key: KEY, stateDir: tempStateDir('vault') });
const connectionConfig = new ConnectionConfig({ domain: mcpbox.base.replace('http://', ''), apiKey: KEY,
                                                requestTimeoutSeconds: 60 });
const hits = () => fs.readFileSync(args.log, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
const authOf = (h) => (h.headers.find(([k]) => k.toLowerCase() === 'authorization') || [])[1];
const clean = (x, what) => check(!JSON.stringify(x).includes(V1) && !JSON.stringify(x).includes(V2),
                                 `${what} holds a value: ${JSON.stringify(x)}`);
let sbx, plain;

async function curl(p) {
  const n = hits().length;
  const ex = await sbx.commands.run(`curl -sS --max-time 10 http://${args.host}${p}`);
  clean(ex.logs, 'the sandbox output');
  return hits().slice(n);
}

await test('Sandbox.create with credentialProxy', async () => {
  sbx = await Sandbox.create({ connectionConfig, image: 'host', timeoutSeconds: 600, credentialProxy: { enabled: true },
                               networkPolicy: { defaultAction: 'deny', egress: [{ action: 'allow', target: HOST }] } });
  check(/^sbx-/.test(sbx.id), sbx.id);
});

await test('credentialVault.create: sanitized state; the bound host gets the bearer header', async () => {
  const st = await sbx.credentialVault.create({
    credentials: [{ name: 'tok', source: { type: 'inline', value: V1 } }],
    bindings: [{ name: 'api', match: { hosts: [HOST], schemes: ['http'] }, auth: { type: 'bearer', credential: 'tok' } }] });
  clean(st, 'create');
  check(st.revision === 1 && st.credentials[0].name === 'tok' && st.credentials[0].sourceType === 'inline' &&
        st.bindings[0].name === 'api' && st.bindings[0].auth.type === 'bearer', JSON.stringify(st));
  const got = await curl('/vault1');
  check(got.length === 1 && authOf(got[0]) === `Bearer ${V1}`, JSON.stringify(got));
});

await test('get, listCredentials, getCredential, listBindings, getBinding: sanitized', async () => {
  const all = [await sbx.credentialVault.get(), await sbx.credentialVault.listCredentials(),
               await sbx.credentialVault.getCredential('tok'), await sbx.credentialVault.listBindings(),
               await sbx.credentialVault.getBinding('api')];
  all.forEach((x, i) => clean(x, `read ${i}`));
  check(all[1].length === 1 && all[2].name === 'tok' && all[3].length === 1 && all[4].match.hosts[0] === HOST,
        JSON.stringify(all));
});

await test('the vault\'s answers pass Prism\'s validating proxy of egress-api.yaml', async () => {
  const r = await fetch(`${mcpbox.base}/v1/sandboxes/${sbx.id}/endpoints/18080`, { headers: { 'OPEN-SANDBOX-API-KEY': KEY } });
  const ep = await r.json();
  const eg = await startPrism('egress-api.yaml', `http://${ep.endpoint}`);
  for (const p of ['/credential-vault', '/credential-vault/credentials', '/credential-vault/credentials/tok',
                   '/credential-vault/bindings', '/credential-vault/bindings/api']) {
    const g = await through(eg.base, 'GET', p, { headers: ep.headers, expect: 200 });
    clean(g.text, p);
  }
  await through(eg.base, 'GET', '/credential-vault/bindings/nope', { headers: ep.headers, expect: 404 });
  const dup = await through(eg.base, 'POST', '/credential-vault', { headers: ep.headers, expect: 409,
    body: { credentials: [], bindings: [] } });
  check(/already/.test(dup.text), dup.text);
  const bad = await through(eg.base, 'PATCH', '/credential-vault', { headers: ep.headers, expect: 400,
    body: { bindings: { add: [{ name: 'x', match: { hosts: [HOST], paths: ['/admin/*'] }, auth: { type: 'bearer', credential: 'tok' } }] } } });
  check(/methods and paths/.test(bad.text), bad.text);
});

await test('patch replaces the credential (revision 2); a stale expectedRevision is refused', async () => {
  const st = await sbx.credentialVault.patch({ expectedRevision: 1,
    credentials: { replace: [{ name: 'tok', source: { type: 'inline', value: V2 } }] } });
  clean(st, 'patch');
  check(st.revision === 2, JSON.stringify(st));
  const got = await curl('/vault2');
  check(got.length === 1 && authOf(got[0]) === `Bearer ${V2}`, JSON.stringify(got));
  let failed = null;
  try { await sbx.credentialVault.patch({ expectedRevision: 1, bindings: { delete: ['api'] } }); } catch (e) { failed = e; }
  check(failed && /409|revision/.test(String(failed.message || failed)), String(failed));
});

await test('delete: the host gets nothing after', async () => {
  await sbx.credentialVault.delete();
  const got = await curl('/vault3');
  check(got.length === 1 && authOf(got[0]) === undefined, JSON.stringify(got));
  let failed = null;
  try { await sbx.credentialVault.get(); } catch (e) { failed = e; }
  check(failed, 'get after delete fails');
});

await test('a sandbox without credentialProxy refuses a vault', async () => {
  plain = await Sandbox.create({ connectionConfig, image: 'host', timeoutSeconds: 600,
                                 networkPolicy: { defaultAction: 'deny', egress: [{ action: 'allow', target: HOST }] } });
  let failed = null;
  try {
    await plain.credentialVault.create({ credentials: [{ name: 't', source: { type: 'inline', value: V1 } }], bindings: [] });
  } catch (e) { failed = e; }
  check(failed && /credentialProxy/.test(String(failed.message || failed) + JSON.stringify(failed)), String(failed));
});

for (const s of [sbx, plain])
  if (s) await s.kill().catch(() => {});
await done();
