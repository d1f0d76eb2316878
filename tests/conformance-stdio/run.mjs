// Runs the official conformance suite (@modelcontextprotocol/conformance 0.1.16, server mode)
// against `mcpbox serve --conformance-fixtures` over stdio, through bridge.mjs.
//   node run.mjs --mcpbox build/mcpbox [--suite all] [--expect 44] [--timeout-s 600]
// Passes when the suite exits 0 and its closing line reads "Total: N passed, 0 failed", N >= expect.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { NODE_MODULES, SKIP, parseArgs, requireBinary, tempStateDir } from '../e2e/sdk/lib.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const args = parseArgs(process.argv.slice(2));
const BIN = requireBinary(args.mcpbox);
const SUITE = args.suite || 'all';
const EXPECT = Number(args.expect ?? 44);
const TIMEOUT_MS = Number(args['timeout-s'] ?? 600) * 1000;
const CONFORMANCE = path.join(NODE_MODULES, '@modelcontextprotocol/conformance/dist/index.js');
if (!fs.existsSync(CONFORMANCE)) {
    console.log(`# SKIP: ${CONFORMANCE} missing (run scripts/install-deps.sh --test)`);
    process.exit(SKIP);
}

function startBridge() {
    const child = spawn(process.execPath, [path.join(here, 'bridge.mjs'), '--port', '0', '--',
        BIN, 'serve', '--conformance-fixtures', '--state-dir', tempStateDir('conf-stdio')],
    { stdio: ['ignore', 'inherit', 'pipe'], env: process.env });
    return new Promise((resolve, reject) => {
        let err = '';
        const timer = setTimeout(() => reject(new Error(`bridge did not start:\n${err}`)), 15000);
        child.stderr.on('data', (d) => {
            process.stderr.write(d);
            err += d;
            const m = /bridge listening on (\S+)/.exec(err);
            if (m) { clearTimeout(timer); resolve({ child, url: m[1] }); }
        });
        child.on('exit', (c) => { clearTimeout(timer); reject(new Error(`bridge exited (${c}):\n${err}`)); });
    });
}

function runSuite(url) {
    const env = { ...process.env, PATH: `${path.dirname(process.execPath)}:${process.env.PATH}` };
    const child = spawn(process.execPath, [CONFORMANCE, 'server', '--url', url, '--suite', SUITE],
        { stdio: ['ignore', 'pipe', 'inherit'], env });
    let out = '';
    child.stdout.on('data', (d) => { process.stdout.write(d); out += d; });
    const timer = setTimeout(() => { console.log(`# conformance timed out after ${TIMEOUT_MS} ms`); child.kill('SIGKILL'); }, TIMEOUT_MS);
    return new Promise((resolve) => child.on('exit', (code) => { clearTimeout(timer); resolve({ code, out }); }));
}

const bridge = await startBridge();
let rc = 1;
try {
    const { code, out } = await runSuite(bridge.url);
    const m = /Total: (\d+) passed, (\d+) failed/.exec(out);
    const passed = m ? Number(m[1]) : 0;
    const failed = m ? Number(m[2]) : -1;
    console.log(`# conformance over stdio (suite ${SUITE}): exit ${code}, ${passed} passed, ${failed} failed, want >= ${EXPECT} passed`);
    rc = code === 0 && failed === 0 && passed >= EXPECT ? 0 : 1;
} finally {
    bridge.child.kill('SIGTERM');
}
process.exit(rc);
