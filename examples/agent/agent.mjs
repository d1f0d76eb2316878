#!/usr/bin/env node
// A small agent-framework style client for mcpbox, on the official MCP TypeScript SDK.
//
// It does what a coding agent does with a sandbox: create one, write a program into it, run it,
// read the file the program produced, and clean up, whatever happens in between.
//
//   npm install
//   node agent.mjs                                   # stdio: starts `mcpbox serve` itself
//   node agent.mjs --mcpbox /path/to/mcpbox          # a specific binary
//   mcpbox serve --http 127.0.0.1:8765 &             # or over HTTP, against a running server
//   node agent.mjs --http http://127.0.0.1:8765/mcp  # MCPBOX_TOKEN is sent as a bearer token
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { pathToFileURL } from 'node:url';

// The program the agent "wrote": prints the primes below its argument into result.txt.
export const PROGRAM = `#!/bin/sh
limit=$1 n=2 found=""
while [ "$n" -lt "$limit" ]; do
    d=2 prime=1
    while [ $((d * d)) -le "$n" ]; do
        if [ $((n % d)) -eq 0 ]; then prime=0; break; fi
        d=$((d + 1))
    done
    [ "$prime" = 1 ] && found="$found $n"
    n=$((n + 1))
done
echo "primes below $limit:$found" > result.txt
echo "wrote result.txt"
`;
export const EXPECTED = 'primes below 30: 2 3 5 7 11 13 17 19 23 29\n';

/* Connects over stdio (spawning mcpbox) or over Streamable HTTP. */
export async function connect({ http, mcpbox = 'mcpbox', token = process.env.MCPBOX_TOKEN } = {}) {
    const client = new Client({ name: 'mcpbox-example-agent', version: '1.0.0' });
    let transport;
    if (http) {
        const headers = token ? { Authorization: `Bearer ${token}` } : {};
        transport = new StreamableHTTPClientTransport(new URL(http), { requestInit: { headers } });
    } else {
        transport = new StdioClientTransport({ command: mcpbox, args: ['serve'], env: process.env, stderr: 'inherit' });
    }
    await client.connect(transport);
    return client;
}

/* Calls one tool and returns its structuredContent; a tool error becomes an exception whose
 * message is the server's (written to be acted on). */
async function call(client, name, args, log) {
    const res = await client.callTool({ name, arguments: args });
    if (res.isError) {
        const text = (res.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
        throw new Error(`${name} failed: ${text}`);
    }
    log(`${name} ok`);
    return res.structuredContent;
}

/* The agent's task. Returns what it observed; always destroys the sandbox it created. */
export async function runTask(client, { log = console.log } = {}) {
    const box = await call(client, 'create_sandbox', { metadata: { purpose: 'example-agent' } }, log);
    log(`sandbox ${box.sandbox_id} (${box.backend}) is ${box.state}`);
    try {
        await call(client, 'write_file', { sandbox_id: box.sandbox_id, path: 'primes.sh', content: PROGRAM, mode: '0755' }, log);
        const run = await call(client, 'run_command', { sandbox_id: box.sandbox_id, command: './primes.sh 30', timeout_seconds: 60 }, log);
        log(`exit ${run.exit_code}: ${run.stdout.trim()}`);
        if (run.exit_code !== 0) throw new Error(`the program failed (exit ${run.exit_code}): ${run.stderr}`);
        const file = await call(client, 'read_file', { sandbox_id: box.sandbox_id, path: 'result.txt' }, log);
        log(`result.txt: ${file.content.trim()}`);
        return { sandbox_id: box.sandbox_id, exit_code: run.exit_code, result: file.content, sha256: file.sha256 };
    } finally {
        await call(client, 'destroy_sandbox', { sandbox_id: box.sandbox_id }, log);
    }
}

function parseArgs(argv) {
    const out = {};
    for (let i = 0; i < argv.length; i++) {
        if (argv[i] === '--http' || argv[i] === '--mcpbox') out[argv[i].slice(2)] = argv[++i];
        else throw new Error(`unknown argument ${argv[i]} (use --http URL or --mcpbox PATH)`);
    }
    return out;
}

async function main() {
    const client = await connect(parseArgs(process.argv.slice(2)));
    try {
        const outcome = await runTask(client);
        console.log(outcome.result === EXPECTED ? 'done: the program ran and its result is right' : 'done, but the result is unexpected');
        process.exitCode = outcome.result === EXPECTED ? 0 : 1;
    } finally {
        await client.close();
    }
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
    main().catch((e) => {
        console.error(`agent: ${e.message}`);
        process.exit(1);
    });
}
