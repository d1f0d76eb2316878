// The benchmark's peer: a TypeScript SDK (1.32.2) MCP server exposing the same trivial tool as
// mcpbox --conformance-fixtures: test_simple_text, with the very tool definition mcpbox embeds
// (tests/fixtures/schemas/fixtures/test_simple_text.json) and the same reply text.
//   node peer_server.mjs --stdio
//   node peer_server.mjs --http [--port 0] [--sse]
// HTTP: one stateful StreamableHTTPServerTransport per session on plain node:http. Replies are
// JSON unless --sse (JSON replies are the SDK's faster mode, so the comparison favours the peer).
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { sdkImport } from '../../e2e/sdk/lib.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const TOOL = JSON.parse(fs.readFileSync(path.resolve(here, '../../../tests/fixtures/schemas/fixtures/test_simple_text.json'), 'utf8'));
const REPLY_TEXT = 'This is a simple text response for testing.';

const { Server } = await sdkImport('server/index.js');
const { StdioServerTransport } = await sdkImport('server/stdio.js');
const { StreamableHTTPServerTransport } = await sdkImport('server/streamableHttp.js');
const { CallToolRequestSchema, ListToolsRequestSchema, McpError, ErrorCode } = await sdkImport('types.js');

function newServer() {
    const server = new Server({ name: 'sdk-peer', version: '1.0.0' }, { capabilities: { tools: {} } });
    server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: [TOOL] }));
    server.setRequestHandler(CallToolRequestSchema, (req) => {
        if (req.params.name !== TOOL.name) throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${req.params.name}`);
        return { content: [{ type: 'text', text: REPLY_TEXT }] };
    });
    return server;
}

function readJson(req) {
    return new Promise((resolve, reject) => {
        const chunks = [];
        req.on('data', (c) => chunks.push(c));
        req.on('end', () => {
            try { resolve(JSON.parse(Buffer.concat(chunks).toString('utf8'))); } catch (e) { reject(e); }
        });
        req.on('error', reject);
    });
}

function serveHttp(port, sse) {
    const sessions = new Map();
    const fail = (res, status, msg) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message: msg }, id: null }));
    };
    const srv = http.createServer(async (req, res) => {
        try {
            const body = req.method === 'POST' ? await readJson(req) : undefined;
            const sid = req.headers['mcp-session-id'];
            let t = sid ? sessions.get(sid) : undefined;
            if (sid && !t) return fail(res, 404, 'Session not found');
            if (!t) {
                if (body?.method !== 'initialize') return fail(res, 400, 'Mcp-Session-Id required');
                t = new StreamableHTTPServerTransport({ sessionIdGenerator: () => randomUUID(),
                    enableJsonResponse: !sse, onsessioninitialized: (id) => sessions.set(id, t) });
                t.onclose = () => { if (t.sessionId) sessions.delete(t.sessionId); };
                await newServer().connect(t);
            }
            await t.handleRequest(req, res, body);
        } catch (e) {
            if (!res.headersSent) fail(res, 400, e.message); else res.end();
        }
    });
    srv.keepAliveTimeout = 60000;
    srv.listen(port, '127.0.0.1', () => {
        console.error(`sdk-peer listening on http://127.0.0.1:${srv.address().port}/mcp`);
    });
}

const argv = process.argv.slice(2);
if (argv.includes('--http')) {
    const i = argv.indexOf('--port');
    serveHttp(i >= 0 ? Number(argv[i + 1]) : 0, argv.includes('--sse'));
} else {
    await newServer().connect(new StdioServerTransport());
}
