// mcpbox's tools through the agent frameworks people use, offline (issue 21; docs/clients.md).
//
//   node frameworks_compat.mjs --mcpbox BIN [--only NAME] [--strict-ready]
//
// Each framework connects to `mcpbox serve` over stdio with its own MCP client, converts the tools
// for every model provider it supports, and sends a request through that provider's real client
// code; a custom fetch captures the request instead of sending it (no model is called, nothing
// leaves the machine). The captured tool definitions are checked against each provider's schema
// rules, and create_sandbox, run_command and destroy_sandbox run through the framework's own
// tool-execution path. Gemini CLI and Codex CLI list the server with a temporary HOME, no login;
// Gemini CLI also runs create, run and destroy against a stand-in Gemini API on loopback.
//
// --strict-ready measures the alternative that docs/clients.md decided against: the schemas made
// "strict-ready" (every property required, optional ones nullable) and fed to the same converters.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const args = Object.fromEntries(process.argv.slice(2).reduce((acc, a, i, all) => {
    if (a.startsWith('--')) acc.push([a.slice(2), all[i + 1] && !all[i + 1].startsWith('--') ? all[i + 1] : true]);
    return acc;
}, []));
const bin = path.resolve(args.mcpbox || 'build/mcpbox');
const here = path.dirname(new URL(import.meta.url).pathname);
const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mcpbox-clients-'));
const serverArgs = ['serve', '--state-dir', stateDir];
let failures = 0, n = 0;
const versions = {};

function report(ok, name, detail = '') {
    n++;
    if (!ok) failures++;
    console.log(`${ok ? "ok" : "not ok"} ${n} - ${name}${detail && !ok ? `\n# ${String(detail).split("\n").join("\n# ")}` : ""}`);
}

function version(pkg) {
    const p = path.join(here, 'node_modules', pkg, 'package.json');
    return versions[pkg] = JSON.parse(fs.readFileSync(p, 'utf8')).version;
}

// ---- what each provider accepts (their documented rules, and the errors issue 21 saw) ----------

const GEMINI_OPENAPI_KEYS = new Set(['type', 'format', 'title', 'description', 'nullable', 'enum',
    'maxItems', 'minItems', 'properties', 'required', 'minProperties', 'maxProperties', 'minLength',
    'maxLength', 'pattern', 'example', 'anyOf', 'propertyOrdering', 'default', 'items', 'minimum',
    'maximum']);
const GEMINI_TYPES = new Set(['string', 'number', 'integer', 'boolean', 'array', 'object']);

/* Gemini's `parameters` (an OpenAPI 3.0 Schema object): one type per node from its Type enum, only
 * its own field names, and no OBJECT without properties ("should be non-empty for OBJECT type"). */
function geminiOpenApiProblems(s, where, root = true) {
    const out = [];
    if (root && s === undefined) return out; // a function without parameters
    if (typeof s !== 'object' || s === null) return [`${where}: not a schema`];
    for (const k of Object.keys(s)) if (!GEMINI_OPENAPI_KEYS.has(k)) out.push(`${where}: unknown field ${k}`);
    if (typeof s.type !== 'string' || !GEMINI_TYPES.has(s.type.toLowerCase()))
        out.push(`${where}: type ${JSON.stringify(s.type)} is not a valid Type`);
    if (String(s.type).toLowerCase() === 'object') {
        const props = s.properties || {};
        if (!root && Object.keys(props).length === 0) out.push(`${where}: should be non-empty for OBJECT type`);
        for (const [k, v] of Object.entries(props)) out.push(...geminiOpenApiProblems(v, `${where}.${k}`, false));
        for (const r of s.required || []) if (!(r in props)) out.push(`${where}: required ${r} is not a property`);
    }
    if (String(s.type).toLowerCase() === 'array') {
        if (!s.items) out.push(`${where}: array without items`);
        else out.push(...geminiOpenApiProblems(s.items, `${where}[]`, false));
    }
    return out;
}

/* Gemini's `parametersJsonSchema` (what the AI SDK sends): JSON Schema, but objects must still
 * be closed or have properties, and a root that is not an object is refused. */
function geminiJsonSchemaProblems(s, where) {
    const out = [];
    if (s.type !== 'object') out.push(`${where}: root must be an object`);
    const walk = (x, w) => {
        if (typeof x !== 'object' || x === null) return;
        if (typeof x.additionalProperties === 'object') out.push(`${w}: open map`);
        for (const [k, v] of Object.entries(x.properties || {})) walk(v, `${w}.${k}`);
        if (x.items) walk(x.items, `${w}[]`);
    };
    walk(s, where);
    return out;
}

/* OpenAI function parameters. Strict (structured outputs): every object closed
 * (additionalProperties: false) with every property required, no open maps. */
function openaiProblems(s, where, strict) {
    const out = [];
    if (typeof s !== 'object' || s === null || s.type !== 'object') return [`${where}: parameters must be an object schema`];
    if (!strict) return out;
    const walk = (x, w) => {
        if (typeof x !== 'object' || x === null) return;
        const types = [].concat(x.type || []);
        if (types.includes('object')) {
            if (x.additionalProperties !== false) out.push(`${w}: additionalProperties must be false`);
            const props = Object.keys(x.properties || {});
            const req = new Set(x.required || []);
            for (const p of props) if (!req.has(p)) out.push(`${w}: "${p}" must be required`);
        }
        for (const [k, v] of Object.entries(x.properties || {})) walk(v, `${w}.${k}`);
        if (x.items) walk(x.items, `${w}[]`);
        for (const b of x.anyOf || []) walk(b, w);
    };
    walk(s, where);
    return out;
}

function anthropicProblems(s, where) {
    return s && s.type === 'object' ? [] : [`${where}: input_schema must be an object schema`];
}

// ---- capturing what would be sent ----------------------------------------------------------

const captured = [];
async function captureFetch(url, init = {}) {
    let body = init.body;
    if (url instanceof Request) { body = await url.text(); url = url.url; }
    captured.push({ url: String(url), body: typeof body === 'string' ? JSON.parse(body) : body });
    return new Response(JSON.stringify({ error: { message: 'offline test: request captured', code: 400 } }),
                        { status: 400, headers: { 'content-type': 'application/json' } });
}
globalThis.fetch = captureFetch; // SDKs that take no fetch option use the global one
function takeCaptured() { return captured.splice(0, captured.length); }

/* Tool definitions out of one captured request body, whatever the provider's wire format. */
function toolsOf(req) {
    const b = req.body || {};
    if (req.url.includes('generativelanguage.googleapis.com')) {
        const decls = (b.tools || []).flatMap((t) => t.functionDeclarations || t.function_declarations || []);
        return decls.map((d) => ({ name: d.name, schema: d.parametersJsonSchema ?? d.parameters,
                                   format: d.parametersJsonSchema ? 'gemini-json' : 'gemini-openapi' }));
    }
    if (req.url.includes('anthropic.com'))
        return (b.tools || []).map((t) => ({ name: t.name, schema: t.input_schema, format: 'anthropic' }));
    return (b.tools || []).map((t) => {
        const f = t.function || t;
        return { name: f.name, schema: f.parameters, format: 'openai', strict: f.strict === true };
    });
}

/* Checks one captured request: every listed tool present and acceptable to its provider. */
function checkRequest(label, reqs, expectNames, { strict = false } = {}) {
    if (reqs.length === 0) return report(false, `${label}: no request captured`);
    const tools = toolsOf(reqs[reqs.length - 1]);
    const names = tools.map((t) => t.name.replace(/^mcpbox_/, ''));
    const missing = expectNames.filter((x) => !names.includes(x));
    const problems = [];
    for (const t of tools) {
        if (t.format === 'gemini-openapi') problems.push(...geminiOpenApiProblems(t.schema, t.name));
        else if (t.format === 'gemini-json') problems.push(...geminiJsonSchemaProblems(t.schema, t.name));
        else if (t.format === 'anthropic') problems.push(...anthropicProblems(t.schema, t.name));
        else problems.push(...openaiProblems(t.schema, t.name, strict || t.strict));
        if (strict && t.format === 'openai' && !t.strict) problems.push(`${t.name}: not sent as strict`);
    }
    report(missing.length === 0 && problems.length === 0,
           `${label}: ${tools.length} tools converted (${tools[0]?.format}${strict ? ', strict' : ''})`,
           [missing.length ? `missing: ${missing.join(', ')}` : '', ...problems.slice(0, 12)].filter(Boolean).join('\n'));
    return { tools, problems };
}

/* create_sandbox, run_command, destroy_sandbox through one framework's execute function. exec
 * takes (toolName, args) and returns the tool's result as the framework hands it to the model. */
async function lifecycle(label, exec, { raw = false } = {}) {
    const text = (r) => (typeof r === 'string' ? r : JSON.stringify(r));
    // raw: the framework passes arguments through unchecked, so send what models and clients
    // really add: null for a left-out argument, Gemini CLI's wait_for_previous
    const quirks = raw ? { network: null, wait_for_previous: true } : {};
    try {
        const created = text(await exec('create_sandbox', { env: ['GREETING=hello'], ...quirks }));
        const id = (created.match(/sbx-[0-9a-f]{16}/) || [])[0];
        if (!id) return report(false, `${label}: create, run, destroy`, `create_sandbox gave ${created.slice(0, 300)}`);
        const ran = text(await exec('run_command', { sandbox_id: id, command: 'echo $GREETING from $(pwd)', ...(raw ? { cwd: null } : {}) }));
        const gone = text(await exec('destroy_sandbox', { sandbox_id: id }));
        report(ran.includes('hello from /workspace') && /destroyed/.test(gone), `${label}: create, run, destroy`,
               `${ran.slice(0, 200)} / ${gone.slice(0, 200)}`);
    } catch (e) {
        report(false, `${label}: create, run, destroy`, e.stack || e);
    }
}

// ---- the frameworks ---------------------------------------------------------------------------

let listedNames = [];

async function vercelAiSdk() {
    const { createMCPClient } = await import('@ai-sdk/mcp');
    const { StdioMCPTransport } = await import('@ai-sdk/mcp/mcp-stdio');
    const { generateText } = await import('ai');
    const { createOpenAI } = await import('@ai-sdk/openai');
    const { createAnthropic } = await import('@ai-sdk/anthropic');
    const { createGoogleGenerativeAI } = await import('@ai-sdk/google');
    const v = `ai ${version('ai')}, @ai-sdk/mcp ${version('@ai-sdk/mcp')}`;
    version('@ai-sdk/openai'); version('@ai-sdk/anthropic'); version('@ai-sdk/google');
    const client = await createMCPClient({ transport: new StdioMCPTransport({ command: bin, args: serverArgs, stderr: 'ignore' }) });
    try {
        const tools = await client.tools();
        listedNames = Object.keys(tools);
        const openai = createOpenAI({ apiKey: 'offline', fetch: captureFetch });
        const models = [['OpenAI Responses', openai('gpt-5')], ['OpenAI Chat', openai.chat('gpt-4.1')],
            ['Anthropic', createAnthropic({ apiKey: 'offline', fetch: captureFetch })('claude-sonnet-4-5')],
            ['Google', createGoogleGenerativeAI({ apiKey: 'offline', fetch: captureFetch })('gemini-2.5-flash')]];
        for (const [name, model] of models) {
            takeCaptured();
            try { await generateText({ model, tools, prompt: 'list my sandboxes', maxRetries: 0 }); } catch { /* captured */ }
            checkRequest(`AI SDK (${v}) → ${name}`, takeCaptured(), listedNames);
        }
        await lifecycle(`AI SDK (${v})`, (t, a) => tools[t].execute(a, { toolCallId: `c-${t}`, messages: [] }), { raw: true });
    } finally {
        await client.close();
    }
}

async function openaiAgents() {
    const agents = await import('@openai/agents');
    const { default: OpenAI } = await import('openai');
    const v = `@openai/agents ${version('@openai/agents')}`;
    agents.setDefaultOpenAIClient(new OpenAI({ apiKey: 'offline', fetch: captureFetch, maxRetries: 0 }));
    agents.setTracingDisabled(true);
    const server = new agents.MCPServerStdio({ name: 'mcpbox', command: bin, args: serverArgs });
    await server.connect();
    try {
        for (const strict of [false, true]) {
            const warnings = [];
            const origWarn = console.warn, origErr = console.error;
            console.warn = (...a) => warnings.push(a.join(' '));
            console.error = (...a) => warnings.push(a.join(' '));
            let tools;
            try {
                tools = await agents.getAllMcpTools({ mcpServers: [server], convertSchemasToStrict: strict });
            } finally { console.warn = origWarn; console.error = origErr; }
            const agent = new agents.Agent({ name: 'a', instructions: 'x', tools, model: 'gpt-5' });
            takeCaptured();
            try { await agents.run(agent, 'list my sandboxes'); } catch { /* captured */ }
            const r = checkRequest(`OpenAI Agents SDK (${v}) → OpenAI Responses${strict ? ' convertSchemasToStrict' : ''}`,
                                   takeCaptured(), listedNames, { strict });
            const conv = warnings.filter((w) => /strict/i.test(w));
            report(conv.length === 0, `OpenAI Agents SDK: no strict-conversion warnings${strict ? ' (strict)' : ''}`, conv.slice(0, 5).join('\n'));
            if (strict) {
                const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
                await lifecycle(`OpenAI Agents SDK (${v}, strict)`, async (t, a) => {
                    // what a strict model sends: every property present, null for those left out
                    const full = { ...Object.fromEntries(Object.keys(byName[t].parameters.properties).map((k) => [k, null])), ...a };
                    return byName[t].invoke(new agents.RunContext({}), JSON.stringify(full));
                });
            }
            void r;
        }
    } finally {
        await server.close();
    }
}

async function langchain() {
    const { MultiServerMCPClient } = await import('@langchain/mcp-adapters');
    const { ChatOpenAI } = await import('@langchain/openai');
    const { ChatGoogleGenerativeAI } = await import('@langchain/google-genai');
    const v = `@langchain/mcp-adapters ${version('@langchain/mcp-adapters')}`;
    version('@langchain/openai'); version('@langchain/google-genai'); version('@langchain/core');
    const client = new MultiServerMCPClient({ mcpServers: { mcpbox: { transport: 'stdio', command: bin, args: serverArgs, stderr: 'ignore' } },
                                              throwOnLoadError: true, useStandardContentBlocks: false });
    try {
        const tools = await client.getTools();
        for (const [name, model, opts] of [
            ['OpenAI', new ChatOpenAI({ model: 'gpt-4.1', apiKey: 'offline', maxRetries: 0, configuration: { fetch: captureFetch } }), {}],
            ['OpenAI strict', new ChatOpenAI({ model: 'gpt-4.1', apiKey: 'offline', maxRetries: 0, configuration: { fetch: captureFetch } }), { strict: true }],
            ['Google', new ChatGoogleGenerativeAI({ model: 'gemini-2.5-flash', apiKey: 'offline', maxRetries: 0 }), {}]]) {
            takeCaptured();
            try { await model.bindTools(tools, opts).invoke('list my sandboxes'); } catch (e) { if (!captured.length) console.log(`# ${name}: ${e.message}`); }
            const strict = opts.strict === true;
            const reqs = takeCaptured();
            if (strict) {
                // sent as they are with strict: true: mcpbox's optional properties break OpenAI's rule
                // that every property is required (docs/clients.md: the known limitation)
                const r = toolsOf(reqs[reqs.length - 1] || { url: '', body: {} });
                const bad = r.filter((t) => openaiProblems(t.schema, t.name, true).length);
                report(r.length === listedNames.length, `LangChain (${v}) → OpenAI strict: ${r.length} tools sent; ${bad.length} not strict-ready as served (optional properties; documented limitation)`);
            } else {
                checkRequest(`LangChain (${v}) → ${name}`, reqs, listedNames);
            }
        }
        const byName = Object.fromEntries(tools.map((t) => [t.name.replace(/^mcpbox__/, ''), t]));
        await lifecycle(`LangChain (${v})`, (t, a) => byName[t].invoke(a));
    } finally {
        await client.close();
    }
}

async function mastra() {
    const { MCPClient } = await import('@mastra/mcp');
    const { Agent } = await import('@mastra/core/agent');
    const { createOpenAI } = await import('@ai-sdk/openai');
    const { createAnthropic } = await import('@ai-sdk/anthropic');
    const { createGoogleGenerativeAI } = await import('@ai-sdk/google');
    const v = `@mastra/mcp ${version('@mastra/mcp')}, @mastra/core ${version('@mastra/core')}`;
    const mcp = new MCPClient({ id: `compat-${process.pid}`, servers: { mcpbox: { command: bin, args: serverArgs } } });
    try {
        const tools = await mcp.listTools();
        for (const [name, model] of [['OpenAI', createOpenAI({ apiKey: 'offline', fetch: captureFetch })('gpt-5')],
            ['Anthropic', createAnthropic({ apiKey: 'offline', fetch: captureFetch })('claude-sonnet-4-5')],
            ['Google', createGoogleGenerativeAI({ apiKey: 'offline', fetch: captureFetch })('gemini-2.5-flash')]]) {
            const agent = new Agent({ id: `a-${name}`, name: `a-${name}`, instructions: 'x', model, tools });
            takeCaptured();
            try { await agent.generate('list my sandboxes', { maxRetries: 0 }); } catch (e) { if (!captured.length) console.log(`# ${name}: ${e.message}`); }
            const r = checkRequest(`Mastra (${v}) → ${name}`, takeCaptured(), listedNames);
            // Mastra rewrites schemas per provider: env must still be a list of strings the model can fill
            const env = r?.tools?.find((t) => /create_sandbox$/.test(t.name))?.schema?.properties?.env;
            const list = [env, ...(env?.anyOf || [])].find((b) => b && /array/i.test(String(b.type)));
            report(list && /string/i.test(String(list.items?.type)),
                   `Mastra → ${name}: create_sandbox env survives as a list of strings`, JSON.stringify(env));
        }
        const byName = Object.fromEntries(Object.entries(tools).map(([k, t]) => [k.replace(/^mcpbox_/, ''), t]));
        await lifecycle(`Mastra (${v})`, (t, a) => byName[t].execute(a, {}));
    } finally {
        await mcp.disconnect();
    }
}

function cli(label, cmd, argv, env, expect) {
    const r = spawnSync(cmd, argv, { env, encoding: 'utf8', timeout: 120000 });
    const out = `${r.stdout || ''}${r.stderr || ''}`;
    report(r.status === 0 && expect.test(out) && !/warn.*(type|schema)|invalid.*schema/i.test(out), label,
           `exit ${r.status}${r.error ? ` (${r.error.message})` : ''}: ${out.trim().slice(-600)}`);
}

/* A stand-in for the Gemini API on loopback: answers Gemini CLI's model requests with the function
 * calls a model would make (create, run, destroy, each with the wait_for_previous the CLI adds),
 * so the CLI's own tool-execution path runs them against mcpbox; keeps every request it got. */
async function fakeGemini() {
    const http = await import('node:http');
    const got = [];
    let step = 0, sid = null;
    const answer = (part) => ({ candidates: [{ content: { role: 'model', parts: [part] }, finishReason: 'STOP', index: 0 }],
                                usageMetadata: { promptTokenCount: 1, candidatesTokenCount: 1, totalTokenCount: 2 } });
    const server = http.createServer((req, res) => {
        let body = '';
        req.on('data', (d) => { body += d; });
        req.on('end', () => {
            got.push({ url: `https://generativelanguage.googleapis.com${req.url}`, body: JSON.parse(body || '{}') });
            if (!req.url.includes('streamGenerateContent')) { // the CLI's own routing questions
                res.writeHead(200, { 'content-type': 'application/json' });
                return res.end(JSON.stringify(answer({ text: '{"complexity_reasoning":"simple","complexity_score":1}' })));
            }
            sid = (JSON.stringify(got.at(-1).body.contents?.slice(-1)).match(/sbx-[0-9a-f]{16}/) || [sid])[0];
            const calls = [['mcp_mcpbox_create_sandbox', { env: ['GREETING=hello'], wait_for_previous: false }],
                ['mcp_mcpbox_run_command', { sandbox_id: sid, command: 'echo $GREETING from $(pwd)', wait_for_previous: true }],
                ['mcp_mcpbox_destroy_sandbox', { sandbox_id: sid, wait_for_previous: true }]];
            const part = step < calls.length ? { functionCall: { name: calls[step][0], args: calls[step][1] } } : { text: 'done' };
            step++;
            res.writeHead(200, { 'content-type': 'text/event-stream' });
            res.end(`data: ${JSON.stringify(answer(part))}\r\n\r\n`);
        });
    });
    await new Promise((r) => server.listen(0, '127.0.0.1', r));
    return { got, url: `http://127.0.0.1:${server.address().port}`, close: () => server.close() };
}

async function geminiCli() {
    const v = `@google/gemini-cli ${version('@google/gemini-cli')}`;
    const home = fs.mkdtempSync(path.join(os.tmpdir(), 'mcpbox-gemini-home-'));
    fs.mkdirSync(path.join(home, '.gemini'));
    fs.writeFileSync(path.join(home, '.gemini', 'settings.json'), JSON.stringify({
        mcpServers: { mcpbox: { command: bin, args: serverArgs, trust: true } }, telemetry: { enabled: false },
        privacy: { usageStatisticsEnabled: false }, security: { auth: { selectedType: 'gemini-api-key' } } }));
    const gemini = path.join(here, 'node_modules/@google/gemini-cli/bundle/gemini.js');
    const env = { PATH: process.env.PATH, HOME: home, GEMINI_CLI_TRUST_WORKSPACE: 'true', NO_COLOR: '1', CI: '1' };
    cli(`Gemini CLI (${v}): gemini mcp list connects`, process.execPath, [gemini, 'mcp', 'list'], env, /mcpbox.*Connected/i);
    const api = await fakeGemini();
    const { spawn } = await import('node:child_process');
    const p = spawn(process.execPath, [gemini, '-p', 'make a sandbox and greet', '--approval-mode', 'yolo'],
                    { env: { ...env, GEMINI_API_KEY: 'offline', GOOGLE_GEMINI_BASE_URL: api.url }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    p.stdout.on('data', (d) => { out += d; });
    p.stderr.on('data', (d) => { out += d; });
    const code = await new Promise((r) => { const t = setTimeout(() => { p.kill(); r('timeout'); }, 120000); p.on('exit', (c) => { clearTimeout(t); r(c); }); });
    api.close();
    const model = api.got.filter((r) => r.url.includes('streamGenerateContent'));
    const first = model[0] ? { url: model[0].url, body: model[0].body } : { url: '', body: {} };
    const ours = toolsOf(first).filter((t) => t.name.startsWith('mcp_mcpbox_'));
    const problems = ours.flatMap((t) => (t.format === 'gemini-json' ? geminiJsonSchemaProblems(t.schema, t.name) : geminiOpenApiProblems(t.schema, t.name)));
    report(ours.length === listedNames.length && problems.length === 0,
           `Gemini CLI (${v}) → Gemini API: ${ours.length} mcpbox tools converted (${ours[0]?.format})`, problems.slice(0, 8).join('\n'));
    const results = model.slice(1).map((r) => JSON.stringify(r.body.contents?.slice(-1)));
    report(code === 0 && /hello from \/workspace/.test(results[1] || '') && /destroyed\W+true/.test(results[2] || ''),
           `Gemini CLI (${v}): create, run, destroy with wait_for_previous`,
           `exit ${code}; ${results.map((x) => x.slice(0, 300)).join('\n')}\n${out.slice(-400)}`);
    const warned = out.split('\n').filter((l) => /strict mode|allowUnionTypes|schema/i.test(l));
    report(warned.length === 0, `Gemini CLI (${v}): no schema warnings`, warned.slice(0, 5).join('\n'));
    fs.rmSync(home, { recursive: true, force: true });
}

async function codexCli() {
    const v = `@openai/codex ${version('@openai/codex')}`;
    const home = fs.mkdtempSync(path.join(os.tmpdir(), 'mcpbox-codex-home-'));
    const env = { PATH: process.env.PATH, HOME: home, CODEX_HOME: path.join(home, '.codex'), NO_COLOR: '1' };
    fs.mkdirSync(env.CODEX_HOME);
    const codex = path.join(here, 'node_modules/@openai/codex/bin/codex.js');
    cli(`Codex CLI (${v}): codex mcp add`, process.execPath, [codex, 'mcp', 'add', 'mcpbox', '--', bin, ...serverArgs], env, /mcpbox/i);
    cli(`Codex CLI (${v}): codex mcp list`, process.execPath, [codex, 'mcp', 'list'], env, /mcpbox/);
    fs.rmSync(home, { recursive: true, force: true });
}

/* The decision docs/clients.md records: strict-ready schemas (every property required, optional
 * ones nullable) in each form JSON Schema offers, through LangChain's two conversions. Reports,
 * never fails: it measures the road not taken. */
async function strictReady() {
    const { ChatOpenAI } = await import('@langchain/openai');
    const { ChatGoogleGenerativeAI } = await import('@langchain/google-genai');
    const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
    const { StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js');
    const c = new Client({ name: 'strict-ready', version: '1' });
    await c.connect(new StdioClientTransport({ command: bin, args: serverArgs, stderr: 'ignore' }));
    const listed = (await c.listTools()).tools;
    await c.close();
    const forms = { 'type array': (p) => ({ ...p, type: [p.type, 'null'] }),
                    'anyOf null': (p) => ({ anyOf: [p, { type: 'null' }], description: p.description }),
                    'nullable (OpenAPI)': (p) => ({ ...p, nullable: true }) };
    for (const [form, mk] of Object.entries(forms)) {
        const tools = listed.map((t) => {
            const req = new Set(t.inputSchema.required || []);
            const props = Object.fromEntries(Object.entries(t.inputSchema.properties || {})
                .map(([k, p]) => [k, req.has(k) ? p : mk(p)]));
            return { type: 'function', function: { name: t.name, description: t.description, parameters:
                { type: 'object', properties: props, required: Object.keys(props), additionalProperties: false } } };
        });
        const google = new ChatGoogleGenerativeAI({ model: 'gemini-2.5-flash', apiKey: 'offline', maxRetries: 0 });
        takeCaptured();
        try { await google.bindTools(tools).invoke('hi'); } catch { /* captured */ }
        const sent = toolsOf(takeCaptured().pop() || { url: '', body: {} });
        const bad = sent.filter((t) => geminiOpenApiProblems(t.schema, t.name).length).length;
        // OpenAI's strict mode spells an optional value as null in the type (or an anyOf branch);
        // `nullable` is OpenAPI, not JSON Schema, so there the value could not be left out
        const openaiNote = form.startsWith('nullable') ? `OpenAI strict cannot leave those values out (${
            tools.filter((t) => JSON.stringify(t.function.parameters).includes('"nullable"')).length} tools)`
            : 'OpenAI strict takes this form';
        console.log(`# strict-ready as ${form}: Gemini via LangChain refuses ${bad} of ${sent.length} tools; ${openaiNote}`);
    }
}

const all = { 'ai-sdk': vercelAiSdk, 'openai-agents': openaiAgents, langchain, mastra, 'gemini-cli': geminiCli, 'codex-cli': codexCli };
if (args['strict-ready']) { await strictReady(); process.exit(0); }
for (const [name, fn] of Object.entries(all)) {
    if (args.only && args.only !== name) continue;
    if (!listedNames.length && name !== 'ai-sdk') {
        // the expected tool names, from the server itself, when ai-sdk was not run first
        const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
        const { StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js');
        const c = new Client({ name: 'names', version: '1' });
        await c.connect(new StdioClientTransport({ command: bin, args: serverArgs, stderr: 'ignore' }));
        listedNames = (await c.listTools()).tools.map((t) => t.name);
        await c.close();
    }
    try { await fn(); } catch (e) { report(false, `${name}`, e.stack || e); }
}
console.log(`# versions: ${JSON.stringify(versions)}`);
console.log(`1..${n}`);
fs.rmSync(stateDir, { recursive: true, force: true });
process.exit(failures ? 1 : 0);
