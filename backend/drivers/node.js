// mcpbox's JavaScript code-interpreter driver (docs/local-backend.md, "Code contexts"). Started
// in the sandbox as `node -e "$MCPBOX_CODE_DRIVER" 3>&1 1>&2`, as the sandbox's user: fd 3 is
// the protocol channel (frames "<kind> <len>\n<payload>", see python.py), and what child
// processes write to fd 1 arrives as stderr. Requests come on stdin ("run <len>\n<code>"); each
// run is a script in this one global scope (its var, let, const and functions persist), its last
// value the result; SIGINT stops a synchronous run (breakOnSigint).
"use strict";
delete process.env.MCPBOX_CODE_DRIVER;
const fs = require("fs");
const util = require("util");
const vm = require("vm");
const PROTO = 3;
let count = 0;
let running = false;
// The whole output of the last run, for read_file when the tool's cap cut it.
const outPath = require("path").join(process.env.TMPDIR || "/tmp", `mcpbox-code-${process.pid}.out`);
let outFd = null;

function send(kind, payload) {
    const body = Buffer.isBuffer(payload) ? payload : Buffer.from(String(payload));
    const data = Buffer.concat([Buffer.from(kind + " " + body.length + "\n"), body]);
    if (outFd !== null && (kind === "o" || kind === "e")) fs.writeSync(outFd, body);
    for (let off = 0; off < data.length;) {
        try {
            off += fs.writeSync(PROTO, data, off);
        } catch (e) {
            if (e.code !== "EAGAIN") throw e;
        }
    }
}

function framed(kind) {
    return (chunk, encoding, cb) => {
        if (typeof encoding === "function") cb = encoding;
        send(kind, Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk)));
        if (typeof cb === "function") cb();
        return true;
    };
}
process.stdout.write = framed("o");
process.stderr.write = framed("e");

function bundle(value) {
    const b = { "text/plain": util.inspect(value) };
    if (value && typeof value === "object") {
        for (const mime of ["text/html", "image/png", "image/svg+xml", "application/json"])
            if (typeof value[mime] === "string") b[mime] = value[mime];
    }
    return b;
}
globalThis.display = (...objs) => {
    for (const o of objs) send("r", JSON.stringify({ mime: bundle(o), display: true }));
};

function errorJson(e) {
    const isErr = e instanceof Error || (e && typeof e.stack === "string");
    const stack = isErr ? String(e.stack).split("\n").filter((l) => !l.includes("[eval]") && !l.includes("(node:")) : [];
    return {
        name: isErr ? e.name : "Error",
        value: isErr ? e.message : util.inspect(e),
        traceback: stack,
    };
}

async function execute(code, tag) {
    send("s", JSON.stringify({ tag }));
    count += 1;
    const { O_WRONLY, O_CREAT, O_TRUNC, O_NOFOLLOW } = fs.constants;
    outFd = fs.openSync(outPath, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0o600);
    let status = "ok";
    running = true;
    try {
        let value = vm.runInThisContext(code, {
            filename: "<cell " + count + ">",
            breakOnSigint: true,
        });
        if (value && typeof value.then === "function") value = await value;
        if (value !== undefined) {
            globalThis._ = value;
            send("r", JSON.stringify({ mime: bundle(value) }));
        }
    } catch (e) {
        const interrupted = e && e.code === "ERR_SCRIPT_EXECUTION_INTERRUPTED";
        status = interrupted ? "interrupted" : "error";
        const err = interrupted
            ? { name: "KeyboardInterrupt", value: "interrupted", traceback: [] }
            : errorJson(e);
        send("x", JSON.stringify(err));
    }
    running = false;
    fs.closeSync(outFd);
    outFd = null;
    send("d", JSON.stringify({ count, status, output_file: outPath, tag }));
}

let pending = Buffer.alloc(0);
let busy = false;
async function pump() {
    if (busy) return;
    busy = true;
    for (;;) {
        const nl = pending.indexOf(10);
        if (nl < 0 || nl > 64) break;
        const words = pending.subarray(0, nl).toString().split(" ");
        const size = Number(words[1]);
        const tag = /^[0-9a-z]*$/.test(words[2] || "") ? words[2] || "" : "";
        if (pending.length < nl + 1 + size) break;
        const code = pending.subarray(nl + 1, nl + 1 + size).toString();
        pending = pending.subarray(nl + 1 + size);
        await execute(code, tag);
    }
    busy = false;
}

process.on("SIGINT", () => {});
process.stdin.on("data", (chunk) => {
    pending = Buffer.concat([pending, chunk]);
    pump();
});
process.stdin.on("end", () => process.exit(0));
send("h", JSON.stringify({ language: "javascript", version: process.version, pid: process.pid }));
