// Benchmark of mcpbox's OpenSandbox API (serve --opensandbox-api) against MCP on the same server:
//   A  create + first command through the official OpenSandbox TypeScript SDK
//      (Sandbox.create: POST /v1/sandboxes, endpoints 44772 and 18080, the /ping health check;
//      then commands.run('echo hi') over execd's event stream)
//   B  the same through MCP (official MCP SDK client, Streamable HTTP): create_sandbox + run_command
//   C  one command on a running sandbox: execd POST /command (SDK commands.run, and a bare fetch)
//      against MCP run_command
// Same spec both ways: image host, cpu 1, memory 2 GiB, no network (the SDK's default limits).
//   node bench_osapi.mjs --mcpbox build/mcpbox [--n 20]
// Needs tests/node (MCP SDK) and tests/opensandbox/node (OpenSandbox SDK): install-deps.sh --test.
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../../..');
process.env.MCPBOX_NODE_MODULES ??= path.join(root, 'tests/node/node_modules');
const { startMcpbox, tempStateDir, stopAll, NODE_DIR, parseArgs } = await import(path.join(root, 'tests/opensandbox/osapi_lib.mjs'));
const { connect } = await import(path.join(root, 'tests/e2e/tools/tools_lib.mjs'));
const { ConnectionConfig, Sandbox } = await import(path.join(NODE_DIR, '@alibaba-group/opensandbox/dist/index.js'));

const args = parseArgs(process.argv.slice(2));
const N = +(args.n || 20);
const srv = await startMcpbox(args.mcpbox, { stateDir: tempStateDir('bench'), extraArgs: ['--local-pool', '2'] });
const connectionConfig = new ConnectionConfig({ domain: `127.0.0.1:${srv.port}` });
const mcp = await connect('http', { url: `${srv.base}/mcp`, name: 'bench' });
const spec = { image: 'host', networkPolicy: { defaultAction: 'deny' }, resource: { cpu: '1', memory: '2Gi' } };

async function tool(name, a) {
  const r = await mcp.client.callTool({ name, arguments: a });
  if (r.isError) throw new Error(`${name}: ${JSON.stringify(r.content)}`);
  return r.structuredContent;
}
const stats = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p) => s[Math.min(s.length - 1, Math.floor(p * s.length))];
  return { median: q(0.5), p90: q(0.9), min: s[0] };
};
const fmt = (st) => `median ${st.median.toFixed(2)} ms, p90 ${st.p90.toFixed(2)}, min ${st.min.toFixed(2)}`;
const now = () => Number(process.hrtime.bigint()) / 1e6;

async function sdkCreateRun() {
  const t0 = now();
  const sbx = await Sandbox.create({ connectionConfig, ...spec });
  const ex = await sbx.commands.run('echo hi');
  const t = now() - t0;
  if (ex.logs.stdout[0]?.text !== 'hi') throw new Error('sdk: no output');
  await sbx.kill();
  await sbx.close();
  return t;
}

async function mcpCreateRun() {
  const t0 = now();
  const s = await tool('create_sandbox', { image: 'host', cpu: 1, memory: '2g' });
  const r = await tool('run_command', { sandbox_id: s.sandbox_id, command: 'echo hi' });
  const t = now() - t0;
  if (r.stdout !== 'hi\n') throw new Error('mcp: no output');
  await tool('destroy_sandbox', { sandbox_id: s.sandbox_id });
  return t;
}

const A = [], B = [];
for (let i = 0; i < 2; i++) { await sdkCreateRun(); await mcpCreateRun(); } // warm-up
for (let i = 0; i < N; i++) { // interleaved, so drift hits both alike
  A.push(await sdkCreateRun());
  B.push(await mcpCreateRun());
}

const sbx = await Sandbox.create({ connectionConfig, ...spec });
const ep = await sbx.getEndpoint(44772);
const s = await tool('create_sandbox', { image: 'host', cpu: 1, memory: '2g' });
const C1 = [], C2 = [], C3 = [];
for (let i = 0; i < N + 2; i++) {
  let t0 = now();
  await sbx.commands.run('echo hi');
  const a = now() - t0;
  t0 = now();
  const r = await fetch(`http://${ep.endpoint}/command`, { method: 'POST', headers: { ...ep.headers, 'Content-Type': 'application/json' }, body: '{"command":"echo hi"}' });
  await r.text();
  const b = now() - t0;
  t0 = now();
  await tool('run_command', { sandbox_id: s.sandbox_id, command: 'echo hi' });
  const c = now() - t0;
  if (i >= 2) { C1.push(a); C2.push(b); C3.push(c); }
}
await sbx.kill();
await sbx.close();
await tool('destroy_sandbox', { sandbox_id: s.sandbox_id });
await mcp.close();

const a = stats(A), b = stats(B);
console.log(`N=${N} (interleaved, after 2 warm-ups each)`);
console.log(`A  OpenSandbox TS SDK  create + first command : ${fmt(a)}`);
console.log(`B  MCP                 create + first command : ${fmt(b)}`);
console.log(`   ratio A/B (median)                          : ${(a.median / b.median).toFixed(2)}x`);
console.log(`C  execd /command via the SDK (commands.run)   : ${fmt(stats(C1))}`);
console.log(`   execd /command, bare fetch                  : ${fmt(stats(C2))}`);
console.log(`   MCP run_command                             : ${fmt(stats(C3))}`);
stopAll();
process.exit(0);
