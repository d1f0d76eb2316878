// Helpers for the approval tests (issue 38): MCP clients that declare elicitation and answer as
// a person would (the official TypeScript SDK: v1 speaks 2025-11-25 and gets elicitation/create;
// v2 negotiates 2026-07-28 and gets an InputRequiredResult, which its driver fulfils through the
// same handler), or that declare nothing.
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { NODE_MODULES, SKIP } from '../sdk/lib.mjs';

async function importPkg(rel) {
    const file = path.join(NODE_MODULES, rel);
    if (!fs.existsSync(file)) {
        console.log(`# SKIP: ${file} is missing (run scripts/install-deps.sh --test)`);
        process.exit(SKIP);
    }
    return import(pathToFileURL(file).href);
}
const v1 = await importPkg('@modelcontextprotocol/sdk/dist/esm/client/index.js');
const v1stdio = await importPkg('@modelcontextprotocol/sdk/dist/esm/client/stdio.js');
const v1http = await importPkg('@modelcontextprotocol/sdk/dist/esm/client/streamableHttp.js');
const v1types = await importPkg('@modelcontextprotocol/sdk/dist/esm/types.js');
const v2 = await importPkg('@modelcontextprotocol/client/dist/index.mjs');
const v2stdio = await importPkg('@modelcontextprotocol/client/dist/stdio.mjs');

export const text = (res) => (res.content || []).filter((c) => c.type === 'text')
    .map((c) => c.text).join('\n');

/* A person at the client: answer(params) gives the ElicitResult; every question is kept. */
export class Person {
    constructor() { this.asked = []; this.reply = { action: 'cancel' }; this.delayMs = 0; }
    says(reply, delayMs = 0) { this.reply = reply; this.delayMs = delayMs; }
    async answer(params) {
        this.asked.push(params);
        if (this.delayMs) await new Promise((r) => setTimeout(r, this.delayMs));
        return this.reply;
    }
}
export const accept = (answer) => ({ action: 'accept', content: { answer } });

/* Connects: revision '2025' (SDK v1) or '2026' (SDK v2), over 'stdio' (spawn: {bin, args, cwd})
 * or 'http' (url); person null: no elicitation capability. Returns {client, close}. */
export async function connect({ revision, transport, bin, args, cwd, url, person, name }) {
    const caps = person ? { elicitation: { form: {} } } : {};
    const info = { name: name || `approval-${revision}-${transport}`, version: '1.0.0' };
    let client, t;
    if (revision === '2025') {
        client = new v1.Client(info, { capabilities: caps });
        if (person)
            client.setRequestHandler(v1types.ElicitRequestSchema, (req) => person.answer(req.params));
        t = transport === 'stdio'
            ? new v1stdio.StdioClientTransport({ command: bin, args, cwd, stderr: 'inherit',
                                                 env: { ...process.env } })
            : new v1http.StreamableHTTPClientTransport(new URL(url));
    } else {
        client = new v2.Client(info, { capabilities: caps, versionNegotiation: { mode: 'auto' } });
        if (person)
            client.setRequestHandler('elicitation/create', (req) => person.answer(req.params));
        t = transport === 'stdio'
            ? new v2stdio.StdioClientTransport({ command: bin, args, cwd, stderr: 'inherit',
                                                 env: { ...process.env } })
            : new v2.StreamableHTTPClientTransport(new URL(url));
    }
    await client.connect(t);
    return {
        client,
        async call(tool, a) {
            const params = { name: tool, arguments: a };
            return revision === '2025' ? client.callTool(params, undefined, { timeout: 60000 })
                                       : client.callTool(params, { timeout: 60000 });
        },
        async close() { try { await client.close(); } catch { /* gone */ } },
    };
}
