# mcpbox's Python code-interpreter driver (docs/local-backend.md, "Code contexts").
# Started in the sandbox as `python3 -c "$MCPBOX_CODE_DRIVER"`, as the sandbox's user. It reads
# requests on stdin ("run <len>\n" then <len> bytes of code) and answers on its own stdout, the
# protocol channel, in frames "<kind> <len>\n<payload>": o/e output bytes, r a result (JSON
# {"mime": {...}}), x an error (JSON {name, value, traceback}), d the end of a run (JSON
# {count, status, tag}), s the start of a run (JSON {tag}: the request's tag, so that a process
# that took the context up knows whose run the frames belong to), h hello (JSON) once ready. User code never gets that fd as its stdout: fds 1
# and 2 become pipes the driver reads and frames, sys.stdout/sys.stderr frame directly.
import os
import sys


def _driver():
    import ast
    import json
    import linecache
    import select
    import signal
    import threading

    os.environ.pop("MCPBOX_CODE_DRIVER", None)
    proto = os.dup(1)
    requests = os.fdopen(os.dup(0), "rb", buffering=0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    lock = threading.Lock()
    main_thread = threading.get_ident()
    st = {"running": False, "writing": 0, "pending": False, "count": 0, "out": None}
    # The whole output of the last run, for read_file when the tool's cap cut it.
    out_path = os.path.join(os.environ.get("TMPDIR", "/tmp"), "mcpbox-code-%d.out" % os.getpid())

    def on_sigint(signum, frame):
        if st["running"] and st["writing"] == 0:
            raise KeyboardInterrupt
        st["pending"] = st["running"]

    def write_all(data):
        view = memoryview(data)
        while view:
            n = os.write(proto, view)
            view = view[n:]

    def send(kind, payload):
        mine = threading.get_ident() == main_thread
        if mine:
            st["writing"] += 1
        try:
            with lock:
                write_all(b"%s %d\n" % (kind, len(payload)) + payload)
                if st["out"] is not None and kind in (b"o", b"e"):
                    st["out"].write(payload)
        finally:
            if mine:
                st["writing"] -= 1
        if mine and st["pending"] and st["running"] and st["writing"] == 0:
            st["pending"] = False
            raise KeyboardInterrupt

    def send_json(kind, obj):
        send(kind, json.dumps(obj, default=repr).encode())

    class Framed:
        """sys.stdout / sys.stderr: each write is a frame, in order with results."""

        def __init__(self, kind, fd):
            self.kind, self.fd = kind, fd
            self.encoding, self.errors = "utf-8", "replace"

        def write(self, s):
            data = s if isinstance(s, (bytes, bytearray)) else str(s).encode("utf-8", "replace")
            if data:
                send(self.kind, bytes(data))
            return len(s)

        def writelines(self, lines):
            for s in lines:
                self.write(s)

        def flush(self):
            pass

        def isatty(self):
            return False

        def writable(self):
            return True

        def fileno(self):
            return self.fd

        @property
        def buffer(self):
            return self

    def pump(kind, fd):
        while True:
            select.select([fd], [], [])
            with lock:
                try:
                    data = os.read(fd, 65536)
                except BlockingIOError:
                    continue
                if not data:
                    return
                write_all(b"%s %d\n" % (kind, len(data)) + data)
                if st["out"] is not None:
                    st["out"].write(data)

    pipes = []
    for kind, fd in ((b"o", 1), (b"e", 2)):
        r, w = os.pipe()
        os.set_blocking(r, False)
        os.dup2(w, fd)
        os.close(w)
        pipes.append(r)
        threading.Thread(target=pump, args=(kind, r), daemon=True).start()
    sys.stdout = sys.__stdout__ = Framed(b"o", 1)
    sys.stderr = sys.__stderr__ = Framed(b"e", 2)

    def drain():
        """Waits until what user code wrote to fds 1 and 2 so far has been framed."""
        while True:
            with lock:
                ready, _, _ = select.select(pipes, [], [], 0)
            if not ready:
                return
            threading.Event().wait(0.001)

    figures = {"shown": False}

    def figure_png(fig):
        import base64
        import io

        buf = io.BytesIO()
        fig.savefig(buf, format="png", bbox_inches="tight")
        return base64.b64encode(buf.getvalue()).decode()

    def keep_figure_as_result(value):
        """A figure left as the last expression is the result, not also a display."""
        mpl, plt = sys.modules.get("matplotlib.figure"), sys.modules.get("matplotlib.pyplot")
        if mpl is not None and plt is not None and isinstance(value, mpl.Figure):
            plt.close(value)

    def flush_figures(*args, **kwargs):
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None:
            return
        for num in plt.get_fignums():
            fig = plt.figure(num)
            send_json(b"r", {"mime": {"text/plain": repr(fig), "image/png": figure_png(fig)},
                             "display": True})
        plt.close("all")

    mime_methods = (("_repr_png_", "image/png"), ("_repr_jpeg_", "image/jpeg"),
                    ("_repr_svg_", "image/svg+xml"), ("_repr_html_", "text/html"),
                    ("_repr_markdown_", "text/markdown"), ("_repr_latex_", "text/latex"),
                    ("_repr_json_", "application/json"))

    def mime_of(obj, meth, mime):
        f = getattr(type(obj), meth, None)
        if not callable(f):
            return None
        value = f(obj)
        if isinstance(value, tuple):
            value = value[0]
        if isinstance(value, bytes) and mime.startswith("image/"):
            import base64

            value = base64.b64encode(value).decode()
        if mime == "application/json":
            json.dumps(value)
        return value

    def bundle(obj):
        b = {}
        mpl = sys.modules.get("matplotlib.figure")
        if mpl is not None and isinstance(obj, mpl.Figure):
            b["image/png"] = figure_png(obj)
        for meth, mime in mime_methods:
            try:
                value = mime_of(obj, meth, mime)
            except Exception:
                continue
            if value is not None:
                b[mime] = value
        try:
            b["text/plain"] = repr(obj)
        except Exception as e:
            b["text/plain"] = "<repr failed: %s: %s>" % (type(e).__name__, e)
        return b

    def display(*objs, **kwargs):
        for obj in objs:
            send_json(b"r", {"mime": bundle(obj), "display": True})

    import builtins

    builtins.display = display

    class InlineBackend:
        """matplotlib's backend module://mcpbox_inline: Agg, with show() sending the figures."""

        def find_spec(self, name, path=None, target=None):
            if name != "mcpbox_inline":
                return None
            import importlib.util

            return importlib.util.spec_from_loader(name, self)

        def create_module(self, spec):
            return None

        def exec_module(self, module):
            from matplotlib.backend_bases import FigureManagerBase
            from matplotlib.backends.backend_agg import FigureCanvasAgg

            module.FigureCanvas = FigureCanvasAgg
            module.FigureManager = FigureManagerBase
            module.show = flush_figures

    sys.meta_path.append(InlineBackend())
    os.environ.setdefault("MPLBACKEND", "module://mcpbox_inline")
    # Debian's matplotlib reads /etc/matplotlibrc, which the host image's generated /etc lacks.
    debian_rc = "/usr/share/matplotlib/mpl-data/matplotlibrc"
    if not os.path.exists("/etc/matplotlibrc") and os.path.exists(debian_rc):
        os.environ.setdefault("MATPLOTLIBRC", debian_rc)

    ns = {"__name__": "__main__", "__builtins__": builtins, "display": display}

    def user_frames(tb):
        """The traceback without the driver's own frames (it runs as "<string>")."""
        keep = []
        while tb is not None:
            if tb.tb_frame.f_code.co_filename != "<string>":
                keep.append(tb)
            tb = tb.tb_next
        for a, b in zip(keep, keep[1:]):
            a.tb_next = b
        if keep:
            keep[-1].tb_next = None
        return keep[0] if keep else None

    def error_json(e, tb):
        import traceback  # only when something failed: an idle context stays smaller

        tb = user_frames(tb)
        lines = []
        for part in traceback.format_exception(type(e), e, tb):
            lines.extend(part.rstrip("\n").split("\n"))
        return {"name": type(e).__name__, "value": str(e), "traceback": lines}

    def execute(code):
        st["count"] += 1
        name = "<cell %d>" % st["count"]
        linecache.cache[name] = (len(code), None, code.splitlines(True), name)
        value, status = None, "ok"
        try:
            tree = ast.parse(code, name, "exec")
            last = None
            if tree.body and isinstance(tree.body[-1], ast.Expr):
                last = compile(ast.Expression(tree.body.pop().value), name, "eval")
            body = compile(tree, name, "exec")
            st["running"] = True
            exec(body, ns)
            if last is not None:
                value = eval(last, ns)
                keep_figure_as_result(value)
            flush_figures()
        except BaseException as e:
            st["running"] = False
            status = "interrupted" if isinstance(e, KeyboardInterrupt) else "error"
            tb = e.__traceback__.tb_next if not isinstance(e, SyntaxError) else None
            send_json(b"x", error_json(e, tb))
        finally:
            st["running"] = False
            st["pending"] = False
        if value is not None:
            ns["_"] = value
            send_json(b"r", {"mime": bundle(value)})
        return status

    def read_request():
        line = requests.readline(64)
        if not line:
            return None
        words = line.split()
        size, tag = int(words[1]), words[2].decode("ascii", "replace") if len(words) > 2 else ""
        data = b""
        while len(data) < size:
            chunk = requests.read(size - len(data))
            if not chunk:
                return None
            data += chunk
        return data.decode("utf-8", "surrogateescape"), tag

    signal.signal(signal.SIGINT, on_sigint)
    send_json(b"h", {"language": "python", "version": sys.version.split()[0], "pid": os.getpid()})
    while True:
        try:
            request = read_request()
            if request is None:
                return
            code, tag = request
            send_json(b"s", {"tag": tag})
            st["out"] = open(os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600), "wb")
            status = execute(code)
            drain()
            with lock:
                st["out"].close()
                st["out"] = None
            send_json(b"d", {"count": st["count"], "status": status, "output_file": out_path,
                             "tag": tag})
        except KeyboardInterrupt:
            continue


_driver()
del _driver
