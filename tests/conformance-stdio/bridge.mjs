// Streamable HTTP in front, a stdio MCP server behind: lets the official conformance suite (HTTP
// only) exercise mcpbox's stdio transport.
//   node bridge.mjs [--port 0] [--idle-ms 30000] -- COMMAND ARGS...
// Each HTTP session gets its own stdio child. Messages pass through unchanged; what the child
// sends while handling a request (progress, log messages, sampling/elicitation requests) goes out
// on the SSE stream of the POST that carried that request. Stdio carries no such tag, so the
// originating request is found by progressToken, else the only (or latest) request in flight.
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { sdkImport } from '../e2e/sdk/lib.mjs';

const { StreamableHTTPServerTransport } = await sdkImport('server/streamableHttp.js');
const { StdioClientTransport } = await sdkImport('client/stdio.js');

const MAX_BODY_BYTES = 4 * 1024 * 1024;
const REAP_INTERVAL_MS = 5000;

function parseCli(argv) {
    const sep = argv.indexOf('--');
    if (sep < 0 || sep === argv.length - 1) {
        console.error('usage: bridge.mjs [--port N] [--idle-ms MS] -- COMMAND ARGS...');
        process.exit(2);
    }
    const opts = argv.slice(0, sep);
    const get = (k, d) => { const i = opts.indexOf(k); return i >= 0 ? Number(opts[i + 1]) : d; };
    return { port: get('--port', 0), idleMs: get('--idle-ms', 30000),
        command: argv[sep + 1], args: argv.slice(sep + 2) };
}

const cli = parseCli(process.argv.slice(2));
const sessions = new Map();     // Mcp-Session-Id -> BridgeSession
const log = (...a) => console.error('bridge:', ...a);

class BridgeSession {
    constructor() {
        this.inflight = new Map();   // client request id -> method, in arrival order
        this.tokens = new Map();     // progressToken -> client request id
        this.lastActive = Date.now();
        this.closed = false;
    }

    async open() {
        this.child = new StdioClientTransport({ command: cli.command, args: cli.args,
            env: process.env, stderr: 'inherit' });
        this.front = new StreamableHTTPServerTransport({
            sessionIdGenerator: () => randomUUID(),
            onsessioninitialized: (sid) => { this.sid = sid; sessions.set(sid, this); },
        });
        this.front.onmessage = (msg) => this.fromClient(msg);
        this.front.onclose = () => this.close();
        this.front.onerror = (e) => log('http side:', e.message);
        this.child.onmessage = (msg) => this.fromChild(msg);
        this.child.onclose = () => this.close();
        this.child.onerror = (e) => log('stdio side:', e.message);
        await this.child.start();
        await this.front.start();
    }

    fromClient(msg) {
        this.lastActive = Date.now();
        if (msg.method !== undefined && msg.id !== undefined) {
            this.inflight.set(msg.id, msg.method);
            const tok = msg.params?._meta?.progressToken;
            if (tok !== undefined) this.tokens.set(tok, msg.id);
        } else if (msg.method === 'notifications/cancelled') {
            this.forget(msg.params?.requestId);
        }
        this.child.send(msg).catch((e) => log('to child:', e.message));
    }

    fromChild(msg) {
        this.lastActive = Date.now();
        const isResponse = msg.method === undefined && msg.id !== undefined;
        let opts;
        if (isResponse) {
            this.forget(msg.id);
        } else {
            const related = this.relatedRequest(msg);
            if (related !== undefined) opts = { relatedRequestId: related };
        }
        this.front.send(msg, opts).catch((e) => log('to client:', e.message));
    }

    /* The client request a child notification or request belongs to, if any is in flight. */
    relatedRequest(msg) {
        if (msg.method === 'notifications/progress') {
            const id = this.tokens.get(msg.params?.progressToken);
            if (id !== undefined) return id;
        }
        const ids = [...this.inflight.keys()];
        if (ids.length <= 1) return ids[0];
        const calls = ids.filter((id) => this.inflight.get(id) === 'tools/call');
        return calls.length ? calls[calls.length - 1] : ids[ids.length - 1];
    }

    forget(id) {
        if (id === undefined) return;
        this.inflight.delete(id);
        for (const [tok, rid] of this.tokens) if (rid === id) this.tokens.delete(tok);
    }

    idleFor(now) { return this.inflight.size === 0 ? now - this.lastActive : 0; }

    async close() {
        if (this.closed) return;
        this.closed = true;
        if (this.sid) sessions.delete(this.sid);
        await Promise.allSettled([this.front?.close(), this.child?.close()]);
    }
}

function jsonError(res, status, code, message) {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }));
}

/* DNS-rebinding protection: Host and (when present) Origin must name this loopback listener. */
function originAllowed(req, port) {
    const hosts = [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`];
    if (!hosts.includes(req.headers.host ?? '')) return false;
    const origin = req.headers.origin;
    return origin === undefined || hosts.some((h) => origin === `http://${h}`);
}

function readBody(req) {
    return new Promise((resolve, reject) => {
        const chunks = [];
        let size = 0;
        req.on('data', (c) => {
            size += c.length;
            if (size > MAX_BODY_BYTES) { reject(new Error('body too large')); req.destroy(); return; }
            chunks.push(c);
        });
        req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
        req.on('error', reject);
    });
}

async function route(req, res, port) {
    if (new URL(req.url, 'http://x').pathname !== '/mcp') return jsonError(res, 404, -32000, 'Not found');
    if (!originAllowed(req, port)) return jsonError(res, 403, -32000, 'Forbidden: bad Host or Origin');
    let body;
    if (req.method === 'POST') {
        try { body = JSON.parse(await readBody(req)); } catch (e) {
            return jsonError(res, 400, -32700, `Parse error: ${e.message}`);
        }
    }
    const sid = req.headers['mcp-session-id'];
    if (sid !== undefined) {
        const s = sessions.get(sid);
        if (!s) return jsonError(res, 404, -32001, 'Session not found');
        s.lastActive = Date.now();
        return s.front.handleRequest(req, res, body);
    }
    if (req.method === 'POST' && body?.method === 'initialize') {
        const s = new BridgeSession();
        await s.open();
        await s.front.handleRequest(req, res, body);
        if (!s.sid) await s.close();    // initialize was refused: no session to keep
        return undefined;
    }
    return jsonError(res, 400, -32000, 'Bad Request: Mcp-Session-Id header is required');
}

const server = http.createServer((req, res) => {
    route(req, res, server.address().port).catch((e) => {
        log('request failed:', e.message);
        if (!res.headersSent) jsonError(res, 500, -32603, e.message);
        else res.end();
    });
});

// The conformance suite never sends DELETE: reap sessions nobody uses any more.
const reaper = setInterval(() => {
    const now = Date.now();
    for (const s of sessions.values()) if (s.idleFor(now) > cli.idleMs) s.close();
}, REAP_INTERVAL_MS);

async function shutdown() {
    clearInterval(reaper);
    server.close();
    await Promise.allSettled([...sessions.values()].map((s) => s.close()));
    process.exit(0);
}
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);

server.listen(cli.port, '127.0.0.1', () => {
    console.error(`bridge listening on http://127.0.0.1:${server.address().port}/mcp`);
});
