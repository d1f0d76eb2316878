// A fake OpenSandbox server for mcpbox's tests: the lifecycle API (/v1/...) and execd (reached
// through the endpoint the lifecycle API hands out) on one loopback port, reproducing the real
// server's wire behaviour (docs/internals/opensandbox-wire.md): 202 create then Pending->Running,
// FastAPI 422 {"detail":[...]}, {"code","message"} errors, execd's raw-JSON event stream with a
// ping every FAKE_PING_MS and a FAKE_GRACE_MS tail, exit codes in error.evalue, background logs
// by byte cursor, multipart upload with the metadata filename rule, Range downloads; snapshots
// (202 Creating -> Ready after FAKE_SNAPSHOT_MS, a copy of the sandbox's files that a restore
// gets back; 409 SNAPSHOT::INVALID_SOURCE_STATE / INVALID_STATE, 404 SNAPSHOT::NOT_FOUND, 501
// SNAPSHOT::NOT_IMPLEMENTED with {snapshots:"unsupported"}; an image "snapfail*" fails to
// snapshot); execd /metrics (this host's figures, as execd reads /proc); the code interpreter on
// images whose name contains "code-interpreter": contexts, streamed runs (init, stdout chunks,
// execution_count, result, error, execution_complete) in a persistent python3 per context
// standing for a Jupyter kernel, interrupt by SIGINT. Other images have no Jupyter: creating a
// context fails after a moment, or hangs as the real execd's retries do with {noJupyter:"hang"}.
//
// Commands really run (sh -c, on this host, inside a per-sandbox directory that stands for the
// sandbox's root): this is a test double on loopback, not an isolation boundary.
//
// Control (not part of OpenSandbox): POST /_faults [{match, kind, times, status, retryAfter,
// ms, prefix, violations}] injects faults into requests whose "METHOD /path?query" contains
// `match`; GET /_log lists the requests seen (method, url, headers); POST /_reset clears faults and the log;
// POST /_config {route:"path"|"header"|"proxy-only", sse:"raw"|"data", pageMax:N,
// snapshots:"unsupported", noJupyter:"hang"}.
//
// Prints "listening PORT" on stdout. Env: FAKE_API_KEY, FAKE_PING_MS (3000), FAKE_GRACE_MS
// (1000), FAKE_START_MS (150), FAKE_QUOTA (sandboxes per server, unlimited), FAKE_SNAPSHOT_MS
// (300).
import http from 'node:http';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import crypto from 'node:crypto';
import { spawn } from 'node:child_process';
import { Writable } from 'node:stream';

const API_KEY = process.env.FAKE_API_KEY || '';
const PING_MS = +(process.env.FAKE_PING_MS || 3000);
const GRACE_MS = +(process.env.FAKE_GRACE_MS || 1000);
const START_MS = +(process.env.FAKE_START_MS || 150);
const QUOTA = +(process.env.FAKE_QUOTA || 0);
const SNAPSHOT_MS = +(process.env.FAKE_SNAPSHOT_MS || 300);
const ROOT = fs.mkdtempSync(path.join(os.tmpdir(), 'fake-osb-'));

const sandboxes = new Map(); // id -> sandbox
const commands = new Map();  // id -> command
const snapshots = new Map(); // id -> snapshot
const contexts = new Map();  // code context id -> context
let faults = [];
let reqlog = [];
const config = { route: 'path', sse: 'raw' };
let port = 0;

// ---------------------------------------------------------------------------------------------
// helpers

const nowIso = (ms = Date.now()) => new Date(ms).toISOString().replace('Z', '000Z');
function send(res, status, body, headers = {}) {
  if (res.headersSent || res.destroyed) return;
  const data = body === undefined || body === null ? '' :
    typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body);
  const ct = typeof body === 'object' && !Buffer.isBuffer(body) && body !== null ?
    'application/json' : 'text/plain; charset=utf-8';
  res.writeHead(status, { 'Content-Type': ct, 'Content-Length': Buffer.byteLength(data), ...headers });
  res.end(data);
}
const err = (res, status, code, message, headers) => send(res, status, { code, message }, headers);
const detail = (res, msg, loc = ['body']) =>
  send(res, 422, { detail: [{ type: 'value_error', loc, msg, input: null }] });

function readBody(req) {
  return new Promise((resolve) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', () => resolve(Buffer.alloc(0)));
  });
}

function jsonBody(req, res, buf) {
  if (!(req.headers['content-type'] || '').startsWith('application/json')) {
    // FastAPI reads a non-JSON body as a missing body
    detail(res, 'Field required (Content-Type must be application/json)');
    return undefined;
  }
  try {
    return JSON.parse(buf.toString('utf8'));
  } catch (e) {
    detail(res, 'JSON decode error');
    return undefined;
  }
}

// The sandbox's view of a path -> a host path under its root (never outside it).
function hostPath(sb, p) {
  const norm = path.posix.normalize('/' + (p || '/'));
  return path.join(sb.root, norm);
}
function sandboxPath(sb, hp) {
  return '/' + path.relative(sb.root, hp).split(path.sep).join('/');
}
function modeDigits(m) { return +((m & 0o777).toString(8)); }
function fileInfo(sb, hp) {
  const st = fs.lstatSync(hp);
  return {
    path: sandboxPath(sb, hp),
    type: st.isDirectory() ? 'directory' : st.isFile() ? 'file' : st.isSymbolicLink() ? 'symlink' : 'other',
    size: st.size, modified_at: st.mtime.toISOString(), created_at: st.birthtime.toISOString(),
    owner: String(st.uid), group: String(st.gid), mode: modeDigits(st.mode),
  };
}

function sandboxJson(sb) {
  const o = {
    id: sb.id, ...(sb.snapshotId ? { snapshotId: sb.snapshotId } : { image: { uri: sb.image } }),
    status: { state: sandboxState(sb) },
    metadata: sb.metadata, entrypoint: sb.entrypoint, createdAt: nowIso(sb.created),
  };
  if (sb.reason) Object.assign(o.status, { reason: sb.reason, message: sb.message });
  if (sb.expires) o.expiresAt = nowIso(sb.expires);
  return o;
}
function sandboxState(sb) {
  if (sb.state === 'Pending' && Date.now() - sb.created >= START_MS)
    sb.state = sb.image.startsWith('crash') ? 'Failed' : 'Running';
  if (sb.state === 'Failed' && !sb.reason) {
    sb.reason = 'CONTAINER_EXITED_ERROR';
    sb.message = 'Sandbox container exited with code 127: exec: "tail": not found';
  }
  return sb.state;
}

// ---------------------------------------------------------------------------------------------
// lifecycle

function validateCreate(b) {
  if (typeof b !== 'object' || b === null || Array.isArray(b)) return 'body must be an object';
  if (!!b.image === !!b.snapshotId) return 'Value error, Exactly one of image or snapshotId must be provided.';
  if (b.snapshotId !== undefined) {
    if (typeof b.snapshotId !== 'string') return 'snapshotId must be a string';
    if (b.entrypoint !== undefined && (!Array.isArray(b.entrypoint) || b.entrypoint.length < 1)) return 'entrypoint must be a non-empty list';
  } else {
    if (typeof b.image?.uri !== 'string' || !b.image.uri) return 'image.uri must be a string';
    for (const k of Object.keys(b.image)) if (!['uri', 'auth'].includes(k)) return `image.${k}: extra field`;
    if (!Array.isArray(b.entrypoint) || b.entrypoint.length < 1) return 'entrypoint is required with image';
  }
  if (typeof b.resourceLimits !== 'object' || b.resourceLimits === null) return 'resourceLimits is required';
  for (const [k, v] of Object.entries(b.resourceLimits)) if (typeof v !== 'string') return `resourceLimits.${k} must be a string`;
  if (b.timeout !== undefined && b.timeout !== null && !(Number.isInteger(b.timeout) && b.timeout >= 60))
    return 'timeout must be an integer >= 60 or null';
  for (const f of ['env', 'metadata'])
    if (b[f] !== undefined) for (const [k, v] of Object.entries(b[f])) if (typeof v !== 'string') return `${f}.${k} must be a string`;
  if (b.networkPolicy !== undefined)
    for (const k of Object.keys(b.networkPolicy)) if (!['defaultAction', 'egress'].includes(k)) return `networkPolicy.${k}: extra field`;
  return null;
}

function createSandbox(req, res, b) {
  const bad = validateCreate(b);
  if (bad) return detail(res, bad);
  let snap = null;
  if (b.snapshotId) {
    snap = snapshots.get(b.snapshotId);
    if (!snap) return err(res, 404, 'SNAPSHOT::NOT_FOUND', `Snapshot ${b.snapshotId} not found.`);
    if (snapshotState(snap) !== 'Ready') return err(res, 409, 'SNAPSHOT::INVALID_STATE', `Snapshot ${snap.id} is ${snap.state}, not Ready.`);
    b.image = { uri: snap.image };
    b.entrypoint = b.entrypoint || ['tail', '-f', '/dev/null']; // the server's default for restores
  }
  if (b.image.uri.startsWith('pullfail'))
    return err(res, 500, 'DOCKER::SANDBOX_IMAGE_PULL_FAILED', `Failed to pull image ${b.image.uri}: manifest unknown`);
  if (QUOTA && [...sandboxes.values()].length >= QUOTA)
    return err(res, 403, 'SANDBOX::QUOTA_EXCEEDED', `sandbox quota of ${QUOTA} exceeded`);
  const id = crypto.randomUUID();
  const root = path.join(ROOT, id);
  if (snap) fs.cpSync(snap.dir, root, { recursive: true });
  fs.mkdirSync(path.join(root, 'tmp'), { recursive: true });
  const sb = {
    id, root, image: b.image.uri, entrypoint: b.entrypoint, metadata: b.metadata || {},
    env: b.env || {}, created: Date.now(), state: 'Pending', network: b.networkPolicy,
    expires: b.timeout ? Date.now() + b.timeout * 1000 : 0, limits: b.resourceLimits,
    snapshotId: snap ? snap.id : undefined,
  };
  sandboxes.set(id, sb);
  send(res, 202, sandboxJson(sb), { Location: `/v1/sandboxes/${id}` });
}

function listSandboxes(req, res, url) {
  const states = url.searchParams.getAll('state').map((s) => s.toLowerCase());
  const page = +(url.searchParams.get('page') || 1);
  let size = +(url.searchParams.get('pageSize') || 20);
  if (!(page >= 1) || !(size >= 1) || size > 200) return detail(res, 'invalid pagination', ['query', 'pageSize']);
  if (config.pageMax) size = Math.min(size, config.pageMax); // to exercise pagination
  let want = [];
  const m = url.searchParams.get('metadata');
  if (m !== null) {
    for (const part of m.split('&')) {
      const i = part.indexOf('=');
      if (i <= 0) return err(res, 400, 'INVALID_METADATA_FORMAT', `bad metadata filter ${m}`);
      want.push([decodeURIComponent(part.slice(0, i).replace(/\+/g, ' ')), decodeURIComponent(part.slice(i + 1).replace(/\+/g, ' '))]);
    }
  }
  const all = [...sandboxes.values()]
    .filter((sb) => !states.length || states.includes(sandboxState(sb).toLowerCase()))
    .filter((sb) => want.every(([k, v]) => sb.metadata[k] === v))
    .sort((a, b) => b.created - a.created);
  const items = all.slice((page - 1) * size, page * size).map(sandboxJson);
  const totalPages = Math.max(1, Math.ceil(all.length / size));
  send(res, 200, { items, pagination: { page, pageSize: size, totalItems: all.length, totalPages, hasNextPage: page < totalPages } });
}

function endpointFor(req, sb, p, url) {
  const host = `127.0.0.1:${port}`;
  if (url.searchParams.get('use_server_proxy') === 'true' || config.route === 'proxy-only')
    return { endpoint: `${host}/sandboxes/${sb.id}/proxy/${p}` };
  if (config.route === 'header') return { endpoint: host, headers: { 'OpenSandbox-Ingress-To': `${sb.id}-${p}` } };
  return { endpoint: `${host}/direct/${sb.id}/proxy/${p}` };
}

function snapshotState(s) {
  if (s.state === 'Creating' && Date.now() - s.created >= SNAPSHOT_MS) {
    s.transition = Date.now();
    if (s.image.startsWith('snapfail')) Object.assign(s, { state: 'Failed', reason: 'snapshot_capture_failed', message: 'docker commit failed: no space left on device' });
    else Object.assign(s, { state: 'Ready', reason: 'snapshot_ready', message: undefined });
  }
  return s.state;
}
function snapshotJson(s) {
  const status = { state: snapshotState(s), reason: s.reason, lastTransitionAt: nowIso(s.transition) };
  if (s.message) status.message = s.message;
  const o = { id: s.id, sandboxId: s.sandboxId, status, createdAt: nowIso(s.created) };
  if (s.name) o.name = s.name;
  return o;
}

function createSnapshot(req, res, sb, buf) {
  if (config.snapshots === 'unsupported')
    return err(res, 501, 'SNAPSHOT::NOT_IMPLEMENTED', 'Snapshots are not supported by the kubernetes runtime.');
  let b = {};
  if (buf.length) { b = jsonBody(req, res, buf); if (b === undefined) return; }
  if (typeof b !== 'object' || b === null || Array.isArray(b)) return detail(res, 'body must be an object');
  for (const k of Object.keys(b)) if (k !== 'name') return detail(res, `${k}: Extra inputs are not permitted`);
  if (b.name !== undefined && (typeof b.name !== 'string' || !b.name)) return detail(res, 'name must be a non-empty string');
  if (sandboxState(sb) !== 'Running')
    return err(res, 409, 'SNAPSHOT::INVALID_SOURCE_STATE', `Sandbox ${sb.id} is ${sb.state}; snapshots need a Running sandbox.`);
  const id = 'snap_' + crypto.randomBytes(8).toString('hex');
  const dir = path.join(ROOT, '_snapshots', id);
  fs.cpSync(sb.root, dir, { recursive: true, filter: (src) => !path.basename(src).startsWith('.cmd-') });
  const s = { id, sandboxId: sb.id, name: b.name, image: sb.image, dir, created: Date.now(), transition: Date.now(), state: 'Creating', reason: 'snapshot_accepted' };
  snapshots.set(id, s);
  send(res, 202, snapshotJson(s), { Location: `/v1/snapshots/${id}` });
}

function snapshotsApi(req, res, url, rest) {
  const m = req.method;
  if (rest === '/snapshots' && m === 'GET') {
    const q = url.searchParams, states = q.getAll('state').map((x) => x.toLowerCase());
    const page = +(q.get('page') || 1), size = +(q.get('pageSize') || 20);
    if (!(page >= 1) || !(size >= 1) || size > 200) return detail(res, 'invalid pagination', ['query', 'pageSize']);
    const all = [...snapshots.values()]
      .filter((x) => !q.has('sandboxId') || x.sandboxId === q.get('sandboxId'))
      .filter((x) => !states.length || states.includes(snapshotState(x).toLowerCase()))
      .sort((a, b) => b.created - a.created);
    const step = config.pageMax ? Math.min(size, config.pageMax) : size;
    const totalPages = Math.max(1, Math.ceil(all.length / step));
    return send(res, 200, { items: all.slice((page - 1) * step, page * step).map(snapshotJson),
      pagination: { page, pageSize: step, totalItems: all.length, totalPages, hasNextPage: page < totalPages } });
  }
  const mm = rest.match(/^\/snapshots\/([^/]+)$/);
  if (!mm) return err(res, 404, 'GENERAL::UNKNOWN_ERROR', 'Not Found');
  const s = snapshots.get(mm[1]);
  if (!s) return err(res, 404, 'SNAPSHOT::NOT_FOUND', `Snapshot ${mm[1]} not found.`);
  if (m === 'GET') return send(res, 200, snapshotJson(s));
  if (m === 'DELETE') {
    if (snapshotState(s) === 'Creating') return err(res, 409, 'SNAPSHOT::INVALID_STATE', `Snapshot ${s.id} is still being created.`);
    snapshots.delete(s.id);
    fs.rmSync(s.dir, { recursive: true, force: true });
    res.writeHead(204); return res.end();
  }
  err(res, 404, 'GENERAL::UNKNOWN_ERROR', 'Not Found');
}

async function lifecycle(req, res, url, rest) {
  const key = req.headers['open-sandbox-api-key'];
  if (API_KEY && !key) return err(res, 401, 'MISSING_API_KEY', 'Authentication credentials are missing. Provide API key via OPEN-SANDBOX-API-KEY header.');
  if (API_KEY && key !== API_KEY) return err(res, 401, 'INVALID_API_KEY', 'Authentication credentials are invalid. Check your API key and try again.');
  const buf = await readBody(req);
  const m = req.method;
  if (rest === '/sandboxes' && m === 'POST') {
    const b = jsonBody(req, res, buf);
    return b === undefined ? undefined : createSandbox(req, res, b);
  }
  if (rest === '/sandboxes' && m === 'GET') return listSandboxes(req, res, url);
  if (rest.startsWith('/snapshots')) return snapshotsApi(req, res, url, rest);
  const mm = rest.match(/^\/sandboxes\/([^/]+)(\/.*)?$/);
  if (!mm) return err(res, 404, 'GENERAL::UNKNOWN_ERROR', 'Not Found');
  const sb = sandboxes.get(mm[1]);
  const sub = mm[2] || '';
  if (!sb) return err(res, 404, 'DOCKER::SANDBOX_NOT_FOUND', `Sandbox ${mm[1]} not found.`);
  if (sub === '' && m === 'GET') return send(res, 200, sandboxJson(sb));
  if (sub === '' && m === 'DELETE') {
    sandboxes.delete(sb.id);
    for (const c of contexts.values()) if (c.sb === sb.id) { c.proc.kill('SIGKILL'); contexts.delete(c.id); }
    fs.rmSync(sb.root, { recursive: true, force: true });
    res.writeHead(204); return res.end();
  }
  if (sub === '/pause' && m === 'POST') {
    if (sandboxState(sb) !== 'Running') return err(res, 409, 'DOCKER::SANDBOX_NOT_RUNNING', `Sandbox ${sb.id} is not running.`);
    sb.state = 'Paused'; res.writeHead(202); return res.end();
  }
  if (sub === '/resume' && m === 'POST') {
    if (sb.state !== 'Paused') return err(res, 409, 'DOCKER::SANDBOX_NOT_PAUSED', `Sandbox ${sb.id} is not paused.`);
    sb.state = 'Running'; res.writeHead(202); return res.end();
  }
  if (sub === '/renew-expiration' && m === 'POST') {
    const b = jsonBody(req, res, buf);
    if (b === undefined) return;
    const keys = Object.keys(b || {});
    if (keys.length !== 1 || typeof b.expiresAt !== 'string' || isNaN(Date.parse(b.expiresAt)))
      return detail(res, 'expiresAt must be an RFC 3339 date-time');
    if (!sb.expires) return err(res, 409, 'DOCKER::INVALID_EXPIRATION', 'Sandbox has no expiration (manual cleanup).');
    const t = Date.parse(b.expiresAt);
    if (t <= Date.now()) return err(res, 400, 'DOCKER::INVALID_EXPIRATION', 'New expiration time must be in the future.');
    sb.expires = t;
    return send(res, 200, { expiresAt: nowIso(t) });
  }
  if (sub === '/snapshots' && m === 'POST') return createSnapshot(req, res, sb, buf);
  const ep = sub.match(/^\/endpoints\/(\d+)$/);
  if (ep && m === 'GET') return send(res, 200, endpointFor(req, sb, +ep[1], url));
  const dg = sub.match(/^\/diagnostics\/(logs|events|inspect|summary)$/);
  if (dg && m === 'GET') {
    if (url.searchParams.has('scope')) return err(res, 501, 'DIAGNOSTICS_NOT_IMPLEMENTED', 'Diagnostics scopes are not implemented by this runtime.');
    const text = { logs: `${nowIso()} execd started on :44772\n`, events: `${nowIso()} container created\n${nowIso()} container started\n`,
      inspect: `State: ${sandboxState(sb)}\nImage: ${sb.image}\n`, summary: `Sandbox ${sb.id}\nState: ${sandboxState(sb)}\nImage: ${sb.image}\n` }[dg[1]];
    return send(res, 200, text, { Deprecation: 'true' });
  }
  err(res, 404, 'GENERAL::UNKNOWN_ERROR', 'Not Found');
}

// ---------------------------------------------------------------------------------------------
// execd

function sseWrite(res, ev) {
  if (res.destroyed) return;
  if (!res.headersSent)
    res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache', Connection: 'keep-alive', 'X-Accel-Buffering': 'no' });
  const line = JSON.stringify({ ...ev, timestamp: Date.now() });
  res.write(config.sse === 'data' ? `data: ${line}\n\n` : `${line}\n\n`);
}

function lineSplitter(emit) {
  let pending = '';
  return {
    push(chunk) {
      pending += chunk.toString('utf8');
      let m;
      while ((m = pending.match(/\r\n|\n|\r/)) !== null) {
        const line = pending.slice(0, m.index);
        pending = pending.slice(m.index + m[0].length);
        emit(line === '' ? '\n' : line);
      }
    },
    flush() { if (pending) emit(pending); pending = ''; },
  };
}

function runCommand(sb, b, res, fault) {
  const id = crypto.randomBytes(16).toString('hex');
  const cwd = hostPath(sb, b.cwd || '/');
  if (!fs.existsSync(cwd) || !fs.statSync(cwd).isDirectory())
    return err(res, 400, 'INVALID_REQUEST_BODY', `invalid request, validation error working directory does not exist: ${b.cwd}`);
  const env = { PATH: process.env.PATH, HOME: hostPath(sb, '/'), ...sb.env, ...(b.envs || {}) };
  const cmd = { id, sb: sb.id, content: b.command, running: true, started: Date.now(), background: !!b.background };
  commands.set(id, cmd);
  const child = spawn('/bin/sh', ['-c', b.command], { cwd, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  cmd.child = child;
  sseWrite(res, { type: 'init', text: id });
  if (b.background) {
    cmd.logFile = path.join(sb.root, 'tmp', `.cmd-${id}.log`);
    const out = fs.openSync(cmd.logFile, 'w');
    child.stdout.on('data', (c) => fs.writeSync(out, c));
    child.stderr.on('data', (c) => fs.writeSync(out, c));
    child.on('close', (code, sig) => { fs.closeSync(out); finish(cmd, code, sig); });
    sseWrite(res, { type: 'execution_complete', execution_time: 0 });
    setTimeout(() => res.end(), GRACE_MS);
    return;
  }
  if (fault?.kind === 'silent') return; // init, then nothing at all: no pings, no end
  const ping = setInterval(() => sseWrite(res, { type: 'ping', text: 'pong' }), PING_MS);
  let emitted = 0;
  const emitLine = (type) => (text) => {
    sseWrite(res, { type, text });
    if (fault?.kind === 'cut' && ++emitted === (fault.after || 1)) {
      clearInterval(ping); // the bytes written so far get out, then the connection dies
      setTimeout(() => res.socket?.destroy(), 50);
    }
  };
  const so = lineSplitter(emitLine('stdout')), se = lineSplitter(emitLine('stderr'));
  child.stdout.on('data', (c) => so.push(c));
  child.stderr.on('data', (c) => se.push(c));
  let timer = null;
  if (b.timeout) timer = setTimeout(() => { try { process.kill(-child.pid, 'SIGKILL'); } catch { } }, b.timeout);
  child.on('close', (code, sig) => {
    clearTimeout(timer); clearInterval(ping);
    so.flush(); se.flush();
    finish(cmd, code, sig);
    if (sig) sseWrite(res, { type: 'error', error: { ename: 'CommandExecError', evalue: '-1', traceback: [sig === 'SIGTERM' ? 'signal: terminated' : 'signal: killed'] } });
    else if (code !== 0) sseWrite(res, { type: 'error', error: { ename: 'CommandExecError', evalue: String(code), traceback: [`exit status ${code}`] } });
    else sseWrite(res, { type: 'execution_complete', execution_time: Date.now() - cmd.started });
    setTimeout(() => res.end(), GRACE_MS);
  });
  res.on('close', () => clearInterval(ping));
}

function finish(cmd, code, sig) {
  cmd.running = false;
  cmd.finished = Date.now();
  cmd.exit_code = sig ? -1 : code;
  if (sig) cmd.error = `signal: ${sig === 'SIGTERM' ? 'terminated' : 'killed'}`;
}

function parseMultipart(buf, ctype) {
  const bm = /boundary=(?:"([^"]+)"|([^;]+))/.exec(ctype || '');
  if (!bm) return null;
  const boundary = Buffer.from('--' + (bm[1] || bm[2]));
  const parts = [];
  let pos = buf.indexOf(boundary);
  while (pos >= 0) {
    pos += boundary.length;
    if (buf.slice(pos, pos + 2).toString() === '--') break;
    pos += 2; // CRLF
    const hend = buf.indexOf('\r\n\r\n', pos);
    if (hend < 0) return null;
    const head = buf.slice(pos, hend).toString('utf8');
    const next = buf.indexOf(boundary, hend + 4);
    if (next < 0) return null;
    const content = buf.slice(hend + 4, next - 2);
    const disp = /content-disposition:([^\r\n]*)/i.exec(head)?.[1] || '';
    parts.push({ name: /name="([^"]*)"/.exec(disp.replace(/filename="[^"]*"/, ''))?.[1], filename: /filename="([^"]*)"/.exec(disp)?.[1], content });
    pos = next;
  }
  return parts;
}

function upload(sb, req, res, buf) {
  const parts = parseMultipart(buf, req.headers['content-type']);
  if (!parts) return err(res, 400, 'INVALID_FILE', 'error parsing multipart form');
  // Go's multipart parser treats a part without a filename as a plain field, not a file.
  const metas = parts.filter((p) => p.name === 'metadata' && p.filename !== undefined);
  const files = parts.filter((p) => p.name === 'file' && p.filename !== undefined);
  if (!metas.length) return err(res, 400, 'INVALID_FILE_METADATA', 'metadata file is missing');
  if (!files.length) return err(res, 400, 'INVALID_FILE_CONTENT', 'file is missing');
  if (metas.length !== files.length) return err(res, 400, 'INVALID_FILE', 'metadata and file counts differ');
  for (let i = 0; i < metas.length; i++) {
    let meta;
    try { meta = JSON.parse(metas[i].content.toString('utf8')); } catch { return err(res, 400, 'INVALID_FILE_METADATA', 'bad metadata JSON'); }
    if (!meta.path) return err(res, 400, 'INVALID_FILE_METADATA', 'path is empty');
    const hp = hostPath(sb, meta.path);
    fs.mkdirSync(path.dirname(hp), { recursive: true });
    fs.writeFileSync(hp, files[i].content);
    if (meta.mode) fs.chmodSync(hp, parseInt(String(meta.mode), 8));
  }
  send(res, 200, '');
}

function download(sb, req, res, url) {
  const hp = hostPath(sb, url.searchParams.get('path'));
  if (!fs.existsSync(hp) || !fs.statSync(hp).isFile()) return err(res, 404, 'FILE_NOT_FOUND', `file not found: ${url.searchParams.get('path')}`);
  const data = fs.readFileSync(hp);
  const range = req.headers.range;
  const hdr = { 'Content-Type': 'application/octet-stream', 'Content-Disposition': `attachment; filename="${path.basename(hp)}"` };
  if (range) {
    const m = /^bytes=(\d+)-(\d*)$/.exec(range);
    const a = m ? +m[1] : NaN, z = m && m[2] ? Math.min(+m[2], data.length - 1) : data.length - 1;
    if (!m || a >= data.length || a > z) return err(res, 416, 'UNKNOWN', 'invalid range');
    res.writeHead(206, { ...hdr, 'Content-Range': `bytes ${a}-${z}/${data.length}`, 'Content-Length': z - a + 1 });
    return res.end(data.slice(a, z + 1));
  }
  res.writeHead(200, { ...hdr, 'Content-Length': data.length });
  res.end(data);
}

function globRe(p) {
  return new RegExp('^' + p.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*\*/g, '\0').replace(/\*/g, '[^/]*').replace(/\?/g, '.').replace(/\0/g, '.*') + '$');
}
function walk(dir, depth, out) {
  if (depth <= 0) return;
  for (const name of fs.readdirSync(dir).sort()) {
    const p = path.join(dir, name);
    out.push(p);
    if (fs.lstatSync(p).isDirectory()) walk(p, depth - 1, out);
  }
}

// ---------------------------------------------------------------------------------------------
// execd: metrics and the code interpreter

let cpuSample = null;
function cpuUsedPct() {
  const now = os.cpus().map((c) => c.times);
  const sum = (t) => t.user + t.nice + t.sys + t.irq + t.idle;
  let pct = 0;
  if (cpuSample) {
    let busy = 0, total = 0;
    now.forEach((t, i) => { const p = cpuSample[i] || t; total += sum(t) - sum(p); busy += sum(t) - sum(p) - (t.idle - p.idle); });
    pct = total > 0 ? Math.round((busy / total) * 1000) / 10 : 0;
  }
  cpuSample = now;
  return pct;
}
function metrics() {
  const MiB = 1024 * 1024;
  return { cpu_count: os.cpus().length, cpu_used_pct: cpuUsedPct(), mem_total_mib: os.totalmem() / MiB,
    mem_used_mib: Math.round((os.totalmem() - os.freemem()) / MiB * 10) / 10, timestamp: Date.now() };
}

// A Python "kernel": one persistent python3 per context, globals kept between runs, the value of
// a trailing expression reported as the result (as Jupyter does), stdout streamed as written.
const KERNEL = String.raw`
import ast, json, os, sys, traceback
out = os.fdopen(os.dup(1), 'w', buffering=1)
def emit(**kw): out.write(json.dumps(kw) + '\n'); out.flush()
class Stream:
    def __init__(self, name): self.name = name
    def write(self, s):
        if s: emit(t=self.name, text=s)
        return len(s)
    def flush(self): pass
sys.stdout, sys.stderr = Stream('stdout'), Stream('stderr')
g, n = {'__name__': '__main__', 'display': lambda v: emit(t='result', text=str(v))}, 0
while True:
    try:
        line = sys.stdin.readline()
    except KeyboardInterrupt:
        continue
    if not line: break
    n += 1
    try:
        tree = ast.parse(json.loads(line)['code'])
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        exec(compile(tree, '<cell>', 'exec'), g)
        v = eval(compile(ast.Expression(last.value), '<cell>', 'eval'), g) if last else None
        emit(t='count', n=n)
        if v is not None: emit(t='result', text=repr(v))
        emit(t='done')
    except BaseException as e:
        emit(t='count', n=n)
        emit(t='error', ename=type(e).__name__, evalue=str(e), traceback=traceback.format_exception(e))
`;
const isJupyter = (sb) => sb.image.includes('code-interpreter');
const NO_JUPYTER = 'failed to connect to jupyter server at 127.0.0.1:44771: dial tcp 127.0.0.1:44771: connect: connection refused';
const LANGUAGES = ['python', 'java', 'go', 'typescript', 'javascript', 'bash'];

function newContext(sb, language) {
  const id = crypto.randomBytes(16).toString('hex');
  const proc = spawn('python3', ['-u', '-c', KERNEL], { cwd: sb.root, stdio: ['pipe', 'pipe', 'inherit'] });
  const ctx = { id, language, sb: sb.id, proc, busy: null };
  proc.stdout.pipe(lineSplitterStream((line) => ctx.busy?.(line)));
  proc.on('exit', () => {
    contexts.delete(id);
    ctx.busy?.(JSON.stringify({ t: 'error', ename: 'DeadKernelError', evalue: 'the kernel died', traceback: [] }));
  });
  contexts.set(id, ctx);
  return ctx;
}
function lineSplitterStream(onLine) {
  let pending = '';
  return new Writable({ write(chunk, enc, cb) {
    pending += chunk.toString('utf8');
    let i;
    while ((i = pending.indexOf('\n')) >= 0) { const l = pending.slice(0, i); pending = pending.slice(i + 1); if (l) onLine(l); }
    cb();
  } });
}

// Creating a context: Jupyter answers at once; without Jupyter execd retries for a long time.
function createContext(sb, b, res) {
  const language = b?.language || 'python';
  if (!isJupyter(sb)) {
    if (config.noJupyter === 'hang') return; // accepted, never answered (execd's retries)
    return void setTimeout(() => err(res, 500, 'RUNTIME_ERROR', `error creating context: ${NO_JUPYTER}`), 100);
  }
  if (!LANGUAGES.includes(language)) return err(res, 400, 'INVALID_REQUEST_BODY', `unsupported language ${language}`);
  if (language !== 'python') return err(res, 500, 'RUNTIME_ERROR', `the fake only has a python kernel, not ${language}`);
  const ctx = newContext(sb, language);
  send(res, 200, { id: ctx.id, language });
}

function runCode(sb, b, res) {
  if (typeof b.code !== 'string') return err(res, 400, 'INVALID_REQUEST_BODY', 'code is required');
  if (!b.context || !b.context.language) // the spec's "stateless" form: a shell command
    return runCommand(sb, { command: b.code, cwd: '/' }, res, null);
  let ctx = b.context.id ? contexts.get(b.context.id) : [...contexts.values()].find((c) => c.sb === sb.id && c.language === b.context.language);
  if (b.context.id && (!ctx || ctx.sb !== sb.id)) return err(res, 500, 'RUNTIME_ERROR', `error running code: context not found: ${b.context.id}`);
  if (!ctx) {
    if (!isJupyter(sb)) return config.noJupyter === 'hang' ? undefined : err(res, 500, 'RUNTIME_ERROR', `error running code: ${NO_JUPYTER}`);
    ctx = newContext(sb, b.context.language);
  }
  if (ctx.busy) return err(res, 500, 'RUNTIME_ERROR', 'error running code: session is busy');
  const started = Date.now();
  sseWrite(res, { type: 'init', text: ctx.id });
  const ping = setInterval(() => sseWrite(res, { type: 'ping', text: 'pong' }), PING_MS);
  const end = () => { clearInterval(ping); ctx.busy = null; setTimeout(() => res.end(), GRACE_MS); };
  ctx.busy = (line) => {
    const m = JSON.parse(line);
    if (m.t === 'stdout' || m.t === 'stderr') sseWrite(res, { type: m.t, text: m.text });
    else if (m.t === 'count') sseWrite(res, { type: 'execution_count', execution_count: m.n });
    else if (m.t === 'result') sseWrite(res, { type: 'result', results: { text: m.text } });
    else if (m.t === 'error') {
      sseWrite(res, { type: 'status', text: 'error' });
      sseWrite(res, { type: 'error', error: { ename: m.ename, evalue: m.evalue, traceback: m.traceback } });
      // Jupyter may also send execution_complete after an error: the error is authoritative
      sseWrite(res, { type: 'execution_complete', execution_time: Date.now() - started });
      end();
    } else if (m.t === 'done') {
      sseWrite(res, { type: 'execution_complete', execution_time: Date.now() - started });
      end();
    }
  };
  res.on('close', () => clearInterval(ping));
  ctx.proc.stdin.write(JSON.stringify({ code: b.code }) + '\n');
}

function codeApi(sb, req, res, rest, q, json) {
  const m = req.method;
  if (rest === '/code/context' && m === 'POST') { const b = json(); return b === undefined ? undefined : createContext(sb, b, res); }
  if (rest === '/code' && m === 'POST') { const b = json(); return b === undefined ? undefined : runCode(sb, b, res); }
  if (rest === '/code' && m === 'DELETE') {
    const id = q.get('id');
    if (!id) return err(res, 400, 'MISSING_QUERY', 'missing query parameter id');
    const ctx = contexts.get(id);
    if (!ctx || ctx.sb !== sb.id) return err(res, 500, 'RUNTIME_ERROR', `error interrupting code: context not found: ${id}`);
    if (ctx.busy) ctx.proc.kill('SIGINT');
    return send(res, 200, '');
  }
  const mine = (lang) => [...contexts.values()].filter((c) => c.sb === sb.id && (!lang || c.language === lang));
  if (rest === '/code/contexts' && m === 'GET') {
    if (!q.get('language')) return err(res, 400, 'MISSING_QUERY', 'missing query parameter language');
    return send(res, 200, mine(q.get('language')).map((c) => ({ id: c.id, language: c.language })));
  }
  if (rest === '/code/contexts' && m === 'DELETE') {
    if (!q.get('language')) return err(res, 400, 'MISSING_QUERY', 'missing query parameter language');
    for (const c of mine(q.get('language'))) { c.proc.kill('SIGKILL'); contexts.delete(c.id); }
    return send(res, 200, '');
  }
  const mm = rest.match(/^\/code\/contexts\/([^/]+)$/);
  if (mm && (m === 'GET' || m === 'DELETE')) {
    const ctx = contexts.get(mm[1]);
    if (!ctx || ctx.sb !== sb.id) return err(res, 404, 'CONTEXT_NOT_FOUND', `context ${mm[1]} not found`);
    if (m === 'GET') return send(res, 200, { id: ctx.id, language: ctx.language });
    ctx.proc.kill('SIGKILL'); contexts.delete(ctx.id);
    return send(res, 200, '');
  }
  return null;
}

async function execd(req, res, url, sb, rest, fault) {
  const buf = await readBody(req);
  const m = req.method, q = url.searchParams;
  const json = () => { try { return JSON.parse(buf.toString('utf8')); } catch { err(res, 400, 'INVALID_REQUEST_BODY', 'error parsing request, MAYBE invalid body format.'); return undefined; } };
  if (rest === '/ping') return send(res, 200, '');
  if (rest === '/metrics' && m === 'GET') return send(res, 200, metrics());
  if (rest.startsWith('/code') && codeApi(sb, req, res, rest, q, json) !== null) return;
  if (rest === '/command' && m === 'POST') {
    const b = json(); if (b === undefined) return;
    if (typeof b.command !== 'string' || !b.command) return err(res, 400, 'INVALID_REQUEST_BODY', 'command is required');
    return runCommand(sb, b, res, fault);
  }
  if (rest === '/command' && m === 'DELETE') {
    const id = q.get('id');
    if (!id) return err(res, 400, 'MISSING_QUERY', 'missing query parameter id');
    const c = commands.get(id);
    if (!c) return err(res, 500, 'RUNTIME_ERROR', 'error interruptting code context. no such session');
    if (!c.running) return err(res, 500, 'RUNTIME_ERROR', `command session ${id} is not running`);
    try { process.kill(-c.child.pid, 'SIGTERM'); } catch { }
    setTimeout(() => { try { process.kill(-c.child.pid, 'SIGKILL'); } catch { } }, 3000).unref();
    return send(res, 200, '');
  }
  let mm;
  if ((mm = rest.match(/^\/command\/status\/([^/]+)$/)) && m === 'GET') {
    const c = commands.get(mm[1]);
    if (!c) return err(res, 404, 'INVALID_REQUEST_BODY', `command ${mm[1]} not found`);
    const o = { id: c.id, content: c.content, running: c.running, started_at: nowIso(c.started) };
    if (!c.running) Object.assign(o, { exit_code: c.exit_code, finished_at: nowIso(c.finished) });
    if (c.error) o.error = c.error;
    return send(res, 200, o);
  }
  if ((mm = rest.match(/^\/command\/([^/]+)\/logs$/)) && m === 'GET') {
    const c = commands.get(mm[1]);
    if (!c || !c.background) return err(res, 400, 'INVALID_REQUEST_BODY', 'logs are available for background commands only');
    const data = fs.existsSync(c.logFile) ? fs.readFileSync(c.logFile) : Buffer.alloc(0);
    const cur = Math.min(+(q.get('cursor') || 0), data.length);
    return send(res, 200, data.slice(cur).toString('latin1'), { 'EXECD-COMMANDS-TAIL-CURSOR': String(data.length) });
  }
  if (rest === '/files/info' && m === 'GET') {
    const out = {};
    for (const p of q.getAll('path')) {
      const hp = hostPath(sb, p);
      if (!fs.existsSync(hp)) return err(res, 404, 'FILE_NOT_FOUND', `file not found: ${p}`);
      out[p] = fileInfo(sb, hp);
    }
    return send(res, 200, out);
  }
  if (rest === '/files' && m === 'DELETE') {
    for (const p of q.getAll('path')) {
      const hp = hostPath(sb, p);
      try { fs.unlinkSync(hp); } catch (e) { if (e.code !== 'ENOENT') return err(res, 500, 'RUNTIME_ERROR', e.message); }
    }
    return send(res, 200, '');
  }
  if (rest === '/files/mv' && m === 'POST') {
    const b = json(); if (b === undefined) return;
    for (const { src, dest } of b) {
      const hs = hostPath(sb, src), hd = hostPath(sb, dest);
      if (!fs.existsSync(hs)) return err(res, 404, 'FILE_NOT_FOUND', `file not found: ${src}`);
      if (fs.existsSync(hd)) return err(res, 500, 'RUNTIME_ERROR', `destination exists: ${dest}`);
      fs.mkdirSync(path.dirname(hd), { recursive: true });
      fs.renameSync(hs, hd);
    }
    return send(res, 200, '');
  }
  if (rest === '/files/permissions' && m === 'POST') {
    const b = json(); if (b === undefined) return;
    for (const [p, v] of Object.entries(b)) {
      const hp = hostPath(sb, p);
      if (!fs.existsSync(hp)) return err(res, 404, 'FILE_NOT_FOUND', `file not found: ${p}`);
      if (v.mode) fs.chmodSync(hp, parseInt(String(v.mode), 8));
    }
    return send(res, 200, '');
  }
  if (rest === '/files/search' && m === 'GET') {
    const base = hostPath(sb, q.get('path') || '/');
    if (!fs.existsSync(base)) return err(res, 404, 'FILE_NOT_FOUND', `file not found: ${q.get('path')}`);
    const re = globRe(q.get('pattern') || '**'), all = [];
    walk(base, 64, all);
    return send(res, 200, all.filter((p) => fs.lstatSync(p).isFile() && re.test(path.basename(p))).map((p) => fileInfo(sb, p)));
  }
  if (rest === '/files/replace' && m === 'POST') {
    const b = json(); if (b === undefined) return;
    const out = {};
    for (const [p, v] of Object.entries(b)) {
      if (!v.old) return err(res, 400, 'INVALID_REQUEST_BODY', 'old must not be empty');
      const hp = hostPath(sb, p);
      if (!fs.existsSync(hp)) return err(res, 404, 'FILE_NOT_FOUND', `file not found: ${p}`);
      const text = fs.readFileSync(hp, 'utf8'), parts = text.split(v.old);
      fs.writeFileSync(hp, parts.join(v.new ?? ''));
      out[p] = { replacedCount: parts.length - 1 };
    }
    return q.get('verbose') === 'true' ? send(res, 200, out) : send(res, 200, '');
  }
  if (rest === '/files/upload' && m === 'POST') return upload(sb, req, res, buf);
  if (rest === '/files/download' && m === 'GET') return download(sb, req, res, url);
  if (rest === '/directories/list' && m === 'GET') {
    const hp = hostPath(sb, q.get('path') || '/');
    if (!fs.existsSync(hp)) return err(res, 404, 'FILE_NOT_FOUND', `file not found: ${q.get('path')}`);
    if (!fs.lstatSync(hp).isDirectory()) return err(res, 400, 'INVALID_REQUEST_BODY', 'not a directory');
    const all = [];
    walk(hp, +(q.get('depth') ?? 1), all);
    return send(res, 200, all.map((p) => fileInfo(sb, p)));
  }
  if (rest === '/directories' && m === 'POST') {
    const b = json(); if (b === undefined) return;
    for (const [p, v] of Object.entries(b)) {
      const hp = hostPath(sb, p);
      fs.mkdirSync(hp, { recursive: true });
      if (v.mode) fs.chmodSync(hp, parseInt(String(v.mode), 8));
    }
    return send(res, 200, '');
  }
  if (rest === '/directories' && m === 'DELETE') {
    fs.rmSync(hostPath(sb, q.get('path')), { recursive: true, force: true });
    return send(res, 200, '');
  }
  err(res, 404, 'NOT_FOUND', `no route ${m} ${rest}`);
}

// ---------------------------------------------------------------------------------------------
// the egress sidecar (specs/egress-api.yaml) on port 18080: the policy set at create
// (networkPolicy), GET /policy, PATCH (incoming rules first, the first rule per target wins, the
// rules in force keep the targets not named), DELETE (targets). Errors are text/plain.

function egress(req, res, sb, rest, buf) {
  const text = (status, msg) => { res.writeHead(status, { 'Content-Type': 'text/plain' }); res.end(msg); };
  if (rest !== '/policy') return text(404, 'not found');
  const policy = sb.network || null;
  const status = () => ({ status: 'ok', mode: !policy ? 'allow_all' : policy.defaultAction === 'allow' ? 'allow_all' : 'deny_all',
    enforcementMode: 'dns', ...(policy ? { policy } : {}) });
  if (req.method === 'GET') return send(res, 200, status());
  let body;
  try { body = JSON.parse(buf.toString('utf8')); } catch { return text(400, 'invalid JSON body'); }
  if (!Array.isArray(body) || body.length === 0) return text(400, 'body must be a non-empty array');
  const current = policy ? policy.egress || [] : [];
  if (req.method === 'PATCH') {
    for (const r of body)
      if (!r || !['allow', 'deny'].includes(r.action) || typeof r.target !== 'string' || Object.keys(r).some((k) => !['action', 'target'].includes(k)))
        return text(400, `invalid rule ${JSON.stringify(r)}`);
    const seen = new Set(), egressRules = [];
    for (const r of [...body, ...current]) if (!seen.has(r.target)) { seen.add(r.target); egressRules.push(r); }
    sb.network = { defaultAction: policy ? policy.defaultAction || 'deny' : 'deny', egress: egressRules };
    return send(res, 200, status());
  }
  if (req.method === 'DELETE') {
    if (body.some((t) => typeof t !== 'string')) return text(400, 'targets must be strings');
    if (policy) sb.network = { ...policy, egress: current.filter((r) => !body.includes(r.target)) };
    return send(res, 200, status());
  }
  return text(405, 'method not allowed');
}

// ---------------------------------------------------------------------------------------------
// faults and routing

function takeFault(req) {
  const key = `${req.method} ${req.url}`;
  const f = faults.find((x) => key.includes(x.match) && (x.times ?? 1) > 0);
  if (!f) return null;
  f.times = (f.times ?? 1) - 1;
  f.hits = (f.hits || 0) + 1;
  return f;
}

function applyFault(req, res, f) {
  switch (f.kind) {
    case 'status': {
      const h = f.retryAfter !== undefined ? { 'Retry-After': String(f.retryAfter) } : {};
      return err(res, f.status || 500, f.code || 'FAKE::INJECTED', f.message || `injected ${f.status || 500}`, h), true;
    }
    case 'text500': return send(res, 500, 'Internal Server Error'), true;
    case 'hang': return true; // accepted, never answered
    case 'drop': return req.socket.destroy(), true;
    case 'badjson':
      res.writeHead(200, { 'Content-Type': 'application/json' });
      return res.end('{"id": "truncated'), true;
    case 'trickle': {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.write('{');
      return true; // one byte, then silence
    }
    case 'delay': return 'delay';
    case 'echo': return 'echo'; // a hostile server repeating the request (secrets: vault.c)
    default: return false; // cut, silent: handled by the command runner
  }
}

function route(url) {
  // execd reached directly (path mode), through the server proxy, or by header (header mode)
  let m = url.pathname.match(/^\/direct\/([^/]+)\/proxy\/44772(\/.*)$/) ||
          url.pathname.match(/^\/(?:v1\/)?sandboxes\/([^/]+)\/proxy\/44772(\/.*)$/);
  if (m) return { kind: 'execd', id: m[1], rest: m[2] };
  m = url.pathname.match(/^\/direct\/([^/]+)\/proxy\/18080(\/.*)$/) ||
      url.pathname.match(/^\/(?:v1\/)?sandboxes\/([^/]+)\/proxy\/18080(\/.*)$/);
  if (m) return { kind: 'egress', id: m[1], rest: m[2] };
  m = url.pathname.match(/^\/v1(\/.*)$/);
  if (m) return { kind: 'lifecycle', rest: m[1] };
  return { kind: 'other', rest: url.pathname };
}

const server = http.createServer(async (req, res) => {
  const url = new URL(req.url, 'http://x');
  res.setHeader('X-Request-ID', req.headers['x-request-id'] || crypto.randomBytes(16).toString('hex'));
  if (url.pathname.startsWith('/_')) {
    const buf = await readBody(req);
    if (url.pathname === '/_faults' && req.method === 'POST') { faults.push(...JSON.parse(buf.toString())); return send(res, 200, {}); }
    if (url.pathname === '/_log') return send(res, 200, reqlog);
    if (url.pathname === '/_reset') { faults = []; reqlog = []; Object.assign(config, { route: 'path', sse: 'raw', pageMax: 0, snapshots: '', noJupyter: '' }); return send(res, 200, {}); }
    if (url.pathname === '/_config') { Object.assign(config, JSON.parse(buf.toString())); return send(res, 200, {}); }
    if (url.pathname === '/_stats') return send(res, 200, { sandboxes: sandboxes.size, faults });
    if (url.pathname === '/_policy') { const sb = sandboxes.get(url.searchParams.get('id')); return send(res, sb ? 200 : 404, sb ? sb.network ?? null : {}); }
    return send(res, 404, {});
  }
  reqlog.push({ method: req.method, url: req.url, headers: req.headers });
  if (reqlog.length > 2000) reqlog.shift();
  const f = takeFault(req);
  if (f) {
    const r = applyFault(req, res, f);
    if (r === true) return;
    if (r === 'delay') await new Promise((ok) => setTimeout(ok, f.ms || 1000));
    if (r === 'echo') {
      // {kind: 'echo', status, prefix, violations}: the body back as text/plain after prefix,
      // and as the sl-violations header too with violations
      const body = (await readBody(req)).toString();
      const h = { 'Content-Type': 'text/plain' };
      if (f.violations) h['sl-violations'] = body.replace(/[\r\n]/g, ' ');
      res.writeHead(f.status || 400, h);
      return res.end((f.prefix || '') + body);
    }
  }
  let r = route(url);
  const ingress = req.headers['opensandbox-ingress-to'];
  if (r.kind === 'other' && ingress) {
    const m = /^(.*)-(44772|18080)$/.exec(ingress);
    if (m) r = { kind: m[2] === '18080' ? 'egress' : 'execd', id: m[1], rest: url.pathname };
  }
  if (r.kind === 'egress') {
    const sb = sandboxes.get(r.id);
    if (!sb) return err(res, 502, 'GENERAL::UNKNOWN_ERROR', 'no such sandbox behind this endpoint');
    return egress(req, res, sb, r.rest, await readBody(req));
  }
  if (r.kind === 'lifecycle') return lifecycle(req, res, url, r.rest);
  if (r.kind === 'execd') {
    const sb = sandboxes.get(r.id);
    if (!sb) return err(res, 502, 'GENERAL::UNKNOWN_ERROR', 'no such sandbox behind this endpoint');
    if (sb.state === 'Paused') return req.socket.destroy();
    return execd(req, res, url, sb, r.rest, f);
  }
  if (url.pathname === '/health') return send(res, 200, { status: 'healthy' });
  err(res, 404, 'GENERAL::UNKNOWN_ERROR', 'Not Found');
});

server.keepAliveTimeout = 30000;
server.listen(0, '127.0.0.1', () => {
  port = server.address().port;
  process.stdout.write(`listening ${port}\n`);
});
const stop = () => {
  for (const c of commands.values()) if (c.running) { try { process.kill(-c.child.pid, 'SIGKILL'); } catch { } }
  for (const c of contexts.values()) c.proc.kill('SIGKILL');
  fs.rmSync(ROOT, { recursive: true, force: true });
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
process.stdin.on('end', stop); // the test's pipe closing means the test is gone
process.stdin.resume();
