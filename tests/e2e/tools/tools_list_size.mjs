// The tools/list payload must stay compact: prints its size in bytes and fails above the budget.
//   node tools_list_size.mjs --mcpbox BIN [--budget BYTES]
import fs from 'node:fs';
import { connect, parseArgs, requireBinary, tempStateDir } from './tools_lib.mjs';

const args = parseArgs(process.argv.slice(2));
const bin = requireBinary(args.mcpbox);
const budget = Number(args.budget || 14336);
const stateDir = tempStateDir('tools-size');
const A = await connect('stdio', { bin, stateDir });
// What travels on the wire: the result of tools/list, serialized compactly.
const bytes = Buffer.byteLength(JSON.stringify(A.listed));
const sandboxTools = A.listed.tools.filter((t) => fs.existsSync(
    new URL(`../../../schemas/tools/${t.name}.json`, import.meta.url)));
const perTool = sandboxTools.map((t) => [t.name, Buffer.byteLength(JSON.stringify(t))])
    .sort((a, b) => b[1] - a[1]);
await A.close();
fs.rmSync(stateDir, { recursive: true, force: true });
console.log(`# tools/list: ${A.listed.tools.length} tools, ${bytes} bytes (budget ${budget})`);
for (const [n, b] of perTool) console.log(`#   ${n}: ${b} bytes`);
// a local-only server lists every tool: the local backend has snapshots and code contexts too
if (sandboxTools.length !== 24) { console.log(`not ok 1 - expected 24 sandbox tools, got ${sandboxTools.length}`); process.exit(1); }
// every input property is described (what a model needs to fill it in)
const bare = sandboxTools.flatMap((t) => Object.entries(t.inputSchema.properties || {})
    .filter(([, p]) => !p.description).map(([k]) => `${t.name}.${k}`));
if (bare.length) { console.log(`not ok 1 - input properties without a description: ${bare.join(', ')}`); process.exit(1); }
if (bytes > budget) { console.log(`not ok 1 - tools/list is ${bytes} bytes, over the ${budget} byte budget`); process.exit(1); }
console.log('ok 1 - tools/list within budget\n1..1');
