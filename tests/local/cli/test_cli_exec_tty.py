#!/usr/bin/env python3
"""`mcpbox sandbox exec -it ID -- bash` on a real terminal (issue 35): the test opens a
pseudo-terminal (python's pty module) as a person's terminal and drives the CLI through it.

- keys reach bash as typed, and the sandbox's terminal has this terminal's size (stty size);
- a window resize (TIOCSWINSZ on this side, SIGWINCH to the CLI) reaches the sandbox;
- Ctrl-C (the byte 0x03) interrupts the sandbox's foreground program, not the CLI or bash;
- `exit 7` ends the CLI with status 7, and this terminal is back in its own mode afterwards;
- without a terminal on stdin, -it is refused with a sentence that names -i.

usage: test_cli_exec_tty.py --mcpbox PATH   (exit 77 where local sandboxes cannot run)
"""
import argparse
import fcntl
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from mcpbox_cli import Cli  # noqa: E402


def set_size(fd, rows, cols):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


class Term:
    """The CLI on the slave side of a new pty; this process holds the master."""

    def __init__(self, argv, rows, cols):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            set_size(0, rows, cols)
            os.execv(argv[0], argv)
        self.seen = b""

    def send(self, data):
        os.write(self.fd, data)

    def expect(self, needle, timeout=20):
        deadline = time.time() + timeout
        while needle not in self.seen:
            left = deadline - time.time()
            assert left > 0, f"never saw {needle!r}; the terminal showed {self.seen[-600:]!r}"
            r, _, _ = select.select([self.fd], [], [], left)
            if r:
                try:
                    chunk = os.read(self.fd, 4096)
                except OSError:
                    chunk = b""
                assert chunk, f"terminal closed before {needle!r}: {self.seen[-600:]!r}"
                self.seen += chunk
        at = self.seen.index(needle) + len(needle)
        self.seen = self.seen[at:]

    def wait(self, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                os.read(self.fd, 4096)
            except OSError:
                pass
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return os.waitstatus_to_exitcode(status)
            time.sleep(0.05)
        os.kill(self.pid, signal.SIGKILL)
        raise AssertionError("the CLI did not exit")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    a = ap.parse_args()
    cli = Cli(os.path.abspath(a.mcpbox))
    try:
        sid = cli.create()
        p = subprocess.run([cli.mcpbox, "sandbox", "--state-dir", cli.state_dir, "exec", "-it",
                            sid, "--", "bash"], stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=60)
        assert p.returncode == 2 and "-i" in p.stderr and "terminal" in p.stderr, p
        t = Term([cli.mcpbox, "sandbox", "--state-dir", cli.state_dir, "exec", "-it", sid, "--",
                  "bash", "--norc", "--noprofile"], 30, 100)
        t.send(b"PS1='mbx$ '; stty size\r")
        t.expect(b"30 100")
        set_size(t.fd, 40, 120)
        os.kill(t.pid, signal.SIGWINCH)  # the kernel sends it to the foreground group; be sure
        time.sleep(0.5)
        t.send(b"stty size\r")
        t.expect(b"40 120")
        t.send(b"sleep 100; echo not-interrupted\r")
        time.sleep(1)
        t.send(b"\x03")
        t.expect(b"mbx$ ")
        t.send(b"echo status=$?\r")
        t.expect(b"status=130")
        assert b"not-interrupted" not in t.seen
        t.send(b"exit 7\r")
        code = t.wait()
        assert code == 7, f"exit status {code}, not the command's 7"
        print("exec -it: size, resize, Ctrl-C in the sandbox, exit status passed back")
        cli.rm(sid)
    finally:
        cli.close()
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
