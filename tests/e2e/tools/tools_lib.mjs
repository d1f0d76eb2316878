// Helpers for the sandbox tools' end-to-end tests: connect the official SDK client over stdio or
// HTTP, call tools with explicit outputSchema validation, TAP output.
import { createRequire } from 'node:module';
import path from 'node:path';
import { NODE_MODULES, sdkImport, startHttpServer, tempStateDir } from '../sdk/lib.mjs';

export { parseArgs, requireBinary, sleep, startHttpServer, tempStateDir, SKIP } from '../sdk/lib.mjs';

const require = createRequire(path.resolve(NODE_MODULES, 'ajv', 'package.json'));
const Ajv2020 = require('ajv/dist/2020.js').default ?? require('ajv/dist/2020.js');

const { Client } = await sdkImport('client/index.js');
const { StdioClientTransport } = await sdkImport('client/stdio.js');
const { StreamableHTTPClientTransport } = await sdkImport('client/streamableHttp.js');
const types = await sdkImport('types.js');
export const { CallToolResultSchema } = types;

/* A connected client: {client, name, close(), tools: Map name -> Tool, validators}. */
export async function connect(kind, { bin, stateDir, url, name = kind, headers } = {}) {
    const client = new Client({ name: `tools-e2e-${name}`, version: '1.0.0' },
                              { capabilities: {} });
    let transport;
    if (kind === 'stdio') {
        transport = new StdioClientTransport({
            command: bin, args: ['serve', '--state-dir', stateDir, ...APPROVE_EGRESS], stderr: 'pipe',
            env: { ...process.env },
        });
        let err = '';
        transport.stderr?.on('data', (d) => { err += d; if (err.length > 65536) err = err.slice(-32768); });
        transport.stderrText = () => err;
    } else {
        transport = new StreamableHTTPClientTransport(new URL(url),
                                                      headers ? { requestInit: { headers } } : {});
    }
    await client.connect(transport);
    const listed = await client.listTools();
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    const tools = new Map();
    const validators = new Map();
    for (const t of listed.tools) {
        tools.set(t.name, t);
        if (t.outputSchema) validators.set(t.name, ajv.compile(t.outputSchema));
    }
    return {
        client, transport, name, tools, validators, listed,
        async close() { try { await client.close(); } catch { /* already gone */ } },
    };
}

/* These tests exercise network_policy itself; approvals (issue 38) are tests/e2e/approval's. */
export const APPROVE_EGRESS = ['--approve', 'egress=allow'];

/* An HTTP server on an ephemeral port sharing stateDir. */
export async function httpServer(bin, stateDir) {
    return startHttpServer(bin, APPROVE_EGRESS, { stateDir });
}

export class ToolError extends Error {}

/* Calls a tool; validates structuredContent against the tool's outputSchema explicitly (the SDK
 * client does too). Returns the CallToolResult. */
export async function call(conn, tool, args, opts = {}) {
    const res = await conn.client.callTool({ name: tool, arguments: args }, CallToolResultSchema,
                                           opts);
    if (!res.isError) {
        const v = conn.validators.get(tool);
        if (!res.structuredContent) throw new ToolError(`${tool}: no structuredContent`);
        if (v && !v(res.structuredContent))
            throw new ToolError(`${tool}: structuredContent does not match outputSchema: ` +
                                JSON.stringify(v.errors) + ' in ' +
                                JSON.stringify(res.structuredContent).slice(0, 400));
    }
    return res;
}

export const text = (res) => (res.content || []).filter((c) => c.type === 'text')
    .map((c) => c.text).join('\n');

/* Calls and expects success; returns structuredContent. */
export async function ok(conn, tool, args, opts) {
    const res = await call(conn, tool, args, opts);
    if (res.isError) throw new ToolError(`${tool} ${JSON.stringify(args).slice(0, 200)} failed: ${text(res)}`);
    return res.structuredContent;
}

/* Calls and expects an isError result (or a JSON-RPC error for malformed calls); returns the
 * message. pattern (RegExp) must match it. */
export async function fails(conn, tool, args, pattern) {
    let msg;
    try {
        const res = await call(conn, tool, args);
        if (!res.isError) throw new ToolError(`${tool} ${JSON.stringify(args).slice(0, 200)} succeeded but should fail: ${JSON.stringify(res.structuredContent).slice(0, 300)}`);
        msg = text(res);
    } catch (e) {
        if (e instanceof ToolError) throw e;
        msg = String(e.message || e);
    }
    if (pattern && !pattern.test(msg)) throw new ToolError(`${tool}: error "${msg}" does not match ${pattern}`);
    return msg;
}

export function check(cond, what) {
    if (!cond) throw new ToolError(`check failed: ${what}`);
}

/* Runs named async cases in order, TAP output; returns the number that failed. */
export async function runCases(cases) {
    let n = 0, failed = 0;
    for (const [name, fn] of cases) {
        n++;
        const t0 = Date.now();
        try {
            await fn();
            console.log(`ok ${n} - ${name} (${Date.now() - t0} ms)`);
        } catch (e) {
            failed++;
            console.log(`not ok ${n} - ${name}`);
            for (const line of String(e.stack || e).split('\n').slice(0, 8)) console.log(`# ${line}`);
        }
    }
    console.log(`1..${n}`);
    return failed;
}
