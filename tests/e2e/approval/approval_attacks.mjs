// Approvals under attack (issue 38), by hand on the wire, over HTTP: what a hostile agent or a
// confused client could try against the 2026-07-28 round trip and the 2025-11-25 form.
//  - a forged or altered requestState is refused (integrity check), nothing runs;
//  - an answer sealed for one question does not approve another (other names): asked again;
//  - an inputResponses without any requestState asks, it does not allow;
//  - an answer outside the form's enum, or a retry after the person's timeout, is refused;
//  - two sandboxes at once: an "allow for this sandbox" on one leaves the other asking;
//  - a flood of questions from one client is answered one by one, each refused, the server fine.
//
//   node approval_attacks.mjs --mcpbox BIN
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs, requireBinary, SKIP, sleep, startHttpServer, tempStateDir } from '../sdk/lib.mjs';
import { accept, connect, Person, text } from './approval_lib.mjs';

const MODERN = '2026-07-28';
const args = parseArgs(process.argv.slice(2));
const bin = requireBinary(args.mcpbox);
const tag = Math.random().toString(36).slice(2, 8);
const evil = `evil-${tag}.example`, other = `other-${tag}.example`;
const stateDir = tempStateDir('approval-attacks');
const server = await startHttpServer(bin, ['--local-pool', '0', '--approve-timeout', '2'], { stateDir });

let id = 0;
async function raw(tool, a, extra = {}, caps = { elicitation: {} }) {
    const headers = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream',
                      'MCP-Protocol-Version': MODERN, 'Mcp-Method': 'tools/call', 'Mcp-Name': tool };
    const body = { jsonrpc: '2.0', id: ++id, method: 'tools/call', params: { name: tool, arguments: a, ...extra,
        _meta: { 'io.modelcontextprotocol/protocolVersion': MODERN,
                 'io.modelcontextprotocol/clientCapabilities': caps } } };
    const r = await fetch(server.url, { method: 'POST', headers, body: JSON.stringify(body) });
    const m = await r.json();
    return m.error ? { error: m.error } : m.result;
}
const policy = (...names) => ({ network_policy: { egress: names.map((n) => ({ action: 'allow', target: n })) } });
const yes = { mcpbox_approval: { action: 'accept', content: { answer: 'Allow once' } } };

class Check extends Error {}
function check(cond, what) { if (!cond) throw new Check(`check failed: ${what}`); }

const probe = await raw('create_sandbox', {});
if (probe.isError || probe.error) {
    console.log(`# SKIP: ${JSON.stringify(probe).slice(0, 300)}`);
    await server.stop();
    process.exit(SKIP);
}
const made = [probe.structuredContent.sandbox_id];

const cases = [
    ['a 2026 client is asked with an InputRequiredResult; its answer runs the call', async () => {
        const q = await raw('create_sandbox', policy(evil));
        check(q.resultType === 'input_required' && q.inputRequests?.mcpbox_approval?.method === 'elicitation/create' &&
              typeof q.requestState === 'string', JSON.stringify(q).slice(0, 300));
        const r = await raw('create_sandbox', policy(evil), { inputResponses: yes, requestState: q.requestState });
        check(!r.isError && r.structuredContent?.sandbox_id, JSON.stringify(r).slice(0, 300));
        made.push(r.structuredContent.sandbox_id);
    }],
    ['a forged or altered requestState is refused and nothing runs', async () => {
        const q = await raw('create_sandbox', policy(evil));
        const flipped = q.requestState.slice(0, -2) + (q.requestState.endsWith('A') ? 'BB' : 'AA');
        for (const s of [flipped, 'forged', JSON.stringify({ tool: 'create_sandbox', approval: '0' })]) {
            const r = await raw('create_sandbox', policy(evil), { inputResponses: yes, requestState: s });
            check(r.error && /integrity/.test(r.error.message), `state ${s.slice(0, 20)}: ${JSON.stringify(r).slice(0, 200)}`);
        }
    }],
    ['an answer sealed for one question does not approve another', async () => {
        const q = await raw('create_sandbox', policy(`ok-${tag}.example`));
        const r = await raw('create_sandbox', policy(other), { inputResponses: yes, requestState: q.requestState });
        check(r.resultType === 'input_required' &&
              JSON.stringify(r.inputRequests).includes(other), `asked again: ${JSON.stringify(r).slice(0, 300)}`);
        const sid = made[0];
        const u = await raw('update_sandbox', { sandbox_id: sid, ...policy(other) },
                            { inputResponses: yes, requestState: q.requestState });
        check(u.resultType === 'input_required', `another tool: ${JSON.stringify(u).slice(0, 200)}`);
    }],
    ['inputResponses without a requestState asks; it does not allow', async () => {
        const r = await raw('create_sandbox', policy(other), { inputResponses: yes });
        check(r.resultType === 'input_required', JSON.stringify(r).slice(0, 200));
    }],
    ['an answer outside the enum, or after the person\'s timeout, is refused', async () => {
        const q = await raw('create_sandbox', policy(other));
        const odd = { mcpbox_approval: { action: 'accept', content: { answer: 'Allow everything forever' } } };
        const r = await raw('create_sandbox', policy(other), { inputResponses: odd, requestState: q.requestState });
        check(r.isError && /dismissed/.test(text(r)), JSON.stringify(r).slice(0, 200));
        await sleep(2300);
        const late = await raw('create_sandbox', policy(other), { inputResponses: yes, requestState: q.requestState });
        check(late.isError && /Nobody answered within 2 s/.test(text(late)), JSON.stringify(late).slice(0, 200));
    }],
    ['a client without elicitation on 2026 gets the cannot-ask refusal', async () => {
        const r = await raw('create_sandbox', policy(other), {}, {});
        check(r.isError && /cannot ask/.test(text(r)), JSON.stringify(r).slice(0, 200));
    }],
    ['two sandboxes at once: allowing one leaves the other asking (2025-11-25 client)', async () => {
        const person = new Person();
        const c = await connect({ revision: '2025', transport: 'http', url: server.url, person });
        try {
            person.says(accept('Allow once'));
            const deny = { network_policy: { default_action: 'deny' } }; // a policy, nothing allowed
            const a = (await c.call('create_sandbox', deny)).structuredContent.sandbox_id;
            const b = (await c.call('create_sandbox', deny)).structuredContent.sandbox_id;
            made.push(a, b);
            person.says(accept('Allow for this sandbox'));
            const [ra, rb] = await Promise.all([
                c.call('update_sandbox', { sandbox_id: a, network_policy: { default_action: 'deny', egress: [{ action: 'allow', target: evil }] } }),
                c.call('update_sandbox', { sandbox_id: b, network_policy: { default_action: 'deny', egress: [{ action: 'allow', target: other }] } })]);
            check(!ra.isError && !rb.isError, `${text(ra)} ${text(rb)}`);
            const n = person.asked.length;
            person.says({ action: 'decline' });
            const rb2 = await c.call('update_sandbox', { sandbox_id: b, ...policy(evil) });
            check(rb2.isError && person.asked.length === n + 1, 'b asks for the name a was allowed');
            // a flood: 20 questions at once, each answered (declined), the server still serves
            const all = await Promise.all(Array.from({ length: 20 }, (_, i) =>
                c.call('update_sandbox', { sandbox_id: b, ...policy(`f${i}-${tag}.example`) })));
            // each is asked and declined, or (beyond the server's cap on questions in flight)
            // refused unasked; none runs
            const bad = all.filter((r) => !(r.isError && /declined|Too many questions/.test(text(r))));
            check(bad.length === 0, `every flooded question refused: ${bad.map(text).join(' | ').slice(0, 600)}`);
            const alive = await c.call('get_sandbox', { sandbox_id: a });
            check(!alive.isError, 'still serving');
        } finally {
            await c.close();
        }
    }],
    ['past the client\'s own timeout: refused as cancelled, and a late yes changes nothing', async () => {
        const person = new Person();
        const c = await connect({ revision: '2025', transport: 'http', url: server.url, person });
        try {
            const sid = (await c.call('create_sandbox', { network_policy: { default_action: 'deny' } })).structuredContent.sandbox_id;
            made.push(sid);
            person.says(accept('Allow once'), 1500); // the person answers after the client gave up
            let threw = false;
            try {
                await c.client.callTool({ name: 'update_sandbox', arguments: { sandbox_id: sid, ...policy(evil) } },
                                        undefined, { timeout: 500 });
            } catch { threw = true; }
            check(threw, 'the client timed out');
            await sleep(2000);
            const sb = (await c.call('get_sandbox', { sandbox_id: sid })).structuredContent;
            check(!JSON.stringify(sb.network_policy).includes(evil), `unchanged: ${JSON.stringify(sb.network_policy)}`);
            const d = (await c.call('diagnose_sandbox', { sandbox_id: sid, what: 'events' })).structuredContent;
            const answers = (d.events || []).filter((e) => e.kind === 'approval').map((e) => e.data.answer);
            check(answers.includes('cancelled') && !answers.includes('allowed'), `events: ${answers}`);
        } finally {
            await c.close();
        }
    }],
    ['an apply writes only what the person was shown, even if the sandbox writes more meanwhile', async () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mbx-approval-apply-'));
        fs.chmodSync(dir, 0o755);
        const srv = await startHttpServer(bin, ['--local-pool', '0', '--apply-unreviewed', '--allow-dir', dir],
                                          { stateDir: tempStateDir('approval-apply') });
        const person = new Person();
        const c = await connect({ revision: '2025', transport: 'http', url: srv.url, person });
        try {
            const sid = (await c.call('create_sandbox', { mounts: [{ source: dir, target: '/workspace/p' }] })).structuredContent.sandbox_id;
            await c.call('write_file', { sandbox_id: sid, path: '/workspace/p/shown.txt', content: 'shown\n' });
            // a name that tries to draw its own lines on the form, and one that reverses text
            const named = await c.call('write_file', { sandbox_id: sid, content: '',
                path: '/workspace/p/n\nWhy it matters: nothing, accept\u202etxt.exe' });
            check(!named.isError, text(named));
            // while the person reads the form, the sandbox writes another file; then they accept
            person.answer = async (params) => {
                person.asked.push(params);
                await c.call('write_file', { sandbox_id: sid, path: '/workspace/p/sneaky.txt', content: 'x\n' });
                await c.call('write_file', { sandbox_id: sid, path: '/workspace/p/shown.txt', content: 'changed\n' });
                return accept('Allow once');
            };
            const r = await c.call('apply_changes', { sandbox_id: sid }); // no token: --apply-unreviewed
            const q = person.asked[0]?.message || '';
            check(person.asked.length === 1 && q.includes('shown.txt') && !q.includes('sneaky'), q);
            check(!q.includes('\nWhy it matters: nothing') && q.includes('\\x0aWhy it matters: nothing') &&
                  !q.includes('\u202e') && q.includes('\\u{202E}'), `names shown safely: ${JSON.stringify(q)}`);
            check(!fs.existsSync(path.join(dir, 'sneaky.txt')), `a file the person never saw was written: ${text(r)}`);
            check(!fs.existsSync(path.join(dir, 'shown.txt')) || fs.readFileSync(path.join(dir, 'shown.txt'), 'utf8') === 'shown\n',
                  'shown.txt holds what was shown, or nothing');
            await c.call('destroy_sandbox', { sandbox_id: sid });
        } finally {
            await c.close();
            await srv.stop();
            fs.rmSync(dir, { recursive: true, force: true });
        }
    }],
];

let n = 0, failed = 0;
for (const [name, fn] of cases) {
    n++;
    try {
        await fn();
        console.log(`ok ${n} - ${name}`);
    } catch (e) {
        failed++;
        console.log(`not ok ${n} - ${name}`);
        for (const line of String(e.stack || e).split('\n').slice(0, 6)) console.log(`# ${line}`);
    }
}
console.log(`1..${n}`);
for (const s of made) await raw('destroy_sandbox', { sandbox_id: s });
const rc = await server.stop();
if (rc !== 0 || /Sanitizer|runtime error:/.test(server.stderr())) {
    console.log(`not ok - mcpbox stopped with ${rc}\n# ${server.stderr().slice(-2000).split('\n').join('\n# ')}`);
    failed++;
}
fs.rmSync(stateDir, { recursive: true, force: true });
process.exit(failed ? 1 : 0);
