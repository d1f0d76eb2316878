// Raw stdio checks that the SDK client cannot make (it always initializes first):
// requests before initialize, version negotiation, parse errors, id echo, clean exit on EOF.
//   node stdio_raw.mjs --mcpbox build/mcpbox
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { test } from 'node:test';
import { parseArgs, requireBinary, tempStateDir, waitFor } from './lib.mjs';

const BIN = requireBinary(parseArgs(process.argv.slice(2)).mcpbox);
const stateDir = tempStateDir('stdio-raw');

/* A child `mcpbox serve --conformance-fixtures` spoken to line by line. */
function startRaw() {
    const child = spawn(BIN, ['serve', '--conformance-fixtures', '--state-dir', stateDir],
        { stdio: ['pipe', 'pipe', 'pipe'], env: process.env });
    const s = { child, lines: [], bad: [], stderr: '', buf: '' };
    child.stdout.on('data', (d) => {
        s.buf += d;
        let i;
        while ((i = s.buf.indexOf('\n')) >= 0) {
            const line = s.buf.slice(0, i);
            s.buf = s.buf.slice(i + 1);
            try { s.lines.push(JSON.parse(line)); } catch { s.bad.push(line); }
        }
    });
    child.stderr.on('data', (d) => { s.stderr += d; });
    s.exit = new Promise((r) => child.on('exit', (code, sig) => r({ code, sig })));
    s.write = (x) => child.stdin.write(typeof x === 'string' ? x : JSON.stringify(x) + '\n');
    s.reply = (id, ms = 10000) => waitFor(() => s.lines.find((m) => m.id === id && ('result' in m || 'error' in m)),
        ms, `reply to ${JSON.stringify(id)}; stderr: ${s.stderr}`);
    s.request = (id, method, params) => { s.write({ jsonrpc: '2.0', id, method, params }); return s.reply(id); };
    s.end = async () => { child.stdin.end(); return s.exit; };
    return s;
}

const initParams = (v) => ({ protocolVersion: v, capabilities: {}, clientInfo: { name: 'raw', version: '1' } });

test('requests before initialize are refused; ping is answered; then initialize works', async () => {
    const s = startRaw();
    const early = await s.request(1, 'tools/list', {});
    assert.ok(early.error, `tools/list before initialize is an error: ${JSON.stringify(early)}`);
    assert.equal(typeof early.error.code, 'number');
    assert.ok(!('result' in early));
    const call = await s.request('c1', 'tools/call', { name: 'test_simple_text' });
    assert.ok(call.error, `tools/call before initialize is an error: ${JSON.stringify(call)}`);
    const ping = await s.request(2, 'ping', {});
    assert.deepEqual(ping.result, {}, `ping before initialize: ${JSON.stringify(ping)}`);
    const init = await s.request(3, 'initialize', initParams('2025-06-18'));
    assert.equal(init.result?.protocolVersion, '2025-06-18', 'a supported older version is kept');
    s.write({ jsonrpc: '2.0', method: 'notifications/initialized' });
    const list = await s.request(4, 'tools/list', {});
    assert.ok(list.result?.tools?.some((t) => t.name === 'test_simple_text'), 'tools/list works after initialize');
    assert.deepEqual(s.bad, [], 'stdout carries nothing but JSON-RPC lines');
    const { code } = await s.end();
    assert.equal(code, 0, `exit status after EOF on stdin; stderr:\n${s.stderr}`);
});

test('version negotiation: each supported version, and the latest for an unknown one', async () => {
    for (const [asked, want] of [['2025-11-25', '2025-11-25'], ['2025-03-26', '2025-03-26'],
        ['1999-01-01', '2025-11-25']]) {
        const s = startRaw();
        const init = await s.request(0, 'initialize', initParams(asked));
        assert.equal(init.result?.protocolVersion, want, `asked ${asked}: ${JSON.stringify(init)}`);
        assert.ok(init.result.serverInfo?.name);
        assert.equal(init.id, 0, 'id 0 echoed as the integer 0');
        await s.end();
    }
});

test('parse errors, invalid requests and odd ids; the server keeps serving', async () => {
    const s = startRaw();
    await s.request(1, 'initialize', initParams('2025-11-25'));
    s.write({ jsonrpc: '2.0', method: 'notifications/initialized' });
    s.write('this is not json\n');
    await waitFor(() => s.lines.find((m) => m.error?.code === -32700), 5000, '-32700 for garbage');
    const garbage = s.lines.find((m) => m.error?.code === -32700);
    assert.equal(garbage.id, null, 'a parse error has id null');
    s.write('{"jsonrpc":"2.0","id":77,"method":"pi\n');
    await waitFor(() => s.lines.filter((m) => m.error?.code === -32700).length >= 2, 5000, '-32700 for a truncated message');
    s.write('{"jsonrpc":"1.0","id":78,"method":"ping"}\n');
    const v1 = await s.reply(78);
    assert.equal(v1.error?.code, -32600, `wrong jsonrpc version: ${JSON.stringify(v1)}`);
    s.write('{"jsonrpc":"2.0","id":79}\n');
    const nometh = await s.reply(79);
    assert.equal(nometh.error?.code, -32600, `request without method: ${JSON.stringify(nometh)}`);
    s.write('[{"jsonrpc":"2.0","id":80,"method":"ping"}]\n');
    // 2025-06-18 removed JSON-RPC batches; this session negotiated 2025-11-25.
    const batch = await waitFor(() => s.lines.find((m) => Array.isArray(m) ||
        (m.error?.code === -32600 && (m.id === null || m.id === 80))), 5000, 'a reply to a batch');
    assert.ok(!Array.isArray(batch), `a batch is refused with -32600, not executed: ${JSON.stringify(batch)}`);
    const unk = await s.request('id-with-"quotes"', 'nope/nope', {});
    assert.equal(unk.error?.code, -32601);
    assert.equal(unk.id, 'id-with-"quotes"', 'string id echoed exactly');
    const big = Number.MAX_SAFE_INTEGER;
    assert.deepEqual((await s.request(big, 'ping', {})).result, {});
    assert.equal(s.lines.find((m) => m.id === big).id, big, 'large integer id echoed exactly');
    const call = await s.request(81, 'tools/call', { name: 'test_simple_text' });
    assert.ok(call.result?.content?.length > 0, 'still serving tools/call');
    assert.deepEqual(s.bad, [], 'stdout carries nothing but JSON-RPC lines');
    const { code } = await s.end();
    assert.equal(code, 0, `exit status after EOF; stderr:\n${s.stderr}`);
});
