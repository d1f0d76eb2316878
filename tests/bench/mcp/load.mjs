// Load client for tools/call: the SDK Client, or a raw client (keep-alive node:http, or stdio
// lines) that is light enough not to be the bottleneck when the server is fast, or (HTTP) "net":
// HTTP/1.1 written and parsed by hand on net sockets, lighter still.
//   node load.mjs (--url URL | --stdio -- CMD ARGS...) [--client sdk|raw|net] [--tool NAME]
//                 [--args JSON] [-n N] [-c C] [--warmup W] [--json] [--latencies]
// Prints calls/s and latency percentiles; with --json one JSON object (--latencies adds every
// measured latency in ms, for merging runs of several processes). Exit 1 if any call failed.
import http from 'node:http';
import net from 'node:net';
import events from 'node:events';
import { spawn } from 'node:child_process';
import { sdkImport } from '../../e2e/sdk/lib.mjs';

const INIT_PARAMS = { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'mcpbox-bench', version: '1' } };

export function parseLoadArgs(argv) {
    const o = { client: 'sdk', tool: 'test_simple_text', args: undefined, n: 2000, c: 1, warmup: 200, json: false,
        latencies: false, url: null, cmd: null };
    const sep = argv.indexOf('--');
    if (sep >= 0) o.cmd = argv.slice(sep + 1);
    const a = sep >= 0 ? argv.slice(0, sep) : argv;
    for (let i = 0; i < a.length; i++) {
        const k = a[i];
        const v = () => a[++i];
        if (k === '--url') o.url = v();
        else if (k === '--client') o.client = v();
        else if (k === '--tool') o.tool = v();
        else if (k === '--args') o.args = JSON.parse(v());
        else if (k === '-n') o.n = Number(v());
        else if (k === '-c') o.c = Number(v());
        else if (k === '--warmup') o.warmup = Number(v());
        else if (k === '--json') o.json = true;
        else if (k === '--latencies') o.latencies = true;
        else if (k !== '--stdio') throw new Error(`unknown option ${k}`);
    }
    if (!o.url && !o.cmd) throw new Error('need --url URL or --stdio -- CMD ARGS');
    return o;
}

/* The JSON-RPC reply with id in a JSON or SSE body. */
function rawHttpReply(r, id) {
    if (r.status !== 200) throw new Error(`HTTP ${r.status}: ${r.text.slice(0, 200)}`);
    if ((r.headers['content-type'] || '').startsWith('text/event-stream')) {
        for (const ev of r.text.split(/\n\n/)) {
            const data = ev.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim()).join('\n');
            if (!data) continue;
            const m = JSON.parse(data);
            if (m.id === id) return m;
        }
        throw new Error(`no reply for id ${id} in SSE body`);
    }
    return JSON.parse(r.text);
}

/* ---- raw HTTP: initialize by hand, then POST tools/call over keep-alive sockets ---------------- */
function rawHttp(url, conc) {
    const agent = new http.Agent({ keepAlive: true, maxSockets: conc });
    const u = new URL(url);
    const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    const post = (msg) => new Promise((resolve, reject) => {
        const body = JSON.stringify(msg);
        const req = http.request({ agent, host: u.hostname, port: u.port, path: u.pathname, method: 'POST',
            headers: { ...headers, 'content-length': Buffer.byteLength(body) } }, (res) => {
            const chunks = [];
            res.on('data', (d) => chunks.push(d));
            res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, text: Buffer.concat(chunks).toString() }));
            res.on('error', reject);
        });
        req.on('error', reject);
        req.end(body);
    });
    const reply = rawHttpReply;
    let nextId = 1;
    return {
        async connect() {
            const r = await post({ jsonrpc: '2.0', id: 0, method: 'initialize', params: INIT_PARAMS });
            reply(r, 0);
            headers['mcp-session-id'] = r.headers['mcp-session-id'];
            headers['mcp-protocol-version'] = '2025-11-25';
            const n = await post({ jsonrpc: '2.0', method: 'notifications/initialized' });
            if (n.status !== 202) throw new Error(`initialized: HTTP ${n.status}`);
        },
        async call(name, args) {
            const id = nextId++;
            return reply(await post({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } }), id);
        },
        async close() {
            if (headers['mcp-session-id']) {
                await new Promise((resolve) => {
                    const req = http.request({ agent, host: u.hostname, port: u.port, path: u.pathname, method: 'DELETE',
                        headers }, (res) => { res.resume(); res.on('end', resolve); });
                    req.on('error', resolve);
                    req.end();
                });
            }
            agent.destroy();
        },
    };
}

/* ---- net: HTTP/1.1 by hand over c keep-alive sockets (one request in flight per socket) ---------
 * Much cheaper per call than node:http, so a fast server is less hidden behind the client. */
class HttpConn {
    constructor(host, port) {
        this.sock = net.connect({ host, port, noDelay: true });
        this.buf = Buffer.alloc(0);
        this.waiting = null;
        this.sock.on('data', (d) => { this.buf = this.buf.length ? Buffer.concat([this.buf, d]) : d; this.parse(); });
        this.sock.on('error', (e) => this.fail(e));
        this.sock.on('close', () => this.fail(new Error('connection closed')));
    }
    fail(e) { const w = this.waiting; this.waiting = null; w?.reject(e); }
    request(head, body) {
        return new Promise((resolve, reject) => {
            this.waiting = { resolve, reject };
            this.sock.write(head + body);
        });
    }
    /* Completes the waiting request once a whole response (Content-Length or chunked) is buffered. */
    parse() {
        if (!this.waiting) return;
        const end = this.buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        const lines = this.buf.subarray(0, end).toString('latin1').split('\r\n');
        const status = Number(lines[0].split(' ')[1]);
        const headers = {};
        for (const l of lines.slice(1)) {
            const i = l.indexOf(':');
            headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
        }
        let pos = end + 4;
        let body;
        if (headers['transfer-encoding'] === 'chunked') {
            const parts = [];
            for (;;) {
                const nl = this.buf.indexOf('\r\n', pos);
                if (nl < 0) return;
                const size = parseInt(this.buf.subarray(pos, nl).toString('latin1'), 16);
                if (this.buf.length < nl + 2 + size + 2) return;
                if (size === 0) { pos = nl + 4; break; }
                parts.push(this.buf.subarray(nl + 2, nl + 2 + size));
                pos = nl + 2 + size + 2;
            }
            body = Buffer.concat(parts);
        } else {
            const len = Number(headers['content-length'] ?? 0);
            if (this.buf.length < pos + len) return;
            body = this.buf.subarray(pos, pos + len);
            pos += len;
        }
        this.buf = this.buf.subarray(pos);
        const w = this.waiting;
        this.waiting = null;
        w.resolve({ status, headers, text: body.toString('utf8') });
    }
}

function netHttp(url, conc) {
    const u = new URL(url);
    const conns = [];
    const idle = [];
    const queue = [];
    let extra = '';
    const post = async (msg) => {
        const conn = idle.pop() ?? (conns.length < conc ? (conns.push(new HttpConn(u.hostname, u.port)), conns[conns.length - 1])
            : await new Promise((r) => queue.push(r)));
        const body = JSON.stringify(msg);
        const head = `POST ${u.pathname} HTTP/1.1\r\nHost: ${u.host}\r\nContent-Type: application/json\r\n` +
            `Accept: application/json, text/event-stream\r\n${extra}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n`;
        try { return await conn.request(head, body); } finally {
            const next = queue.shift();
            if (next) next(conn); else idle.push(conn);
        }
    };
    const base = rawHttpReply;
    let nextId = 1;
    return {
        async connect() {
            const r = await post({ jsonrpc: '2.0', id: 0, method: 'initialize', params: INIT_PARAMS });
            base(r, 0);
            extra = `Mcp-Session-Id: ${r.headers['mcp-session-id']}\r\nMCP-Protocol-Version: 2025-11-25\r\n`;
            const n = await post({ jsonrpc: '2.0', method: 'notifications/initialized' });
            if (n.status !== 202) throw new Error(`initialized: HTTP ${n.status}`);
        },
        async call(name, args) {
            const id = nextId++;
            return base(await post({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } }), id);
        },
        async close() {
            // End the session (DELETE) on one socket, then drop them all.
            const conn = idle.pop() ?? conns[0];
            if (conn && extra) {
                const head = `DELETE ${u.pathname} HTTP/1.1\r\nHost: ${u.host}\r\n${extra}Content-Length: 0\r\n\r\n`;
                await conn.request(head, '').catch(() => {});
            }
            for (const c of conns) c.sock.destroy();
        },
    };
}

/* ---- raw stdio: newline-delimited JSON-RPC to a child ------------------------------------------- */
function rawStdio(cmd) {
    const child = spawn(cmd[0], cmd.slice(1), { stdio: ['pipe', 'pipe', 'ignore'], env: process.env });
    const pending = new Map();
    let buf = '';
    child.stdout.on('data', (d) => {
        buf += d;
        let i;
        while ((i = buf.indexOf('\n')) >= 0) {
            const line = buf.slice(0, i);
            buf = buf.slice(i + 1);
            const m = JSON.parse(line);
            const p = pending.get(m.id);
            if (p && m.method === undefined) { pending.delete(m.id); p(m); }
        }
    });
    let nextId = 1;
    const request = (method, params) => new Promise((resolve) => {
        const id = nextId++;
        pending.set(id, resolve);
        child.stdin.write(JSON.stringify({ jsonrpc: '2.0', id, method, params }) + '\n');
    });
    return {
        async connect() {
            const r = await request('initialize', INIT_PARAMS);
            if (!r.result) throw new Error(`initialize failed: ${JSON.stringify(r)}`);
            child.stdin.write('{"jsonrpc":"2.0","method":"notifications/initialized"}\n');
        },
        call: (name, args) => request('tools/call', { name, arguments: args }),
        async close() {
            child.stdin.end();
            await new Promise((r) => (child.exitCode !== null ? r() : child.on('exit', r)));
        },
    };
}

/* ---- SDK client ---------------------------------------------------------------------------------- */
async function sdkClient(o) {
    const { Client } = await sdkImport('client/index.js');
    const transport = o.url
        ? new (await sdkImport('client/streamableHttp.js')).StreamableHTTPClientTransport(new URL(o.url))
        : new (await sdkImport('client/stdio.js')).StdioClientTransport({ command: o.cmd[0], args: o.cmd.slice(1),
            env: process.env, stderr: 'ignore' });
    const client = new Client({ name: 'mcpbox-bench', version: '1' });
    return {
        async connect() { await client.connect(transport); },
        async call(name, args) {
            try { return { result: await client.callTool({ name, arguments: args }) }; } catch (e) {
                return { error: { code: e.code, message: e.message } };
            }
        },
        close: () => client.close(),
    };
}

const pct = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];

export function summarize(lat, wallMs) {
    const s = [...lat].sort((x, y) => x - y);
    const r3 = (x) => Math.round(x * 1000) / 1000;
    return { calls: s.length, callsPerSec: Math.round((s.length / wallMs) * 1000 * 10) / 10,
        p50: r3(pct(s, 50)), p90: r3(pct(s, 90)), p99: r3(pct(s, 99)), max: r3(s[s.length - 1]),
        mean: r3(s.reduce((a, b) => a + b, 0) / s.length) };
}

/* Runs `count` calls with `conc` workers; returns per-call latencies (ms) and the wall time. */
async function drive(cl, o, count) {
    const lat = [];
    let issued = 0;
    let errors = 0;
    let isError = 0;
    let firstError = null;
    const worker = async () => {
        while (issued < count) {
            issued++;
            const t0 = process.hrtime.bigint();
            const r = await cl.call(o.tool, o.args);
            lat.push(Number(process.hrtime.bigint() - t0) / 1e6);
            if (r.error) { errors++; firstError ??= r.error; } else if (r.result?.isError) isError++;
        }
    };
    const t0 = process.hrtime.bigint();
    await Promise.all(Array.from({ length: o.c }, worker));
    return { lat, wallMs: Number(process.hrtime.bigint() - t0) / 1e6, errors, isError, firstError };
}

export async function runLoad(o) {
    events.setMaxListeners(0);
    const cl = o.client === 'net' && o.url ? netHttp(o.url, o.c)
        : o.client === 'raw' || o.client === 'net' ? (o.url ? rawHttp(o.url, o.c) : rawStdio(o.cmd)) : await sdkClient(o);
    const tc = process.hrtime.bigint();
    await cl.connect();
    const connectMs = Number(process.hrtime.bigint() - tc) / 1e6;
    if (o.warmup > 0) await drive(cl, o, o.warmup);
    const run = await drive(cl, o, o.n);
    await cl.close();
    const out = { transport: o.url ? 'http' : 'stdio', client: o.client, tool: o.tool, n: o.n, c: o.c,
        ...summarize(run.lat, run.wallMs), wallMs: Math.round(run.wallMs), connectMs: Math.round(connectMs),
        errors: run.errors, isError: run.isError, firstError: run.firstError };
    if (o.latencies) out.latencies = run.lat;
    return out;
}

if (import.meta.url === `file://${process.argv[1]}`) {
    const o = parseLoadArgs(process.argv.slice(2));
    const r = await runLoad(o);
    if (o.json) console.log(JSON.stringify(r));
    else {
        console.log(`${r.transport} ${o.url ?? o.cmd.join(' ')} client=${r.client} tool=${r.tool} n=${r.n} c=${r.c}`);
        console.log(`  ${r.callsPerSec} calls/s  p50=${r.p50}ms p90=${r.p90}ms p99=${r.p99}ms max=${r.max}ms ` +
            `mean=${r.mean}ms connect=${r.connectMs}ms errors=${r.errors} isError=${r.isError}`);
        if (r.firstError) console.log(`  first error: ${JSON.stringify(r.firstError)}`);
    }
    process.exit(r.errors > 0 ? 1 : 0);
}
