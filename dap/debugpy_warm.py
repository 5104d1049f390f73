"""tether's warm debugpy: an adapter that keeps a launcher and a debuggee
started ahead, which the next launch that matches takes.

Run as `python3 -c <debugpyAdapterMain> debugpy_warm.py adapter` in place
of `python3 -c <debugpyAdapterMain>` (adapter_debugpy.go: the bootstrap
every debugpy adapter of tether runs, which acknowledges pydevd at once
and then runs this script, or debugpy's adapter). The adapter is debugpy's own; on initialize
it starts its launcher as a cold launch would (same interpreter, launcher,
working directory, environment and stdio), but without the adapter's port:
that launcher starts the debuggee as debugpy's launcher would (same command
line up to debugpy's own arguments, environment, pipes, process group), and
the debuggee imports debugpy's server and pydevd, then both wait. A launch
whose launcher and debuggee would be started exactly so hands its
remaining arguments down the chain, and debugpy's own launcher and cli run
from there as in a cold launch; any other launch starts its own, and the
ones waiting are ended.

The launch path is debugpy's internals (adapter.launchers, launcher.debuggee,
launcher.handlers): only the versions in PRESTARTED, whose internals this
follows, get the launcher and debuggee started ahead; any other runs as the
plain adapter.
"""

import json
import os
import sys

ROLE = sys.argv[1] if len(sys.argv) > 1 else ""

# debugpy versions whose launch path this follows (Debian's python3-debugpy).
PRESTARTED = ("1.6.",)
HERE = os.path.abspath(__file__)


def _read_go(fd):
    """Reads one JSON value (the whole pipe until EOF); None when the
    writer ended without a word."""
    chunks = []
    while True:
        b = os.read(fd, 65536)
        if not b:
            break
        chunks.append(b)
    os.close(fd)
    if not chunks:
        return None
    return json.loads(b"".join(chunks).decode("utf-8"))


def _write_go(fd, value):
    """Writes value and closes fd, whatever happens; OSError (the reader
    is gone) is the caller's to handle."""
    try:
        data = json.dumps(value).encode("utf-8")
        while data:
            n = os.write(fd, data)
            data = data[n:]
    finally:
        os.close(fd)


def _site_state():
    """What an interpreter's start read that a later change would make a
    waiting one differ from a fresh one: the site directories (their .pth
    files, e.g. from pip install -e, are read at start; a user site
    directory made later is not on sys.path)."""
    import site

    dirs = []
    try:
        dirs += site.getsitepackages()
    except Exception:
        pass
    try:
        dirs.append(site.getusersitepackages())
    except Exception:
        pass
    state = []
    for d in dirs:
        try:
            st = os.stat(d)
            state.append((d, st.st_dev, st.st_ino, st.st_mtime_ns))
        except OSError:
            state.append((d, None, None, None))
    return state


def _same_dir(path):
    """Whether path is still the directory this process runs in (not one
    deleted and made again since)."""
    try:
        a, b = os.stat(path), os.stat(".")
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def adapter_main():
    # As `python -m debugpy.adapter` sees it: argv[0] the module's path.
    del sys.argv[1]
    import importlib.util
    import socket
    import subprocess

    import runpy

    import debugpy
    import debugpy.adapter  # noqa: F401

    sys.argv[0] = importlib.util.find_spec("debugpy.adapter.__main__").origin
    if not debugpy.__version__.startswith(PRESTARTED):
        runpy.run_module("debugpy.adapter", run_name="__main__", alter_sys=False)
        return
    from debugpy import launcher as launcher_pkg
    from debugpy.adapter import clients, launchers

    state = {"proc": None, "go": None, "cmd": None, "cwd": None, "env": None}
    real_popen = subprocess.Popen
    launcher_path = os.path.dirname(launcher_pkg.__file__)

    def prestart():
        # The launcher as spawn_debuggee starts it, minus the adapter's port.
        env = dict(os.environ)
        from debugpy.common import log

        if log.log_dir is not None or log.stderr.levels != {"warning", "error"}:
            return  # debugpy logging: its launchers get more environment
        r, w = os.pipe()
        os.set_inheritable(r, True)
        cmd = [sys.executable, launcher_path]
        try:
            proc = real_popen(
                [sys.executable, HERE, "launcher", str(r), launcher_path],
                env=env,
                stdin=sys.stdin,
                stdout=sys.stdout,
                stderr=sys.stderr,
                pass_fds=(r,),
            )
        except Exception:
            os.close(w)
            return
        finally:
            os.close(r)
        state.update(proc=proc, go=w, cmd=cmd, cwd=os.getcwd(), env=env)

    def end_prestarted():
        if state["go"] is not None:
            os.close(state["go"])  # EOF: the launcher ends its debuggee and exits
            state["go"] = None
        if state["proc"] is not None:
            state["proc"].wait()
            state["proc"] = None

    def popen(cmdline, cwd=None, env=None, **kwargs):
        go = state["go"]
        if (
            go is not None
            and state["proc"].poll() is None
            and list(cmdline[:2]) == state["cmd"]
            and (cwd is None or os.path.realpath(cwd) == os.path.realpath(state["cwd"]))
            and _same_dir(state["cwd"])
            and env == state["env"]
            and kwargs.get("stdin") is sys.stdin
            and kwargs.get("stdout") is sys.stdout
            and kwargs.get("stderr") is sys.stderr
        ):
            proc, state["go"], state["proc"] = state["proc"], None, None
            try:
                _write_go(go, list(cmdline[2:]))
                return proc
            except OSError:  # the launcher is gone: start one as cold
                proc.kill()
                proc.wait()
        end_prestarted()
        return real_popen(cmdline, cwd=cwd, env=env, **kwargs)

    class _Subprocess:
        def __getattr__(self, name):
            return getattr(subprocess, name)

    sub = _Subprocess()
    sub.Popen = popen
    launchers.subprocess = sub

    real_initialize = clients.Client.initialize_request

    def initialize_request(self, request):
        if state["proc"] is None:
            prestart()
        return real_initialize(self, request)

    clients.Client.initialize_request = initialize_request

    # An attach runs no launcher: the ones waiting are ended at once, not
    # kept (some 50 MB) for as long as the attached session lasts.
    real_attach = clients.Client.attach_request

    def attach_request(self, request):
        end_prestarted()
        return real_attach(self, request)

    clients.Client.attach_request = attach_request

    runpy.run_module("debugpy.adapter", run_name="__main__", alter_sys=False)


# The debuggee's start: what debugpy/__main__.py does, waiting for the rest
# of its command line before debugpy's cli runs. Compiled under the name of
# debugpy's own __main__.py, with its cli.main() call on the same line, so
# that its frame is the one a cold debuggee has: hidden by pydevd, the same
# line in a traceback.
DEBUGGEE_STUB = """\
import sys
import os
_go, _dir, _here = int(sys.argv[1]), sys.argv[2], sys.argv[0]
try:
    os.remove(os.path.join(_here, "__main__.pyc"))
    os.rmdir(_here)
except OSError:
    pass
sys.path[0] = _dir + "/../"
import debugpy  # noqa
del sys.path[0]
from debugpy.server import api, cli  # noqa
__file__ = _dir + "/__main__.py"
_chunks = []
while True:
    _b = os.read(_go, 65536)
    if not _b:
        break
    _chunks.append(_b)
os.close(_go)
if not _chunks:
    os._exit(0)
import json
sys.argv[:] = [_dir] + json.loads(b"".join(_chunks).decode("utf-8"))
del _go, _here, _chunks, _b, api, json
{pad}cli.main()
"""


def compile_stub(debugpy_dir, where):
    import py_compile

    main_py = os.path.join(debugpy_dir, "__main__.py")
    line = 0
    try:
        with open(main_py) as f:
            for i, text in enumerate(f, 1):
                if text.strip() == "cli.main()":
                    line = i
    except OSError:
        pass
    head = DEBUGGEE_STUB.format(pad="").count("\n") - 1  # lines before cli.main()
    pad = "\n" * max(0, line - 1 - head)
    src = os.path.join(where, "stub.py")
    with open(src, "w") as f:
        f.write(DEBUGGEE_STUB.format(pad=pad))
    py_compile.compile(src, cfile=os.path.join(where, "__main__.pyc"), dfile=main_py, doraise=True)
    os.remove(src)


def launcher_main():
    go_fd = int(sys.argv[2])
    launcher_dir = sys.argv[3]
    # As `python <launcher dir>` imports debugpy (launcher/__main__.py).
    sys.path[0] = launcher_dir + "/../../"
    import debugpy

    del sys.path[0]
    import locale
    import signal
    import subprocess

    from debugpy.launcher import __main__ as lmain
    from debugpy.launcher import debuggee

    try:
        locale.setlocale(locale.LC_ALL, "")
    except Exception:
        pass

    python = [sys.executable]
    if sys.version_info[:2] >= (3, 11):
        python += ["-X", "frozen_modules=off"]
    debugpy_dir = os.path.dirname(debugpy.__file__)
    prefix = python + [debugpy_dir]
    env = os.environ.copy()
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONIOENCODING"] = "utf-8"

    where = os.path.join(os.path.dirname(HERE), "debuggee-%d" % os.getpid())
    os.mkdir(where)
    compile_stub(debugpy_dir, where)

    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    dr, dw = os.pipe()

    def preexec_fn():
        # As debuggee.spawn: a process group of its own, the foreground one.
        try:
            os.setpgrp()
            old = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
            try:
                tty = os.open("/dev/tty", os.O_RDWR)
                try:
                    os.tcsetpgrp(tty, os.getpgrp())
                finally:
                    os.close(tty)
            finally:
                signal.signal(signal.SIGTTOU, old)
        except Exception:
            pass

    real_popen = subprocess.Popen
    site_then = _site_state()
    proc = real_popen(
        python + [where, str(dr), debugpy_dir],
        env=env,
        bufsize=0,
        stdout=out_w,
        stderr=err_w,
        preexec_fn=preexec_fn,
        pass_fds=(dr,),
    )
    os.close(dr)
    go_w = [dw]  # the debuggee's go pipe, until written or ended

    def end_debuggee():
        if go_w[0] is not None:
            os.close(go_w[0])
            go_w[0] = None
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.wait()

    argv = _read_go(go_fd)
    if argv is None:
        end_debuggee()
        sys.exit(0)

    pipes = [(out_r, out_w), (err_r, err_w)]
    real_pipe = os.pipe

    def pipe():
        # debuggee.spawn makes the debuggee's stdout and stderr pipes first:
        # they are the ones the waiting debuggee writes to.
        if pipes:
            return pipes.pop(0)
        return real_pipe()

    def popen(cmdline, env=None, **kwargs):
        os.pipe = real_pipe
        debuggee.subprocess = subprocess
        if (
            proc.poll() is None
            and list(cmdline[: len(prefix)]) == prefix
            and env == expected
            and kwargs.get("stdout") == out_w
            and kwargs.get("stderr") == err_w
            and kwargs.get("cwd") is None
            and _site_state() == site_then
        ):
            fd, go_w[0] = go_w[0], None
            try:
                _write_go(fd, list(cmdline[len(prefix):]))
                return proc
            except OSError:  # the debuggee is gone: start one as cold
                pass
        # Not one the waiting debuggee can be: it is ended, and this one
        # starts on fresh pipes under the numbers debuggee.spawn holds
        # (whatever the ended one wrote is not its output).
        end_debuggee()
        for r, w in ((out_r, out_w), (err_r, err_w)):
            nr, nw = real_pipe()
            os.dup2(nr, r, inheritable=False)
            os.dup2(nw, w, inheritable=False)
            os.close(nr)
            os.close(nw)
        return real_popen(cmdline, env=env, **kwargs)

    expected = env

    class _Subprocess:
        def __getattr__(self, name):
            return getattr(subprocess, name)

    sub = _Subprocess()
    sub.Popen = popen
    debuggee.subprocess = sub
    os.pipe = pipe

    sys.argv[:] = [launcher_dir] + argv
    lmain.main()


if ROLE == "adapter":
    adapter_main()
elif ROLE == "launcher":
    launcher_main()
else:
    sys.exit("usage: debugpy_warm.py adapter|launcher")
