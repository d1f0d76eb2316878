// Issue 17 point 3: diagnose_sandbox shows what it promises. Through the TypeScript SDK client
// (HTTP): a non-zero exit, a timeout_seconds kill, a kill_command, a signal, and a background
// command that fails after run_command returned each leave a "command_failed" event; the summary
// lists the last failing commands with their output tail; command_id shows one command.
//   node diagnose.mjs --mcpbox PATH
import { parseArgs, requireBinary, sdkImport, sleep, startHttpServer, tempStateDir } from '../sdk/lib.mjs';

const { Client } = await sdkImport('client/index.js');
const { StreamableHTTPClientTransport } = await sdkImport('client/streamableHttp.js');
const args = parseArgs(process.argv.slice(2));
const server = await startHttpServer(requireBinary(args.mcpbox), ['--local-pool', '0'],
                                     { stateDir: tempStateDir('diagnose') });
const client = new Client({ name: 'diagnose-e2e', version: '1.0.0' }, { capabilities: {} });
await client.connect(new StreamableHTTPClientTransport(new URL(server.url)));
const tool = async (name, a) => {
    const res = await client.callTool({ name, arguments: a });
    if (res.isError) throw new Error(`${name}: ${JSON.stringify(res.content)}`);
    return res.structuredContent;
};
let failed = 0;
const check = (cond, what) => { console.log(`${cond ? 'ok' : 'not ok'} - ${what}`); if (!cond) failed++; };

const id = (await tool('create_sandbox', {})).sandbox_id;
const run = (a) => tool('run_command', { sandbox_id: id, ...a });
const exit3 = await run({ command: 'echo about to fail; exit 3' });
const timeout = await run({ command: 'echo slow start; sleep 30', timeout_seconds: 1 });
const signal = await run({ command: 'echo self-kill; kill -TERM $$' });
const victim = await run({ command: 'echo waiting; sleep 60', background: true });
await sleep(300);
await tool('kill_command', { sandbox_id: id, command_id: victim.command_id });
const late = await run({ command: 'sleep 1; echo late failure; exit 4', wait_seconds: 0 });
check(late.status === 'running', `the late one was detached (${late.status})`);
await run({ command: 'echo fine' }); // a success leaves no failure event
await sleep(2500);

const sum = await tool('diagnose_sandbox', { sandbox_id: id });
const failedCmds = sum.failed_commands ?? [];
console.log(`# ${JSON.stringify(failedCmds).slice(0, 1200)}`);
const find = (cid) => failedCmds.find((c) => c.command_id === cid);
check(find(exit3.command_id)?.exit_code === 3 && /about to fail/.test(find(exit3.command_id)?.output_tail),
      'exit 3: recorded with its exit code and output tail');
check(find(timeout.command_id)?.status === 'timed_out' && /slow start/.test(find(timeout.command_id)?.output_tail),
      'timeout_seconds kill: recorded as timed_out');
check(find(signal.command_id) && find(signal.command_id).status !== 'exited' || find(signal.command_id)?.exit_code === 143,
      'a signal: recorded');
check(find(victim.command_id)?.status === 'killed', 'kill_command of a background command: recorded as killed');
check(find(late.command_id)?.exit_code === 4 && /late failure/.test(find(late.command_id)?.output_tail),
      'a background command failing after run_command returned: recorded');
check(failedCmds.length === 5, `only failures are listed (${failedCmds.length})`);
check((sum.events ?? []).some((e) => e.kind === 'command_failed'), 'the events carry command_failed');

const one = await tool('diagnose_sandbox', { sandbox_id: id, command_id: exit3.command_id });
console.log(`# ${JSON.stringify(one).slice(0, 600)}`);
check(one.what === 'command' && one.command?.exit_code === 3 && /about to fail/.test(one.command?.output_tail) &&
      one.events?.some((e) => e.kind === 'command_failed'), 'command_id: its end, output tail and events');
await tool('destroy_sandbox', { sandbox_id: id });
await client.close();
await server.stop();
console.log('1..9');
process.exit(failed ? 1 : 0);
