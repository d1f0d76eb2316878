// Approvals on mcpbox's OpenSandbox API (issue 38): its callers are programs and cannot be asked,
// so the person's settings decide. By default widening egress beyond the person's list
// (--approve-egress-allow) is refused, at create (no networkPolicy = everything, or rules beyond
// the list) and on the egress sidecar's PATCH /policy; the refusal names the option that changes
// it. --approve egress=allow or --approve-unasked egress=allow lets programs through.
//   node osapi_approval.mjs --mcpbox path/to/mcpbox
import { check, done, parseArgs, requireTooling, startMcpbox, tempStateDir, test } from './osapi_lib.mjs';

requireTooling();
const args = parseArgs(process.argv.slice(2));
const tag = Math.random().toString(36).slice(2, 8);
const listed = `pypi-${tag}.example`, evil = `evil-${tag}.example`;
const base = { image: { uri: 'host' }, entrypoint: ['tail', '-f', '/dev/null'] };
const rules = (...names) => ({ defaultAction: 'deny', egress: names.map((n) => ({ action: 'allow', target: n })) });

async function req(url, method, body, headers = {}) {
  const r = await fetch(url, { method, headers: { 'Content-Type': 'application/json', ...headers },
                               body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  let json;
  try { json = text ? JSON.parse(text) : undefined; } catch { json = undefined; }
  return { status: r.status, text, json };
}

/* A server with the person's default approvals (the test library allows egress; undone here). */
const person = ['--approve', 'egress=ask', '--approve-egress-allow', listed];
const srv = await startMcpbox(args.mcpbox, { stateDir: tempStateDir('approval'), extraArgs: person });
const api = `${srv.base}/v1`;

await test('create without networkPolicy (all egress) is refused, naming how to allow it', async () => {
  const r = await req(`${api}/sandboxes`, 'POST', base);
  check(r.status === 403 && /cannot ask/.test(r.json?.message) && /--approve-unasked egress=allow/.test(r.json.message),
        `${r.status} ${r.text}`);
});

await test('create with rules beyond the list is refused; within it, or egress off, goes through', async () => {
  const r = await req(`${api}/sandboxes`, 'POST', { ...base, networkPolicy: rules(listed, evil) });
  check(r.status === 403 && r.json.message.includes(evil) && !r.json.message.includes(`"${listed}"`), `${r.status} ${r.text}`);
  const off = await req(`${api}/sandboxes`, 'POST', { ...base, networkPolicy: { defaultAction: 'deny' } });
  check(off.status === 202 || off.status === 200 || off.status === 201, `${off.status} ${off.text}`);
  const ok = await req(`${api}/sandboxes`, 'POST', { ...base, networkPolicy: rules(listed) });
  check(ok.status === 202 || ok.status === 200 || ok.status === 201, `${ok.status} ${ok.text}`);
  // the egress sidecar's PATCH beyond the list is refused too; the policy stays
  const ep = (await req(`${api}/sandboxes/${ok.json.id}/endpoints/18080`, 'GET')).json;
  const p = await req(`http://${ep.endpoint}/policy`, 'PATCH', [{ action: 'allow', target: evil }], ep.headers);
  check(p.status === 403 && p.text.includes(evil), `PATCH: ${p.status} ${p.text}`);
  const g = await req(`http://${ep.endpoint}/policy`, 'GET', undefined, ep.headers);
  check(!g.text.includes(evil), `policy unchanged: ${g.text}`);
  const within = await req(`http://${ep.endpoint}/policy`, 'PATCH', [{ action: 'allow', target: `a.${listed}` }], ep.headers);
  check(within.status === 403, `a.${listed} is not ${listed}: ${within.status}`);
  for (const id of [off.json.id, ok.json.id]) await req(`${api}/sandboxes/${id}`, 'DELETE');
});

await test('--approve-unasked egress=allow: programs may widen egress', async () => {
  const s2 = await startMcpbox(args.mcpbox, { stateDir: tempStateDir('approval-unasked'),
                                              extraArgs: [...person, '--approve-unasked', 'egress=allow'] });
  const r = await req(`${s2.base}/v1/sandboxes`, 'POST', { ...base, networkPolicy: rules(evil) });
  check(r.status === 202 || r.status === 200 || r.status === 201, `${r.status} ${r.text}`);
  await req(`${s2.base}/v1/sandboxes/${r.json.id}`, 'DELETE');
});

await test('--approve egress=refuse: refused even with unasked allow', async () => {
  const s3 = await startMcpbox(args.mcpbox, { stateDir: tempStateDir('approval-refuse'),
                                              extraArgs: ['--approve', 'egress=refuse', '--approve-unasked', 'egress=allow'] });
  const r = await req(`${s3.base}/v1/sandboxes`, 'POST', { ...base, networkPolicy: rules(evil) });
  check(r.status === 403 && /--approve egress=refuse/.test(r.text), `${r.status} ${r.text}`);
});

await done();
