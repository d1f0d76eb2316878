// End-to-end test of mcpbox with the official TypeScript SDK client, over one transport.
//   node sdk_e2e.mjs --mcpbox build/mcpbox --transport stdio|http
// stdio: every client spawns its own `mcpbox serve --conformance-fixtures`.
// http:  one `mcpbox serve --http 127.0.0.1:0 --conformance-fixtures`; every client is a session.
// Expectations follow the MCP 2025-11-25 spec and the fixture catalogue in
// docs/internals/mcp-spec-points.md §2.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import events from 'node:events';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
    TapTransport, contentTypes, firstText, parseArgs, requireBinary, sdkImport, sleep,
    startHttpServer, tempStateDir, waitFor,
} from './lib.mjs';

const args = parseArgs(process.argv.slice(2));
const BIN = requireBinary(args.mcpbox);
const MODE = args.transport || 'stdio';
const { Client } = await sdkImport('client/index.js');
const { StdioClientTransport } = await sdkImport('client/stdio.js');
const { StreamableHTTPClientTransport } = await sdkImport('client/streamableHttp.js');
const types = await sdkImport('types.js');
const { McpError, CreateMessageRequestSchema, ElicitRequestSchema, LoggingMessageNotificationSchema } = types;
events.setMaxListeners(0);   // the SDK's HTTP client adds one abort listener per fetch

const CALL_TIMEOUT = { timeout: 15000 };
const FIXTURE_TOOLS = ['test_simple_text', 'test_image_content', 'test_audio_content',
    'test_embedded_resource', 'test_multiple_content_types', 'test_tool_with_logging',
    'test_tool_with_progress', 'test_error_handling', 'test_sampling', 'test_elicitation',
    'test_elicitation_sep1034_defaults', 'test_elicitation_sep1330_enums', 'json_schema_2020_12_tool'];
const PNG_MAGIC = Buffer.from([0x89, 0x50, 0x4e, 0x47]);

/* A limit from mcp/limits.h (the tests follow the constant rather than repeat it). */
function limit(name) {
    const file = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../mcp/limits.h');
    const m = new RegExp(`#define ${name} \\(?(\\d+)`).exec(fs.readFileSync(file, 'utf8'));
    assert.ok(m, `${name} defined in mcp/limits.h`);
    return Number(m[1]);
}

let http = null;          // the shared HTTP server (http mode)
const stateDir = tempStateDir('sdk-e2e');
const openClients = new Set();

before(async () => {
    if (MODE === 'http') http = await startHttpServer(BIN, ['--conformance-fixtures'], { stateDir });
});
after(async () => {
    for (const c of openClients) await c.close().catch(() => {});
    if (http) {
        const rc = await http.stop();
        if (rc !== 0 && rc !== 'SIGTERM') console.log(`# mcpbox exited with ${rc}; stderr:\n${http.stderr()}`);
    }
});

/* A connected SDK client with sampling/elicitation capabilities; its transport is tapped. */
async function connect({ fixtures = true, capabilities, name = 'sdk-e2e' } = {}) {
    let inner;
    let stderr = '';
    if (MODE === 'stdio') {
        const a = ['serve', '--state-dir', stateDir];
        if (fixtures) a.push('--conformance-fixtures');
        inner = new StdioClientTransport({ command: BIN, args: a, env: process.env, stderr: 'pipe' });
        inner.stderr?.on('data', (d) => { stderr += d; });
    } else {
        inner = new StreamableHTTPClientTransport(new URL(http.url));
    }
    const tap = new TapTransport(inner);
    const client = new Client({ name, version: '1.0.0' },
        { capabilities: capabilities ?? { sampling: {}, elicitation: {} } });
    client.onerror = () => {};    // late/unknown responses are checked through the tap
    await client.connect(tap, CALL_TIMEOUT);
    const handle = {
        client, tap, stderr: () => stderr,
        async close() {
            openClients.delete(handle);
            // HTTP: end the session with DELETE, as a well-behaved client does (the spec's SHOULD).
            if (MODE === 'http') await inner.terminateSession().catch(() => {});
            const child = inner._process;     // stdio: the spawned mcpbox (SDK-internal field)
            const exited = child && new Promise((r) => (child.exitCode !== null || child.signalCode !== null
                ? r(child.exitCode ?? child.signalCode) : child.once('exit', (code, sig) => r(code ?? sig))));
            await client.close();
            // The SDK closes stdin and waits 2 s before SIGTERM: mcpbox must exit 0 on EOF by then
            // (under ASan this also catches leaks and errors at shutdown).
            if (exited) assert.equal(await exited, 0, `mcpbox exit status after EOF; stderr:\n${stderr}`);
        },
    };
    openClients.add(handle);
    return handle;
}

async function expectMcpError(promise, code, what) {
    try {
        const r = await promise;
        assert.fail(`${what}: expected JSON-RPC error ${code}, got result ${JSON.stringify(r)}`);
    } catch (e) {
        if (e instanceof assert.AssertionError) throw e;
        assert.ok(e instanceof McpError, `${what}: expected McpError, got ${e}`);
        if (code !== undefined) assert.equal(e.code, code, `${what}: error code (message: ${e.message})`);
        return e;
    }
}

test('initialize: negotiated version, serverInfo, capabilities', async () => {
    const c = await connect();
    const init = c.tap.incoming().find((m) => m.id !== undefined && m.result?.protocolVersion);
    assert.ok(init, 'an initialize result was received');
    assert.equal(init.result.protocolVersion, '2025-11-25', 'the client asked for 2025-11-25');
    const info = c.client.getServerVersion();
    assert.equal(typeof info.name, 'string');
    assert.ok(info.name.length > 0, 'serverInfo.name is non-empty');
    assert.equal(typeof info.version, 'string');
    const caps = c.client.getServerCapabilities();
    for (const k of ['tools', 'resources', 'prompts', 'logging', 'completions']) {
        assert.ok(caps[k] && typeof caps[k] === 'object', `capability ${k} is declared`);
    }
    assert.equal(caps.resources.subscribe, true, 'resources.subscribe');
    if (MODE === 'http') {
        assert.match(c.tap.sessionId ?? '', /^[\x21-\x7e]{16,}$/, 'Mcp-Session-Id is visible ASCII, not short');
    }
    assert.deepEqual(await c.client.ping(), {}, 'ping returns {}');
    await c.close();
});

test('tools/list: every fixture, with descriptions and input schemas', async () => {
    const c = await connect();
    const { tools } = await c.client.listTools();
    const names = tools.map((t) => t.name);
    assert.equal(new Set(names).size, names.length, `tool names are unique: ${names}`);
    for (const n of FIXTURE_TOOLS) assert.ok(names.includes(n), `fixture ${n} listed`);
    for (const t of tools) {
        assert.match(t.name, /^[A-Za-z0-9_.-]{1,128}$/, `tool name ${t.name}`);
        assert.ok(typeof t.description === 'string' && t.description.length > 0, `${t.name} has a description`);
        assert.equal(t.inputSchema?.type, 'object', `${t.name} inputSchema is an object schema`);
    }
    const js = tools.find((t) => t.name === 'json_schema_2020_12_tool');
    const fixture = path.resolve(path.dirname(fileURLToPath(import.meta.url)),
        '../../../tests/fixtures/schemas/fixtures/json_schema_2020_12_tool.json');
    const expected = JSON.parse(fs.readFileSync(fixture, 'utf8')).inputSchema;
    assert.deepEqual(js.inputSchema, expected, 'json_schema_2020_12_tool inputSchema is served verbatim');
    assert.equal(js.inputSchema.$defs.address.$anchor, 'addressDef', 'SEP-2106 $anchor kept');
    assert.ok(js.inputSchema.allOf[0].anyOf && js.inputSchema.if && js.inputSchema.then && js.inputSchema.else,
        'SEP-2106 allOf/anyOf and if/then/else kept');
    await c.close();
});

test('tools/list without --conformance-fixtures has no fixture', async () => {
    let srv = null;
    let c;
    if (MODE === 'http') {
        srv = await startHttpServer(BIN, [], { stateDir: tempStateDir('nofix') });
        const tap = new TapTransport(new StreamableHTTPClientTransport(new URL(srv.url)));
        const client = new Client({ name: 'nofix', version: '1' });
        await client.connect(tap, CALL_TIMEOUT);
        c = { client, close: () => client.close() };
    } else {
        c = await connect({ fixtures: false });
    }
    try {
        const { tools } = await c.client.listTools();
        const leaked = tools.map((t) => t.name).filter((n) => FIXTURE_TOOLS.includes(n) || n.startsWith('test_'));
        assert.deepEqual(leaked, [], 'no fixture tool in the default tool list');
        if (c.client.getServerCapabilities().resources) {
            const { resources } = await c.client.listResources();
            assert.deepEqual(resources.filter((r) => r.uri.startsWith('test://')), [], 'no fixture resource');
        }
        if (c.client.getServerCapabilities().prompts) {
            const { prompts } = await c.client.listPrompts();
            assert.deepEqual(prompts.filter((p) => p.name.startsWith('test_')), [], 'no fixture prompt');
        }
        await expectMcpError(c.client.callTool({ name: 'test_simple_text' }), -32602,
            'calling a fixture that is not registered');
    } finally {
        await c.close();
        if (srv) await srv.stop();
    }
});

test('tools/call: content kinds, isError results, unknown tool', async () => {
    const c = await connect();
    await c.client.listTools();
    // test_simple_text is called with no "arguments" key at all, as the conformance suite does.
    const simple = await c.client.callTool({ name: 'test_simple_text' }, undefined, CALL_TIMEOUT);
    assert.ok(firstText(simple).length > 0, `text content: ${JSON.stringify(simple)}`);
    assert.notEqual(simple.isError, true);

    const img = await c.client.callTool({ name: 'test_image_content', arguments: {} });
    const im = img.content.find((x) => x.type === 'image');
    assert.equal(im?.mimeType, 'image/png');
    assert.ok(Buffer.from(im.data, 'base64').subarray(0, 4).equals(PNG_MAGIC), 'image data is a base64 PNG');

    const audio = await c.client.callTool({ name: 'test_audio_content', arguments: {} });
    assert.equal(audio.content.find((x) => x.type === 'audio')?.mimeType, 'audio/wav');

    const mixed = await c.client.callTool({ name: 'test_multiple_content_types', arguments: {} });
    for (const k of ['text', 'image', 'resource']) assert.ok(contentTypes(mixed).includes(k), `mixed has ${k}`);

    const emb = await c.client.callTool({ name: 'test_embedded_resource', arguments: {} });
    const r = emb.content.find((x) => x.type === 'resource')?.resource;
    assert.ok(r?.uri && r?.mimeType && (r.text || r.blob), `embedded resource: ${JSON.stringify(emb)}`);

    const err = await c.client.callTool({ name: 'test_error_handling', arguments: {} });
    assert.equal(err.isError, true, 'test_error_handling returns a result with isError');
    assert.ok(firstText(err).length > 0);

    const e = await expectMcpError(c.client.callTool({ name: 'no_such_tool_xyz', arguments: {} }), -32602,
        'unknown tool');
    assert.match(e.message, /no_such_tool_xyz/, 'the error names the unknown tool');

    // Input validated against the schema: test_sampling requires prompt: string.
    const bad = await c.client.callTool({ name: 'test_sampling', arguments: { prompt: 42 } })
        .catch((x) => x);
    const badText = bad instanceof McpError ? bad.message : (bad.isError ? firstText(bad) : null);
    assert.ok(badText !== null, `a wrongly typed argument is rejected: ${JSON.stringify(bad)}`);
    if (bad instanceof McpError) assert.equal(bad.code, -32602);
    assert.match(badText, /prompt/, 'the validation error names the field');
    await c.close();
});

test('progress: notifications/progress reach onprogress before the result', async () => {
    const c = await connect();
    const seen = [];
    const res = await c.client.callTool({ name: 'test_tool_with_progress', arguments: {} }, undefined,
        { ...CALL_TIMEOUT, onprogress: (p) => seen.push(p) });
    assert.ok(firstText(res).length > 0 || res.content.length > 0);
    assert.ok(seen.length >= 3, `at least 3 progress notifications, got ${JSON.stringify(seen)}`);
    for (let i = 1; i < seen.length; i++) {
        assert.ok(seen[i].progress > seen[i - 1].progress, `progress increases: ${JSON.stringify(seen)}`);
    }
    // On the wire: every progress notification for this call came before its response.
    const log = c.tap.log;
    const reqIdx = log.findLastIndex((e) => e.dir === 'out' && e.msg.method === 'tools/call');
    const callId = log[reqIdx].msg.id;
    const token = log[reqIdx].msg.params._meta.progressToken;
    const respIdx = log.findIndex((e) => e.dir === 'in' && e.msg.id === callId && 'result' in e.msg);
    const progIdx = log.map((e, i) => [e, i]).filter(([e]) => e.dir === 'in' &&
        e.msg.method === 'notifications/progress' && e.msg.params.progressToken === token).map(([, i]) => i);
    assert.ok(progIdx.length >= 3 && progIdx.every((i) => i < respIdx), 'progress precedes the result');
    // The same with a string token sent through the raw transport.
    const strTok = 'tok-' + Date.now();
    const raw = await c.tap.rawRequest({ jsonrpc: '2.0', id: 'p-1', method: 'tools/call',
        params: { name: 'test_tool_with_progress', arguments: {}, _meta: { progressToken: strTok } } });
    assert.ok(raw.result, `string-token call succeeds: ${JSON.stringify(raw)}`);
    const strProg = c.tap.incoming().filter((m) => m.method === 'notifications/progress' &&
        m.params.progressToken === strTok);
    assert.ok(strProg.length >= 3, 'progress for a string progressToken carries that exact token');
    await c.close();
});

test('cancellation: aborted call gets no reply, the session keeps serving', async () => {
    const c = await connect();
    const ac = new AbortController();
    let progressCount = 0;
    const p = c.client.callTool({ name: 'test_tool_with_progress', arguments: {} }, undefined, {
        ...CALL_TIMEOUT, signal: ac.signal,
        onprogress: () => { if (++progressCount === 1) ac.abort('test cancels'); },
    });
    await assert.rejects(p, (e) => /abort|cancel/i.test(String(e?.message ?? e)), 'the call rejects as aborted');
    const out = c.tap.log.filter((e) => e.dir === 'out');
    const call = out.findLast((e) => e.msg.method === 'tools/call').msg;
    const cancel = out.find((e) => e.msg.method === 'notifications/cancelled');
    assert.ok(cancel, 'the SDK sent notifications/cancelled');
    assert.equal(cancel.msg.params.requestId, call.id);
    // A ping sent after the cancel: once it is answered the server has seen the cancellation
    // (allow 300 ms for a notification already in flight on another HTTP stream).
    assert.deepEqual(await c.client.ping(), {});
    const cancelledAt = Date.now() + 100;
    // The fixture would have finished well within a second had it not been cancelled.
    await sleep(1500);
    const reply = c.tap.responseFor(call.id);
    assert.equal(reply, undefined, `cancelled request ${call.id} got a reply: ${JSON.stringify(reply)}`);
    const lateProgress = c.tap.log.filter((e) => e.dir === 'in' && e.t > cancelledAt + 200 &&
        e.msg.method === 'notifications/progress' && e.msg.params.progressToken === call.params._meta.progressToken);
    assert.deepEqual(lateProgress.map((e) => e.msg), [], 'no progress for the cancelled call afterwards');
    // Still serving: a new call on the same session works.
    const again = await c.client.callTool({ name: 'test_simple_text' }, undefined, CALL_TIMEOUT);
    assert.ok(firstText(again).length > 0);
    assert.deepEqual(await c.client.ping(), {});
    // Cancelling an id that is not in flight is harmless.
    await c.tap.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 987654, reason: 'x' } });
    assert.deepEqual(await c.client.ping(), {});
    await c.close();
});

test('logging: setLevel, notifications/message during a call, level filter', async () => {
    const c = await connect();
    const msgs = [];
    c.client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => { msgs.push(n.params); });
    assert.deepEqual(await c.client.setLoggingLevel('debug'), {});
    const res = await c.client.callTool({ name: 'test_tool_with_logging', arguments: {} }, undefined, CALL_TIMEOUT);
    assert.ok(res.content.length > 0);
    assert.ok(msgs.length >= 3, `>= 3 log messages by the time the call returns, got ${JSON.stringify(msgs)}`);
    for (const m of msgs) {
        assert.ok(['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency'].includes(m.level));
        assert.ok(m.data !== undefined, 'log message has data');
    }
    // Above the fixture's level ("info"), nothing from the tool may arrive.
    const before = msgs.length;
    assert.deepEqual(await c.client.setLoggingLevel('error'), {});
    await c.client.callTool({ name: 'test_tool_with_logging', arguments: {} }, undefined, CALL_TIMEOUT);
    await sleep(200);
    const filtered = msgs.slice(before).filter((m) => ['debug', 'info', 'notice', 'warning'].includes(m.level));
    assert.deepEqual(filtered, [], 'messages below the set level are not sent');
    await c.close();
});

test('resources: list, read text/binary/template, subscribe, not found', async () => {
    const c = await connect();
    const { resources } = await c.client.listResources();
    for (const r of resources) assert.ok(r.uri && r.name, `resource has uri and name: ${JSON.stringify(r)}`);
    for (const u of ['test://static-text', 'test://static-binary']) {
        assert.ok(resources.some((r) => r.uri === u), `${u} listed`);
    }
    const text = await c.client.readResource({ uri: 'test://static-text' });
    assert.equal(text.contents[0].uri, 'test://static-text');
    assert.ok(text.contents[0].mimeType && text.contents[0].text.length > 0);
    const bin = await c.client.readResource({ uri: 'test://static-binary' });
    assert.ok(Buffer.from(bin.contents[0].blob, 'base64').subarray(0, 4).equals(PNG_MAGIC), 'blob is a PNG');
    const { resourceTemplates } = await c.client.listResourceTemplates();
    assert.ok(resourceTemplates.some((t) => t.uriTemplate === 'test://template/{id}/data'), 'template listed');
    const tpl = await c.client.readResource({ uri: 'test://template/123/data' });
    assert.equal(tpl.contents[0].uri, 'test://template/123/data');
    assert.match(tpl.contents[0].text ?? '', /123/, 'template read uses the id');
    assert.deepEqual(await c.client.subscribeResource({ uri: 'test://watched-resource' }), {});
    assert.deepEqual(await c.client.unsubscribeResource({ uri: 'test://watched-resource' }), {});
    const e = await expectMcpError(c.client.readResource({ uri: 'test://no-such-resource' }), undefined,
        'reading an unknown resource');
    assert.ok([-32002, -32602].includes(e.code), `resource not found code -32002 (or -32602), got ${e.code}`);
    await c.close();
});

test('prompts/get and completion/complete', async () => {
    const c = await connect();
    const { prompts } = await c.client.listPrompts();
    for (const n of ['test_simple_prompt', 'test_prompt_with_arguments', 'test_prompt_with_embedded_resource',
        'test_prompt_with_image']) assert.ok(prompts.some((p) => p.name === n), `prompt ${n} listed`);
    for (const p of prompts) assert.ok(p.description, `prompt ${p.name} has a description`);
    const simple = await c.client.getPrompt({ name: 'test_simple_prompt' });
    assert.ok(simple.messages.length > 0 && simple.messages.every((m) => m.role && m.content));
    const withArgs = await c.client.getPrompt({ name: 'test_prompt_with_arguments',
        arguments: { arg1: 'alpha-value', arg2: 'beta-value' } });
    const j = JSON.stringify(withArgs.messages);
    assert.ok(j.includes('alpha-value') && j.includes('beta-value'), `arguments used: ${j}`);
    const emb = await c.client.getPrompt({ name: 'test_prompt_with_embedded_resource',
        arguments: { resourceUri: 'test://example-resource' } });
    assert.ok(emb.messages.some((m) => m.content.type === 'resource'));
    const img = await c.client.getPrompt({ name: 'test_prompt_with_image' });
    assert.ok(img.messages.some((m) => m.content.type === 'image' && m.content.data && m.content.mimeType));
    await expectMcpError(c.client.getPrompt({ name: 'test_prompt_with_arguments', arguments: { arg1: 'x' } }),
        -32602, 'prompt missing a required argument');
    await expectMcpError(c.client.getPrompt({ name: 'no_such_prompt' }), -32602, 'unknown prompt');
    const comp = await c.client.complete({ ref: { type: 'ref/prompt', name: 'test_prompt_with_arguments' },
        argument: { name: 'arg1', value: 'test' } });
    assert.ok(Array.isArray(comp.completion.values), `completion.values is an array: ${JSON.stringify(comp)}`);
    await c.close();
});

test('sampling and elicitation: server-to-client requests during a call', async () => {
    const c = await connect();
    const sampled = [];
    c.client.setRequestHandler(CreateMessageRequestSchema, (req) => {
        sampled.push(req.params);
        return { model: 'e2e-model', role: 'assistant', content: { type: 'text', text: 'sampled-reply-42' } };
    });
    const s = await c.client.callTool({ name: 'test_sampling', arguments: { prompt: 'hello from e2e' } },
        undefined, CALL_TIMEOUT);
    assert.equal(sampled.length, 1, 'one sampling/createMessage request reached the client');
    assert.equal(sampled[0].messages[0].content.text, 'hello from e2e', 'the prompt is passed on');
    assert.ok(Number.isInteger(sampled[0].maxTokens), 'maxTokens is an integer');
    assert.match(firstText(s), /sampled-reply-42/, `the client's reply reaches the result: ${JSON.stringify(s)}`);

    const asked = [];
    c.client.setRequestHandler(ElicitRequestSchema, (req) => {
        asked.push(req.params);
        return { action: 'accept', content: { username: 'alice-e2e', email: 'alice@example.com' } };
    });
    const el = await c.client.callTool({ name: 'test_elicitation', arguments: { message: 'who are you?' } },
        undefined, CALL_TIMEOUT);
    assert.equal(asked.length, 1);
    assert.equal(asked[0].message, 'who are you?');
    assert.equal(asked[0].requestedSchema.type, 'object');
    assert.match(firstText(el), /accept/, `elicitation action in result: ${JSON.stringify(el)}`);
    assert.match(firstText(el), /alice-e2e/, 'elicitation content in result');

    // A client that declines, then one whose handler fails: the call still completes.
    c.client.setRequestHandler(ElicitRequestSchema, () => ({ action: 'decline' }));
    const dec = await c.client.callTool({ name: 'test_elicitation', arguments: { message: 'again' } },
        undefined, CALL_TIMEOUT);
    assert.match(firstText(dec), /decline/);
    c.client.setRequestHandler(CreateMessageRequestSchema, () => { throw new Error('no model here'); });
    const failed = await c.client.callTool({ name: 'test_sampling', arguments: { prompt: 'x' } },
        undefined, CALL_TIMEOUT).catch((e) => e);
    assert.ok(failed instanceof McpError || failed.isError === true,
        `a failed sampling request ends the call with an error: ${JSON.stringify(failed)}`);
    assert.deepEqual(await c.client.ping(), {});
    await c.close();
});

test('two clients at the same time each get their own progress and results', async () => {
    const [a, b] = await Promise.all([connect({ name: 'a' }), connect({ name: 'b' })]);
    if (MODE === 'http') assert.notEqual(a.tap.sessionId, b.tap.sessionId, 'distinct sessions');
    const pa = [];
    const pb = [];
    const [ra, rb] = await Promise.all([
        a.client.callTool({ name: 'test_tool_with_progress', arguments: {} }, undefined,
            { ...CALL_TIMEOUT, onprogress: (p) => pa.push(p) }),
        b.client.callTool({ name: 'test_tool_with_progress', arguments: {} }, undefined,
            { ...CALL_TIMEOUT, onprogress: (p) => pb.push(p) }),
    ]);
    assert.ok(ra.content.length > 0 && rb.content.length > 0);
    assert.ok(pa.length >= 3 && pb.length >= 3, `each got its progress: ${pa.length}, ${pb.length}`);
    const extra = (c) => c.tap.incoming().filter((m) => m.method === 'notifications/progress').length;
    assert.equal(extra(a), pa.length, 'client a saw only its own progress');
    assert.equal(extra(b), pb.length, 'client b saw only its own progress');
    // One client leaving does not disturb the other.
    await a.close();
    assert.ok(firstText(await b.client.callTool({ name: 'test_simple_text' })).length > 0);
    await b.close();
});

test('bad input through the raw transport: -32601, -32602, ids echoed', async () => {
    const c = await connect();
    const t = c.tap;
    const unknown = await t.rawRequest({ jsonrpc: '2.0', id: 'str-id-1', method: 'no/such/method', params: {} });
    assert.equal(unknown.error?.code, -32601, `unknown method: ${JSON.stringify(unknown)}`);
    assert.equal(unknown.id, 'str-id-1', 'string id echoed exactly');
    const cases = [
        ['tools/call name is a number', { method: 'tools/call', params: { name: 42, arguments: {} } }],
        ['tools/call arguments is a string', { method: 'tools/call', params: { name: 'test_simple_text', arguments: 'x' } }],
        ['tools/call params is an array', { method: 'tools/call', params: [1, 2] }],
        ['resources/read uri is a number', { method: 'resources/read', params: { uri: 5 } }],
        ['prompts/get name is an object', { method: 'prompts/get', params: { name: {} } }],
        ['logging/setLevel unknown level', { method: 'logging/setLevel', params: { level: 'loud' } }],
        ['completion/complete without ref', { method: 'completion/complete', params: { argument: { name: 'a', value: 'b' } } }],
    ];
    let id = 5000;
    for (const [what, m] of cases) {
        const r = await t.rawRequest({ jsonrpc: '2.0', id: ++id, ...m });
        assert.equal(r.error?.code, -32602, `${what}: ${JSON.stringify(r)}`);
        assert.equal(r.id, id, 'integer id echoed');
        assert.ok(typeof r.error.message === 'string' && r.error.message.length > 0);
    }
    // A notification with an unknown method gets no reply and breaks nothing.
    await t.send({ jsonrpc: '2.0', method: 'notifications/no_such_thing', params: {} });
    assert.deepEqual(await c.client.ping(), {});
    assert.ok(firstText(await c.client.callTool({ name: 'test_simple_text' })).length > 0, 'still serving');
    await c.close();
});

test('limit: pending server-to-client requests per session', async () => {
    const max = limit('MCP_MAX_PENDING_CLIENT_REQUESTS');
    const c = await connect();
    const held = [];
    c.client.setRequestHandler(CreateMessageRequestSchema, () => new Promise((resolve) => held.push(resolve)));
    const over = 2;
    const settled = [];
    const calls = Array.from({ length: max + over }, (_, i) =>
        c.client.callTool({ name: 'test_sampling', arguments: { prompt: `p${i}` } }, undefined, { timeout: 30000 })
            .then((r) => { settled.push(r); return r; }, (e) => { settled.push(e); return e; }));
    await waitFor(() => held.length >= max && settled.length >= over, 15000,
        `${max} held sampling requests and ${over} refused calls (held ${held.length}, settled ${settled.length})`);
    await sleep(200);
    assert.equal(held.length, max, `no more than ${max} sampling requests reach the client at once`);
    assert.equal(settled.length, over, 'the calls over the limit end at once');
    for (const r of settled) {
        assert.ok(r instanceof McpError || r.isError === true, `over the limit: an error, got ${JSON.stringify(r)}`);
    }
    // The session still serves while the limit is reached, and every held call completes on reply.
    assert.ok(firstText(await c.client.callTool({ name: 'test_simple_text' })).length > 0);
    for (const resolve of held) resolve({ model: 'm', role: 'assistant', content: { type: 'text', text: 'released' } });
    const results = await Promise.all(calls);
    const ok = results.filter((r) => !(r instanceof Error) && !r.isError && /released/.test(firstText(r)));
    assert.equal(ok.length, max, 'the held calls complete with the client\'s replies');
    await c.close();
});

if (MODE === 'stdio') {
    test('limit: requests in flight per session', async () => {
        const max = limit('MCP_MAX_INFLIGHT_PER_SESSION');
        const c = await connect();
        const over = 4;
        const ids = Array.from({ length: max + over }, (_, i) => `inflight-${i}`);
        // test_tool_with_logging takes ~150 ms, so all of these are in flight together.
        for (const id of ids) {
            c.tap.send({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'test_tool_with_logging', arguments: {} } });
        }
        const replies = await waitFor(() => {
            const r = ids.map((id) => c.tap.responseFor(id));
            return r.every(Boolean) && r;
        }, 20000, 'a reply to every request');
        const errors = replies.filter((r) => r.error);
        assert.ok(errors.length >= 1 && errors.length <= over, `${errors.length} refused (limit ${max}, sent ${ids.length})`);
        for (const e of errors) {
            assert.equal(e.error.code, -32000, `limit error: ${JSON.stringify(e)}`);
            assert.match(e.error.message, /limit|too many/i);
        }
        assert.equal(replies.filter((r) => r.result).length, ids.length - errors.length);
        assert.deepEqual(await c.client.ping(), {});
        await c.close();
    });
}

if (MODE === 'http') {
    const INIT = { jsonrpc: '2.0', id: 1, method: 'initialize',
        params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } };
    const post = (body, headers = {}) => fetch(http.url, { method: 'POST', body: JSON.stringify(body),
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers } });

    test('http: session and header errors', async () => {
        const noSession = await post({ jsonrpc: '2.0', id: 2, method: 'tools/list' });
        assert.equal(noSession.status, 400, 'request without Mcp-Session-Id before initialize -> 400');
        const unknown = await post({ jsonrpc: '2.0', id: 3, method: 'tools/list' },
            { 'mcp-session-id': 'no-such-session-0123456789', 'mcp-protocol-version': '2025-11-25' });
        assert.equal(unknown.status, 404, 'unknown session -> 404');
        const init = await post(INIT);
        assert.equal(init.status, 200);
        const sid = init.headers.get('mcp-session-id');
        assert.ok(sid, 'initialize answer carries Mcp-Session-Id');
        await init.text();
        const hdr = { 'mcp-session-id': sid, 'mcp-protocol-version': '2025-11-25' };
        const note = await post({ jsonrpc: '2.0', method: 'notifications/initialized' }, hdr);
        assert.equal(note.status, 202, 'notification -> 202');
        const badVer = await post({ jsonrpc: '2.0', id: 4, method: 'ping' }, { ...hdr, 'mcp-protocol-version': '1999-01-01' });
        assert.equal(badVer.status, 400, 'unsupported MCP-Protocol-Version -> 400');
        const evil = await post(INIT, { origin: 'http://evil.example.com' });
        assert.equal(evil.status, 403, 'foreign Origin -> 403');
        const del = await fetch(http.url, { method: 'DELETE', headers: hdr });
        assert.ok(del.status === 200 || del.status === 204, `DELETE ends the session (${del.status})`);
        const gone = await post({ jsonrpc: '2.0', id: 5, method: 'ping' }, hdr);
        assert.equal(gone.status, 404, 'request on a deleted session -> 404');
    });
}
