"""Every child process the tool starts belongs to one tree that stops with the tool, on any signal.

Each long-running child starts through `popen`, `started` or `run`: on POSIX in a new session (with `terminal=True`,
the tool's group), on Windows in a new process group in a kill-on-close job object. `stop_signals` makes every stop
signal a KeyboardInterrupt (StopSignal), so one path stops the tree, writes the report and exits 130 or 128 + the
signal; a signal repeating while a tree is stopped is ignored. Design notes: docs/architecture.md.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import FrameType
from typing import IO, Literal, TypeAlias, TypedDict, TypeVar, Unpack, overload

import psutil

DEFAULT_GRACE_SECONDS = 5.0  # for 7-Zip, git, pip: each ends within milliseconds of its signal
POLL_SECONDS = 0.1  # how soon a child waited for outside the main thread sees a stop signal
CTRL_C_EXIT_CODE = 130  # 128 + SIGINT, as shells report a process Ctrl-C ended

STOP_SIGNALS: tuple[int, ...]
if sys.platform == "win32":
    STOP_SIGNALS = (signal.SIGINT, signal.SIGBREAK)
else:
    STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def signal_name(signum: int) -> str:
    """SIGTERM, SIGHUP, SIGBREAK, ... ("signal 42" for a number without a name)."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class StopSignal(KeyboardInterrupt):
    """A stop signal other than Ctrl-C arrived: SIGTERM, SIGHUP, or SIGBREAK on Windows.

    A KeyboardInterrupt, so every path that stops the child tree and writes the report for Ctrl-C does
    the same for it; only the words and the exit code (128 + the signal's number) differ."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal_name(signum))
        self.signum = signum
        self.signal_name = signal_name(signum)
        self.exit_code = 128 + signum


def stop_cause(stop: BaseException) -> tuple[str, int]:
    """What stopped the tool, in words, and its exit code: ("Ctrl-C", 130), ("SIGTERM", 143), ..."""
    if isinstance(stop, StopSignal):
        return stop.signal_name, stop.exit_code
    return "Ctrl-C", CTRL_C_EXIT_CODE


def _stop_exception(signum: int) -> KeyboardInterrupt:
    return KeyboardInterrupt() if signum == signal.SIGINT else StopSignal(signum)


def stop_signal_number(stop: BaseException) -> int | None:
    """The signal behind a stop (SIGINT for a plain KeyboardInterrupt), or None for another exception."""
    if isinstance(stop, StopSignal):
        return stop.signum
    if isinstance(stop, KeyboardInterrupt):
        return signal.SIGINT
    return None


# ------------------------------------------------------------------ the signal handlers


class _State:
    def __init__(self) -> None:
        self.signum: int | None = None  # the first stop signal of this task
        self.stopping = 0  # how many trees are being stopped right now (any thread)
        self.depth = 0  # nested stop_signals() blocks
        self.lock = threading.Lock()  # for `stopping`; never taken by the handler (it runs in the main thread)


_STATE = _State()


def _on_signal(signum: int, _frame: object) -> None:
    if _STATE.signum is not None and _STATE.stopping:
        return  # the stop is under way: a repeated signal must not cut its clean-up short
    if _STATE.signum is None:
        _STATE.signum = signum
    raise _stop_exception(signum)


def stop_requested() -> int | None:
    """The stop signal received during this task, if any (for children waited for outside the main thread)."""
    return _STATE.signum


@contextlib.contextmanager
def stop_signals() -> Iterator[None]:
    """Handle the stop signals (STOP_SIGNALS) as Ctrl-C for the block; the previous handlers come back after it.

    Only in the main thread (Python runs handlers there, and only there may they be set); a signal the
    process was started ignoring (`nohup`, a job started with `&` by a script) stays ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    outermost = _STATE.depth == 0
    previous: dict[int, Callable[[int, FrameType | None], object] | int] = {}
    if outermost:
        _STATE.signum = None
        for signum in STOP_SIGNALS:
            current = signal.getsignal(signum)
            if current == signal.SIG_IGN:
                continue
            signal.signal(signum, _on_signal)
            previous[signum] = signal.SIG_DFL if current is None else current
    _STATE.depth += 1
    try:
        yield
    finally:
        _STATE.depth -= 1
        if outermost:
            for number, handler in previous.items():
                signal.signal(number, handler)
            _STATE.signum = None


# ------------------------------------------------------------------ starting children

# A child: its pipes carry bytes, or text when it was started with text=True.
Child: TypeAlias = "subprocess.Popen[bytes] | subprocess.Popen[str]"
_Output = TypeVar("_Output", bytes, str)  # what a child's pipes carry
_Stream: TypeAlias = "int | IO[bytes] | IO[str] | None"  # subprocess.PIPE, DEVNULL, STDOUT, a file, or inherited


class ChildOptions(TypedDict, total=False):
    """What a caller may pass on to subprocess.Popen (popen, started, run, run_bounded)."""

    cwd: str | os.PathLike[str] | None
    env: Mapping[str, str] | None
    stdin: _Stream
    stdout: _Stream
    stderr: _Stream
    creationflags: int
    start_new_session: bool


_OWN_GROUP: weakref.WeakSet[Child] = weakref.WeakSet()  # children that lead their own group


@overload
def popen(
    command: Sequence[str], *, terminal: bool = False, text: Literal[False] = False, **options: Unpack[ChildOptions]
) -> subprocess.Popen[bytes]: ...
@overload
def popen(
    command: Sequence[str],
    *,
    terminal: bool = False,
    text: Literal[True],
    errors: str | None = None,
    **options: Unpack[ChildOptions],
) -> subprocess.Popen[str]: ...
def popen(
    command: Sequence[str],
    *,
    terminal: bool = False,
    text: bool = False,
    errors: str | None = None,
    **options: Unpack[ChildOptions],
) -> Child:
    """subprocess.Popen, with the child in the tool's tree (see the module's docstring).

    `terminal=True`: the child may prompt on the user's terminal (git's credential and ssh passphrase
    prompts), so on POSIX it stays in the tool's process group; it is still stopped with the tool.
    `text=True` (with `errors`, as Popen's): pipes of text. Once a stop signal has arrived, no child starts: the
    stop is raised instead."""
    signum = stop_requested()
    if signum is not None:
        raise _stop_exception(signum)
    if not terminal:
        if sys.platform == "win32":
            options["creationflags"] = options.get("creationflags", 0) | subprocess.CREATE_NEW_PROCESS_GROUP
        else:
            options["start_new_session"] = True
    process: Child
    if text:
        process = subprocess.Popen(list(command), text=True, errors=errors, **options)
    else:
        process = subprocess.Popen(list(command), **options)
    if not terminal:
        _OWN_GROUP.add(process)
    if sys.platform == "win32":
        _add_to_job(process.pid)
    return process


@contextlib.contextmanager
def _stopped_on_error(process: Child, grace_seconds: float) -> Iterator[None]:
    """`with process`, whose tree is stopped (`stop_tree`) when the block ends with an exception: a stop signal
    (the same signal is sent on), or any other (SIGTERM)."""
    with process:
        try:
            yield
        except BaseException as exc:
            stop_tree(process, grace_seconds, stop_signal_number(exc))
            raise


@contextlib.contextmanager
def started(
    command: Sequence[str],
    *,
    grace_seconds: float = DEFAULT_GRACE_SECONDS,
    terminal: bool = False,
    **options: Unpack[ChildOptions],
) -> Iterator[subprocess.Popen[bytes]]:
    """`with started(command, ...) as process:` the child, whose tree is stopped (`stop_tree`) when the block
    ends with an exception: a stop signal (the same signal is sent on), or any other (SIGTERM)."""
    process = popen(command, terminal=terminal, **options)
    with _stopped_on_error(process, grace_seconds):
        yield process


@overload
def run(
    command: Sequence[str],
    *,
    capture_output: bool = False,
    timeout: float | None = None,
    grace_seconds: float = DEFAULT_GRACE_SECONDS,
    terminal: bool = False,
    text: Literal[False] = False,
    **options: Unpack[ChildOptions],
) -> subprocess.CompletedProcess[bytes]: ...
@overload
def run(
    command: Sequence[str],
    *,
    capture_output: bool = False,
    timeout: float | None = None,
    grace_seconds: float = DEFAULT_GRACE_SECONDS,
    terminal: bool = False,
    text: Literal[True],
    errors: str | None = None,
    **options: Unpack[ChildOptions],
) -> subprocess.CompletedProcess[str]: ...
def run(
    command: Sequence[str],
    *,
    capture_output: bool = False,
    timeout: float | None = None,
    grace_seconds: float = DEFAULT_GRACE_SECONDS,
    terminal: bool = False,
    text: bool = False,
    errors: str | None = None,
    **options: Unpack[ChildOptions],
) -> subprocess.CompletedProcess[bytes] | subprocess.CompletedProcess[str]:
    """subprocess.run (check=False), with the child in the tool's tree: a stop signal stops its tree even when
    this runs outside the main thread (7-Zip in an extraction pool), and raises it there too. On `timeout` the
    tree is stopped and subprocess.TimeoutExpired raised, as subprocess.run does. `text`, `errors`: as popen's."""
    if capture_output:
        options["stdout"] = options["stderr"] = subprocess.PIPE
    deadline = None if timeout is None else time.monotonic() + timeout
    if text:
        process = popen(command, terminal=terminal, text=True, errors=errors, **options)
        return _waited(process, timeout, deadline, grace_seconds)
    return _waited(popen(command, terminal=terminal, **options), timeout, deadline, grace_seconds)


def _waited(
    process: subprocess.Popen[_Output], timeout: float | None, deadline: float | None, grace_seconds: float
) -> subprocess.CompletedProcess[_Output]:
    """run's wait for `process`, `timeout` seconds (until `deadline`, by time.monotonic), its tree stopped when the
    wait ends with an exception."""
    with _stopped_on_error(process, grace_seconds):
        while True:
            wait = POLL_SECONDS if deadline is None else max(0.0, min(POLL_SECONDS, deadline - time.monotonic()))
            try:
                stdout, stderr = process.communicate(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                signum = stop_requested()
                if signum is not None:
                    raise _stop_exception(signum) from None
                if deadline is not None and time.monotonic() >= deadline:
                    raise subprocess.TimeoutExpired(process.args, timeout or 0.0) from None
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


OUTPUT_LIMIT = 1 << 20  # bytes of each stream kept from its start, and as many from its end (run_bounded)
_CHUNK = 1 << 16


class _BoundedStream:
    """One pipe read to its end in a thread, keeping its first and last `limit` bytes and counting the rest, so a
    child that floods its output costs at most 2 x limit of memory."""

    def __init__(self, pipe: IO[bytes], limit: int) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0
        self._limit = limit
        self._thread = threading.Thread(target=self._read, args=(pipe,), daemon=True)
        self._thread.start()

    def _read(self, pipe: IO[bytes]) -> None:
        with contextlib.suppress(OSError, ValueError):
            while chunk := pipe.read1(_CHUNK) if hasattr(pipe, "read1") else pipe.read(_CHUNK):
                room = self._limit - len(self.head)
                if room > 0:
                    self.head += chunk[:room]
                    chunk = chunk[room:]
                self.tail += chunk
                if len(self.tail) > self._limit:
                    self.dropped += len(self.tail) - self._limit
                    del self.tail[: len(self.tail) - self._limit]

    def text(self, seconds: float) -> str:
        """What was kept, once the pipe closed (or `seconds` passed: a writer outlived the tree's stop)."""
        self._thread.join(seconds)
        gap = f"\n[... {self.dropped} bytes not kept ...]\n" if self.dropped else ""
        return self.head.decode("utf-8", "replace") + gap + self.tail.decode("utf-8", "replace")


def run_bounded(
    command: Sequence[str],
    *,
    timeout: float,
    limit: int = OUTPUT_LIMIT,
    grace_seconds: float = DEFAULT_GRACE_SECONDS,
    merge_stderr: bool = False,
    **options: Unpack[ChildOptions],
) -> subprocess.CompletedProcess[str]:
    """Run something untrusted (an interpreter asked what it is, a tool's --version, pip, cuobjdump) in the tool's
    tree with stdin closed: each stream's first and last `limit` bytes are kept (the rest counted, never held);
    the answer is read when the child itself exits, and whatever it left running (a backgrounded grandchild that
    still holds the pipes) is stopped with its group; on `timeout` the whole tree is stopped and
    subprocess.TimeoutExpired raised; a stop signal stops the tree and is raised. Output is text (UTF-8, bad
    bytes replaced); `merge_stderr`: stderr goes into stdout, as a log shows them (stderr is then "")."""
    options["stdin"] = subprocess.DEVNULL
    options["stdout"] = subprocess.PIPE
    options["stderr"] = subprocess.STDOUT if merge_stderr else subprocess.PIPE
    deadline = time.monotonic() + timeout
    with started(command, grace_seconds=grace_seconds, **options) as process:
        pipes = [process.stdout] if merge_stderr else [process.stdout, process.stderr]
        streams = [_BoundedStream(pipe, limit) for pipe in pipes if pipe is not None]  # each is a pipe
        while process.poll() is None:
            signum = stop_requested()
            if signum is not None:
                raise _stop_exception(signum)
            if time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(process.args, timeout)
            time.sleep(min(POLL_SECONDS / 10, max(0.0, deadline - time.monotonic())))
        if sys.platform != "win32" and process in _OWN_GROUP:
            with contextlib.suppress(OSError):
                os.killpg(process.pid, signal.SIGKILL)  # what the child left behind in its group
        stdout, *stderr = (stream.text(grace_seconds) for stream in streams)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr[0] if stderr else "")


# ------------------------------------------------------------------ stopping a tree


def _signal_tree(process: Child, tree: list[psutil.Process], signum: int) -> bool:
    """Send the stop to the tree; whether it went to a whole process group (else the caller kills at once)."""
    grouped = process in _OWN_GROUP
    if sys.platform == "win32":
        if grouped and process.returncode is None:
            with contextlib.suppress(OSError):
                process.send_signal(signal.CTRL_BREAK_EVENT)
        return grouped
    if grouped:
        with contextlib.suppress(OSError):
            os.killpg(process.pid, signum)
    for member in tree:
        try:
            if not grouped or os.getpgid(member.pid) != process.pid:
                member.send_signal(signum)  # one outside the group (the tool's own group, or setsid) gets it too
        except (psutil.Error, OSError):
            pass
    return True


def _running(member: psutil.Process) -> bool:
    """Still running: a zombie has ended (its parent, or init, has yet to read its status)."""
    try:
        return member.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:
        return True


def _wait_gone(members: list[psutil.Process], seconds: float) -> list[psutil.Process]:
    """Wait up to `seconds` for `members` to end; those still running."""
    deadline = time.monotonic() + seconds
    while True:
        alive = [member for member in members if _running(member)]
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.01)


def stop_tree(process: Child, grace_seconds: float, signum: int | None = None) -> tuple[int, int]:
    """Stop `process` and all its descendants; (how many there were, how many had to be killed).

    POSIX: `signum` (SIGTERM when None) to the child's process group and to every descendant outside it,
    then, after `grace_seconds`, SIGKILL to whatever is left, the group included. Windows: CTRL_BREAK_EVENT
    to the child's group, then the tree is killed (what `taskkill /T /F` does). The tree is read before the
    signal, because a child whose parent died is no longer listed under it. A stop signal arriving meanwhile
    is ignored (see the module's docstring); one raised anyway cuts only the grace period short."""
    with _STATE.lock:
        _STATE.stopping += 1
    try:
        return _stop_tree(process, grace_seconds, signal.SIGTERM if signum is None else signum)
    finally:
        with _STATE.lock:
            _STATE.stopping -= 1


def _stop_tree(process: Child, grace_seconds: float, signum: int) -> tuple[int, int]:
    tree: list[psutil.Process] = []
    if process.returncode is None:  # not yet reaped, so its pid is still its own
        try:
            root = psutil.Process(process.pid)
            tree = [root, *root.children(recursive=True)]
        except psutil.Error:
            tree = []
    late: BaseException | None = None
    alive = tree
    try:
        if _signal_tree(process, tree, signum):
            alive = _wait_gone(tree, grace_seconds)
    except KeyboardInterrupt as exc:  # a signal the handlers did not hold back: kill now, then let it through
        late = exc
    for member in alive:
        with contextlib.suppress(psutil.Error):
            member.kill()
    if sys.platform != "win32" and process in _OWN_GROUP:
        with contextlib.suppress(OSError):
            os.killpg(process.pid, signal.SIGKILL)  # what is left of the group: a child whose parent died
    _wait_gone(alive, grace_seconds)
    process.wait()
    if late is not None:
        raise late
    return len(tree), len(alive)


# ------------------------------------------------------------------ Windows: the job object

_JOB: int | None = None  # the tool's job handle, made at the first child; never closed, so it closes with the tool

if sys.platform == "win32":
    import ctypes
    from ctypes import wintypes

    _KILL_ON_JOB_CLOSE = 0x2000  # JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
    _EXTENDED_LIMIT_INFORMATION = 9  # JobObjectExtendedLimitInformation
    _PROCESS_SET_QUOTA = 0x0100
    _PROCESS_TERMINATE = 0x0001

    class _IoCounters(ctypes.Structure):
        _fields_ = [
            ("ReadOperationCount", ctypes.c_ulonglong),
            ("WriteOperationCount", ctypes.c_ulonglong),
            ("OtherOperationCount", ctypes.c_ulonglong),
            ("ReadTransferCount", ctypes.c_ulonglong),
            ("WriteTransferCount", ctypes.c_ulonglong),
            ("OtherTransferCount", ctypes.c_ulonglong),
        ]

    class _BasicLimits(ctypes.Structure):
        _fields_ = [
            ("PerProcessUserTimeLimit", ctypes.c_longlong),
            ("PerJobUserTimeLimit", ctypes.c_longlong),
            ("LimitFlags", wintypes.DWORD),
            ("MinimumWorkingSetSize", ctypes.c_size_t),
            ("MaximumWorkingSetSize", ctypes.c_size_t),
            ("ActiveProcessLimit", wintypes.DWORD),
            ("Affinity", ctypes.c_size_t),
            ("PriorityClass", wintypes.DWORD),
            ("SchedulingClass", wintypes.DWORD),
        ]

    class _ExtendedLimits(ctypes.Structure):
        _fields_ = [
            ("BasicLimitInformation", _BasicLimits),
            ("IoInfo", _IoCounters),
            ("ProcessMemoryLimit", ctypes.c_size_t),
            ("JobMemoryLimit", ctypes.c_size_t),
            ("PeakProcessMemoryUsed", ctypes.c_size_t),
            ("PeakJobMemoryUsed", ctypes.c_size_t),
        ]

    _kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
    _kernel32.CreateJobObjectW.argtypes = [ctypes.c_void_p, wintypes.LPCWSTR]
    _kernel32.CreateJobObjectW.restype = wintypes.HANDLE
    _kernel32.SetInformationJobObject.argtypes = [wintypes.HANDLE, ctypes.c_int, ctypes.c_void_p, wintypes.DWORD]
    _kernel32.SetInformationJobObject.restype = wintypes.BOOL
    _kernel32.OpenProcess.argtypes = [wintypes.DWORD, wintypes.BOOL, wintypes.DWORD]
    _kernel32.OpenProcess.restype = wintypes.HANDLE
    _kernel32.AssignProcessToJobObject.argtypes = [wintypes.HANDLE, wintypes.HANDLE]
    _kernel32.AssignProcessToJobObject.restype = wintypes.BOOL
    _kernel32.CloseHandle.argtypes = [wintypes.HANDLE]
    _kernel32.CloseHandle.restype = wintypes.BOOL

    _job_lock = threading.Lock()

    def _tool_job() -> int | None:
        """The job every child goes into, made once: a job whose last handle closes ends its processes."""
        global _JOB
        with _job_lock:
            if _JOB is None:
                job = _kernel32.CreateJobObjectW(None, None)
                if not job:
                    return None
                limits = _ExtendedLimits()
                limits.BasicLimitInformation.LimitFlags = _KILL_ON_JOB_CLOSE
                if not _kernel32.SetInformationJobObject(
                    job, _EXTENDED_LIMIT_INFORMATION, ctypes.byref(limits), ctypes.sizeof(limits)
                ):
                    _kernel32.CloseHandle(job)
                    return None
                _JOB = job
            return _JOB

    def _add_to_job(pid: int) -> None:
        """Best effort: a tool already in a job that allows no nesting (before Windows 8) keeps the other
        guarantees (the group's CTRL_BREAK_EVENT, the tree killed after the grace period)."""
        job = _tool_job()
        if job is None:
            return
        handle = _kernel32.OpenProcess(_PROCESS_SET_QUOTA | _PROCESS_TERMINATE, False, pid)
        if not handle:
            return
        try:
            _kernel32.AssignProcessToJobObject(job, handle)
        finally:
            _kernel32.CloseHandle(handle)
