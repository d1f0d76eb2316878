// Shared helpers for the end-to-end tests that drive the real mcpbox binary with the official
// TypeScript SDK client (@modelcontextprotocol/sdk, installed in tests/node/node_modules).
//
// The SDK is loaded by absolute path because these scripts live outside tests/node and ESM
// resolution does not honour NODE_PATH.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
export const NODE_MODULES = process.env.MCPBOX_NODE_MODULES ||
    path.resolve(here, '../../node/node_modules');
export const SKIP = 77;

/* Imports a module of the SDK's ESM build, e.g. sdkImport('client/index.js'). */
export async function sdkImport(sub) {
    const file = path.join(NODE_MODULES, '@modelcontextprotocol/sdk/dist/esm', sub);
    if (!fs.existsSync(file)) {
        console.log(`# SKIP: ${file} is missing (run scripts/install-deps.sh --test)`);
        process.exit(SKIP);
    }
    return import(pathToFileURL(file).href);
}

/* --name value (or -n value) pairs and bare --flags into an object. */
export function parseArgs(argv) {
    const out = { _: [] };
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i];
        if (!a.startsWith('-') || a === '--') { out._.push(a); continue; }
        const key = a.replace(/^--?/, '');
        if (i + 1 < argv.length && !argv[i + 1].startsWith('-')) out[key] = argv[++i];
        else out[key] = true;
    }
    return out;
}

export function requireBinary(bin) {
    if (!bin || !fs.existsSync(bin)) {
        console.log(`# SKIP: mcpbox binary not found at ${bin}`);
        process.exit(SKIP);
    }
    return path.resolve(bin);
}

export function tempStateDir(tag) {
    return fs.mkdtempSync(path.join(os.tmpdir(), `mcpbox-${tag}-`));
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/* Resolves with the value of fn() once it is truthy; rejects after ms. */
export async function waitFor(fn, ms, what) {
    const end = Date.now() + ms;
    for (;;) {
        const v = fn();
        if (v) return v;
        if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
        await sleep(10);
    }
}

/* Starts `mcpbox serve --http 127.0.0.1:0 ...` and waits for its "listening on URL" line. */
export async function startHttpServer(bin, extraArgs = [], { stateDir, timeoutMs = 15000 } = {}) {
    const dir = stateDir || tempStateDir('http');
    const args = ['serve', '--http', '127.0.0.1:0', '--state-dir', dir, ...extraArgs];
    const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'], env: process.env });
    let stderr = '';
    let stdout = '';
    child.stdout.on('data', (d) => { stdout += d; });
    const url = await new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(
            `mcpbox ${args.join(' ')} printed no "listening on" line within ${timeoutMs} ms; stderr:\n${stderr}`)), timeoutMs);
        child.stderr.on('data', (d) => {
            stderr += d;
            const m = /listening on (http:\/\/\S+)/.exec(stderr);
            if (m) { clearTimeout(timer); resolve(m[1]); }
        });
        child.on('exit', (code, sig) => {
            clearTimeout(timer);
            reject(new Error(`mcpbox ${args.join(' ')} exited (${code ?? sig}) before listening; stderr:\n${stderr}`));
        });
    });
    return {
        url, child, dir,
        stderr: () => stderr,
        stdout: () => stdout,
        async stop() {
            if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
            const done = new Promise((r) => child.once('exit', (code, sig) => r(code ?? sig)));
            child.kill('SIGTERM');
            const t = setTimeout(() => child.kill('SIGKILL'), 5000);
            const rc = await done;
            clearTimeout(t);
            return rc;
        },
    };
}

/* Wraps an SDK transport and records every message in both directions, so tests can check
 * ordering (notifications before the result) and the absence of a reply (cancellation). */
export class TapTransport {
    constructor(inner) {
        this.inner = inner;
        this.log = [];       // {dir: 'in'|'out', msg, t}
    }
    get sessionId() { return this.inner.sessionId; }
    get protocolVersion() { return this.inner.protocolVersion; }
    setProtocolVersion(v) { this.inner.setProtocolVersion?.(v); }
    async start() {
        this.inner.onmessage = (msg, extra) => {
            this.log.push({ dir: 'in', msg, t: Date.now() });
            this.onmessage?.(msg, extra);
        };
        this.inner.onerror = (e) => this.onerror?.(e);
        this.inner.onclose = () => this.onclose?.();
        return this.inner.start();
    }
    async send(msg, opts) {
        this.log.push({ dir: 'out', msg, t: Date.now() });
        return this.inner.send(msg, opts);
    }
    async close() { return this.inner.close(); }
    incoming() { return this.log.filter((e) => e.dir === 'in').map((e) => e.msg); }
    /* The first incoming response whose id equals id (strict: "7" is not 7). */
    responseFor(id) {
        return this.incoming().find((m) => m.id === id && ('result' in m || 'error' in m));
    }
    /* Sends a raw JSON-RPC message past the Client and waits for the response with its id. */
    async rawRequest(msg, ms = 10000) {
        await this.send(msg);
        return waitFor(() => this.responseFor(msg.id), ms, `a response to id ${JSON.stringify(msg.id)}`);
    }
}

/* Kind of content items a tool result holds. */
export const contentTypes = (res) => (res.content || []).map((c) => c.type);
export const firstText = (res) => (res.content || []).find((c) => c.type === 'text')?.text ?? '';
