// Issue 17 point 6: the core agent loop, edit then rerun, must see the edit. replace_in_file
// changes `a - b` to `a + b` (same size) and python3 -m unittest runs at once, usually in the
// same second as the previous run that cached the module's bytecode; Python's .pyc is keyed on
// the source's mtime in whole seconds and its size, so a stale .pyc used to be run. Many rounds,
// through the TypeScript SDK client over stdio or HTTP.
//   node pyc_loop.mjs --mcpbox PATH --transport stdio|http [--rounds N]
import { parseArgs, requireBinary, sdkImport, startHttpServer, tempStateDir } from '../sdk/lib.mjs';

const { Client } = await sdkImport('client/index.js');
const { StdioClientTransport } = await sdkImport('client/stdio.js');
const { StreamableHTTPClientTransport } = await sdkImport('client/streamableHttp.js');
const args = parseArgs(process.argv.slice(2));
const bin = requireBinary(args.mcpbox);
const rounds = Number(args.rounds || 15);
const stateDir = tempStateDir('pyc');
let server = null;
const client = new Client({ name: 'pyc-loop', version: '1.0.0' }, { capabilities: {} });
if (args.transport === 'http') {
    server = await startHttpServer(bin, ['--local-pool', '0'], { stateDir });
    await client.connect(new StreamableHTTPClientTransport(new URL(server.url)));
} else {
    await client.connect(new StdioClientTransport({
        command: bin, args: ['serve', '--state-dir', stateDir, '--local-pool', '0'], stderr: 'ignore' }));
}
const tool = async (name, a) => {
    const res = await client.callTool({ name, arguments: a });
    if (res.isError) throw new Error(`${name}: ${JSON.stringify(res.content)}`);
    return res.structuredContent;
};
const id = (await tool('create_sandbox', {})).sandbox_id;
await tool('write_file', { sandbox_id: id, path: 'calc.py', content: 'def add(a, b):\n    return a - b\n' });
await tool('write_file', { sandbox_id: id, path: 'test_calc.py', content:
    'import unittest\nimport calc\n\nclass T(unittest.TestCase):\n' +
    '    def test_add(self):\n        self.assertEqual(calc.add(2, 3), 5)\n' });
const unittest = async () => (await tool('run_command', { sandbox_id: id, command: 'python3 -m unittest -q 2>&1' }));

let stale = 0;
for (let i = 0; i < rounds; i++) {
    const broken = await unittest(); // caches calc's bytecode for `a - b`
    if (broken.exit_code === 0) { stale++; console.log(`# round ${i}: the broken version passed`); }
    await tool('replace_in_file', { sandbox_id: id, path: 'calc.py', old: 'a - b', new: 'a + b' });
    const fixed = await unittest();
    if (fixed.exit_code !== 0) { stale++; console.log(`# round ${i}: the fix was not seen: ${fixed.stdout.slice(0, 200)}`); }
    await tool('replace_in_file', { sandbox_id: id, path: 'calc.py', old: 'a + b', new: 'a - b' });
}
await tool('destroy_sandbox', { sandbox_id: id });
await client.close();
if (server) await server.stop();
console.log(`${stale ? 'not ok' : 'ok'} - ${rounds} edit-then-rerun rounds over ${args.transport}, ${stale} ran stale bytecode`);
console.log('1..1');
process.exit(stale ? 1 : 0);
