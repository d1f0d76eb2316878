// Sandboxes are shared between MCP and mcpbox's OpenSandbox API on one server, by owner: with
// --token T (the API key defaults to it), an MCP client sending Bearer T and an OpenSandbox
// client sending OPEN-SANDBOX-API-KEY T see the same sandboxes (another key's view is checked in
// osapi_contract.mjs); without any key (loopback), both APIs give the connecting user's
// sandboxes.
//   node osapi_shared.mjs --mcpbox path/to/mcpbox
import path from 'node:path';
import { here, check, done, parseArgs, requireTooling, startMcpbox, tempStateDir, test } from './osapi_lib.mjs';

requireTooling();
process.env.MCPBOX_NODE_MODULES ??= path.join(here, '..', 'node', 'node_modules');
const { connect } = await import('../e2e/tools/tools_lib.mjs');
const args = parseArgs(process.argv.slice(2));
const T = 'osapi-shared-' + process.pid;
const body = { image: { uri: 'host' }, entrypoint: ['tail', '-f', '/dev/null'], networkPolicy: { defaultAction: 'deny' } };

async function osb(base, method, p, key, b) {
  const headers = { 'Content-Type': 'application/json' };
  if (key) headers['OPEN-SANDBOX-API-KEY'] = key;
  const r = await fetch(`${base}/v1${p}`, { method, headers, body: b ? JSON.stringify(b) : undefined });
  const text = await r.text();
  return { status: r.status, json: text ? JSON.parse(text) : undefined };
}
async function tool(conn, name, a) {
  const r = await conn.client.callTool({ name, arguments: a });
  check(!r.isError, `${name}: ${JSON.stringify(r.content)}`);
  return r.structuredContent;
}

await test('with a token: one owner for both APIs, a wrong key refused', async () => {
  const srv = await startMcpbox(args.mcpbox, { stateDir: tempStateDir('shared'), extraArgs: ['--token', T] });
  const mcp = await connect('http', { url: `${srv.base}/mcp`, headers: { Authorization: `Bearer ${T}` }, name: 'shared' });
  try {
    const viaOsb = (await osb(srv.base, 'POST', '/sandboxes', T, body)).json.id;
    const viaMcp = (await tool(mcp, 'create_sandbox', {})).sandbox_id;
    const listed = (await tool(mcp, 'list_sandboxes', {})).sandboxes.map((s) => s.sandbox_id);
    check(listed.includes(viaOsb), `MCP lists the OpenSandbox-made ${viaOsb}: ${listed}`);
    const items = (await osb(srv.base, 'GET', '/sandboxes', T)).json.items.map((s) => s.id);
    check(items.includes(viaMcp) && items.includes(viaOsb), `OpenSandbox lists both: ${items}`);
    const r = await tool(mcp, 'run_command', { sandbox_id: viaOsb, command: 'echo from-mcp' });
    check(r.stdout === 'from-mcp\n', JSON.stringify(r));
    check((await osb(srv.base, 'GET', '/sandboxes', 'wrong')).status === 401, 'a wrong key is refused');
    check((await osb(srv.base, 'DELETE', `/sandboxes/${viaMcp}`, T)).status === 204, 'OpenSandbox deletes the MCP-made one');
    await tool(mcp, 'destroy_sandbox', { sandbox_id: viaOsb });
  } finally {
    await mcp.close();
  }
});

await test('without a key: the connecting user owns them, through both APIs', async () => {
  const srv = await startMcpbox(args.mcpbox, { stateDir: tempStateDir('shared-nokey') });
  const mcp = await connect('http', { url: `${srv.base}/mcp`, name: 'shared-nokey' });
  try {
    const id = (await osb(srv.base, 'POST', '/sandboxes', null, body)).json.id;
    const listed = (await tool(mcp, 'list_sandboxes', {})).sandboxes.map((s) => s.sandbox_id);
    check(listed.includes(id), `MCP (no token) lists ${id}: ${listed}`);
    check((await osb(srv.base, 'DELETE', `/sandboxes/${id}`, null)).status === 204, 'deleted');
  } finally {
    await mcp.close();
  }
});

await done();
