// Helpers for the tests of mcpbox's OpenSandbox API (serve --opensandbox-api): start mcpbox on a
// free loopback port, put Prism's validating proxy (the official specs in ./specs) in front of
// it, and stop everything at the end. Node tooling: tests/opensandbox/node (install-deps.sh --test).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const here = path.dirname(fileURLToPath(import.meta.url));
export const NODE_DIR = path.join(here, 'node', 'node_modules');
export const SPECS = path.join(here, 'specs');
const children = [];
const servers = []; // the mcpbox processes: they must stop cleanly (sanitizer builds report here)

export function parseArgs(argv) {
  const out = {};
  for (let i = 0; i < argv.length; i++)
    if (argv[i].startsWith('--')) out[argv[i].slice(2)] = argv[i + 1] && !argv[i + 1].startsWith('--') ? argv[++i] : true;
  return out;
}

export function requireTooling() {
  for (const p of ['@stoplight/prism-cli', '@alibaba-group/opensandbox'])
    if (!fs.existsSync(path.join(NODE_DIR, p))) {
      console.error(`missing ${p} in ${NODE_DIR}: run scripts/install-deps.sh --test`);
      process.exit(1);
    }
}

export function tempStateDir(tag) {
  return fs.mkdtempSync(path.join(os.tmpdir(), `mcpbox-osapi-${tag}-`));
}

function waitFor(child, stream, re, what) {
  return new Promise((resolve, reject) => {
    let seen = '';
    const t = setTimeout(() => reject(new Error(`${what}: not ready in 60 s:\n${seen}`)), 60000);
    child[stream].on('data', (d) => {
      seen += d;
      const m = re.exec(seen);
      if (m) { clearTimeout(t); resolve(m); }
    });
    child.on('exit', (c) => { clearTimeout(t); reject(new Error(`${what} exited ${c}:\n${seen}`)); });
  });
}

// mcpbox serve --http 127.0.0.1:0 --opensandbox-api [--opensandbox-api-key KEY]
export async function startMcpbox(bin, { key, stateDir, extraArgs = [], env = {} } = {}) {
  const args = ['serve', '--http', '127.0.0.1:0', '--opensandbox-api', '--state-dir', stateDir,
                '--local-pool', '0',
                // programs' egress is the person's to allow (issue 38; osapi_approval.mjs tests that)
                '--approve', 'egress=allow', ...extraArgs];
  if (key) args.push('--opensandbox-api-key', key);
  const child = spawn(bin, args, { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, ...env } });
  children.push(child);
  servers.push(child);
  child.errTail = '';
  child.stderr.on('data', (d) => {
    child.errTail = (child.errTail + d).slice(-8192);
    if (process.env.OSAPI_VERBOSE) process.stderr.write(d);
  });
  const m = await waitFor(child, 'stderr', /listening on http:\/\/127\.0\.0\.1:(\d+)\/mcp/, 'mcpbox');
  return { child, port: +m[1], base: `http://127.0.0.1:${m[1]}`, stateDir };
}

// A loopback port free at this moment (the kernel picks it; Prism is then told to use it).
function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => { const { port } = srv.address(); srv.close(() => resolve(port)); });
  });
}

// prism proxy SPEC UPSTREAM --errors: a request or an answer outside the spec becomes 422 / 500.
// Prism cannot listen on port 0, so a free port is picked first; another process may take it
// before Prism binds (Prism then exits "fatal"), and the start is tried again on a new one. A
// port derived from the pid, as before, collided with ephemeral ports other tests held.
export async function startPrism(spec, upstream) {
  const bin = path.join(NODE_DIR, '.bin', 'prism');
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    // With this test's Node (tests/node's, not Debian 12's 18, which Prism 5's dependencies refuse).
    const child = spawn(process.execPath, [bin, 'proxy', '-h', '127.0.0.1', '-p', String(port),
                        path.resolve(SPECS, spec), upstream, '--errors'],
                        { stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(child);
    try {
      await waitFor(child, 'stdout', /Prism is listening/, `prism ${spec}`);
      return { child, base: `http://127.0.0.1:${port}` };
    } catch (e) {
      if (attempt >= 3 || child.exitCode === null) throw e;
    }
  }
}

export function stopAll() {
  for (const c of children) if (c.exitCode === null) c.kill('SIGTERM');
}
process.on('exit', stopAll);

let n = 0, failed = 0;
export async function test(name, fn) {
  n++;
  try {
    await fn();
    console.log(`ok ${n} - ${name}`);
  } catch (e) {
    failed++;
    console.log(`not ok ${n} - ${name}\n# ${String(e.stack || e).split('\n').join('\n# ')}`);
  }
}
export function check(cond, msg) { if (!cond) throw new Error(msg); }
// Stops every mcpbox with SIGTERM and checks that it exits 0 without a sanitizer report.
async function stopServers() {
  for (const c of servers) {
    if (c.exitCode !== null) continue;
    const exited = new Promise((r) => c.on('exit', (code, sig) => r(code ?? sig)));
    c.kill('SIGTERM');
    const code = await Promise.race([exited, new Promise((r) => setTimeout(() => r('hung'), 15000))]);
    await new Promise((r) => setImmediate(r));
    if (code !== 0 || /Sanitizer|runtime error:/.test(c.errTail)) {
      failed++;
      console.log(`not ok - mcpbox stopped with ${code}\n# ${c.errTail.split('\n').join('\n# ')}`);
    }
  }
}

export async function done() {
  await stopServers();
  console.log(`1..${n}`);
  stopAll();
  process.exit(failed ? 1 : 0);
}

// One call through Prism: the status must be the expected one and Prism must report no
// violation (sl-violations header, or its 422/500 problem+json under --errors).
export async function through(base, method, p, { headers = {}, body, expect, raw = false } = {}) {
  const h = { ...headers };
  if (body !== undefined && !(body instanceof FormData)) h['Content-Type'] = 'application/json';
  const r = await fetch(base + p, { method, headers: h,
                                    body: body === undefined ? undefined : body instanceof FormData ? body : JSON.stringify(body) });
  const text = await r.text();
  const viol = r.headers.get('sl-violations');
  check(!viol, `${method} ${p}: Prism reports violations: ${viol}`);
  check(!(r.headers.get('content-type') || '').includes('problem+json'),
        `${method} ${p}: Prism answered ${r.status}: ${text}`);
  if (expect !== undefined) check(r.status === expect, `${method} ${p}: status ${r.status}, want ${expect}: ${text}`);
  let json;
  try { json = raw ? undefined : (text ? JSON.parse(text) : undefined); } catch { json = undefined; }
  return { status: r.status, headers: r.headers, text, json };
}
