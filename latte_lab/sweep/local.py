"""A sweep's trials on this machine: one after another in this process, or in worker processes.

Every trial runs in the sweep's running area and is moved into place when it ends
(:func:`latte_lab.sweep.sweepdir.finish_attempt`). Worker processes never outlive the sweep: each watches its
parent and, once the parent is gone, kills everything it started (the sandbox's fork server and test
processes included) and exits. Ctrl-C or SIGTERM stops the sweep: no queued trial starts, running
trials get :data:`GRACE_SECONDS` to write their record (status ``error``, reason ``interrupted``), and
what is still alive after that is killed and recorded by the sweep itself.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable
from multiprocessing.connection import wait
from pathlib import Path

import psutil

import latte_lab.sweep.sweepdir as sweepdir
from latte_lab import rundir
from latte_lab.config import TrialConfig
from latte_lab.errors import DataError, LatteError
from latte_lab.models.keys import redact

GRACE_SECONDS = 3.0  # after Ctrl-C, running trials may finish writing their record this long before they are killed
WATCHDOG_SECONDS = 0.25  # how often a worker checks that its parent is alive
POLL_SECONDS = 0.5  # the parent looks at its workers at least this often
JOIN_SECONDS = 5.0  # an idle worker told to stop exits well within this
EXIT_ORPHANED = 3  # exit status of a worker whose parent died
MAX_LOST_WORKERS = 8  # idle workers that may die (and be replaced) before the sweep gives up

INTERRUPTED_ERROR = "interrupted by the user"


class Interrupted(KeyboardInterrupt):
    """A trial stopped by Ctrl-C or SIGTERM; ``row`` is the row of its recorded attempt (or None)."""

    def __init__(self, message: str = "interrupted", row: dict | None = None):
        super().__init__(message)
        self.row = row


class SweepTerminated(KeyboardInterrupt):
    """SIGTERM reached the sweep's own process: it stops as on Ctrl-C."""


# --- one attempt ---------------------------------------------------------------------------------------------

def run_attempt(cfg: TrialConfig, out: Path) -> dict:
    """Runs one trial in the running area of ``out``, moves it into place, returns its row.

    An interrupt (Ctrl-C, SIGTERM) moves the partial record into place as an attempt and raises
    :class:`Interrupted` carrying its row; an error that stops the trial moves it into place too (status
    ``error``), then is raised. One that arrives once the trial has ended (its record complete)
    waits until the trial is in place, then raises :class:`Interrupted` carrying the finished trial's row.
    """
    from latte_lab.trial import run_trial

    running = sweepdir.running_dir(out)
    try:
        res = run_trial(cfg, runs_dir=running, run_name=cfg.trial_id)  # a trial, or a fork (latte_lab.forking)
        with _stops_held():  # the rename and the row's new run_dir, both or neither
            final = sweepdir.finish_attempt(res.run_dir, out, cfg.trial_id)
    except KeyboardInterrupt as exc:
        row = settle_attempt(cfg, out, INTERRUPTED_ERROR, reason="interrupted")
        raise Interrupted(str(exc) or INTERRUPTED_ERROR, row) from None
    except Exception as exc:  # it could not start, or not complete its record: its attempt is put in place
        if (running / cfg.trial_id).is_dir():
            settle_attempt(cfg, out, redact(f"the trial failed: {type(exc).__name__}: {exc}"))
        raise
    row = dict(res.row)
    row["run_dir"] = str(final)
    return row


@contextlib.contextmanager
def _stops_held():
    """SIGINT and SIGTERM wait (in the main thread; elsewhere they are not delivered to Python code anyway)
    until the block is done; one that arrived meanwhile is handled as the block ends."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def settle_attempt(cfg: TrialConfig, out: Path, error: str, *, reason: str = "error") -> dict | None:
    """The row of a trial whose runner stopped without reporting: its attempt in the running area is
    recorded (``error`` and ``reason`` when it wrote no result.json) and moved into place; if it was
    moved already, the row found there."""
    path = sweepdir.running_dir(out) / cfg.trial_id
    if path.is_dir():
        if not (path / rundir.RESULT_FILE).exists():
            sweepdir.mark_failed(path, error, reason=reason)
        path = sweepdir.finish_attempt(path, out, cfg.trial_id)
    else:
        attempts = sorted(out.glob(f"{cfg.trial_id}{sweepdir.FAILED_INFIX}*"), key=lambda p: sweepdir.attempt_of(p.name)[1])
        path = out / cfg.trial_id if (out / cfg.trial_id).is_dir() else (attempts[-1] if attempts else None)
    if path is None:
        return None
    try:
        return rundir.read_result(path)["row"]
    except DataError:
        return None


def run_serial(todo: list[TrialConfig], out: Path, on_row: Callable[[dict], None],
               may_start: Callable[[], str | None]) -> str | None:
    """Runs the trials one after another in this process; returns why it stopped early, or None."""
    for cfg in todo:
        why = may_start()
        if why is not None:
            return why
        try:
            row = run_attempt(cfg, out)
        except KeyboardInterrupt as exc:  # Interrupted, or a Ctrl-C just as run_attempt returned
            row = _row_of_stopped(cfg, out, exc)
            if row is not None:
                on_row(row)
            return "interrupted"
        on_row(row)
    return None


def _row_of_stopped(cfg: TrialConfig, out: Path, exc: KeyboardInterrupt) -> dict | None:
    """The row of a trial an interrupt stopped: the one :class:`Interrupted` carries, else (the interrupt
    came after run_attempt's own handling) the trial's record, settled where it is."""
    row = getattr(exc, "row", None)
    return row if row is not None else settle_attempt(cfg, out, INTERRUPTED_ERROR, reason="interrupted")


# --- worker processes ----------------------------------------------------------------------------------------

def kill_tree(pid: int, *, include_root: bool = True) -> None:
    """SIGKILLs ``pid``'s descendants (twice over, for what they start meanwhile) and, optionally, ``pid``."""
    try:
        root = psutil.Process(pid)
    except psutil.Error:
        return
    for _ in range(2):
        try:
            procs = root.children(recursive=True)
        except psutil.Error:
            procs = []
        for proc in procs:
            with contextlib.suppress(psutil.Error):
                proc.kill()
    if include_root:
        with contextlib.suppress(psutil.Error):
            root.kill()


def _watch_parent(parent_pid: int) -> None:
    """In a worker: once the parent is gone, kill what this worker started and exit."""
    def watch():
        while True:
            time.sleep(WATCHDOG_SECONDS)
            if os.getppid() != parent_pid:
                kill_tree(os.getpid(), include_root=False)
                os._exit(EXIT_ORPHANED)

    threading.Thread(target=watch, name="latte-sweep-watchdog", daemon=True).start()


def _stop_worker(signum, frame):
    raise Interrupted("stopped by the sweep")


def _worker_main(conn, parent_pid: int, out: str, init, initargs, settings) -> None:
    _watch_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C in a terminal reaches the whole group: the parent decides
    signal.signal(signal.SIGTERM, _stop_worker)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        try:
            if init is not None:
                init(*initargs)
        except Exception as exc:  # noqa: BLE001 - e.g. a registered team's module does not import here
            conn.send(("failed", None, _portable(exc)))
            return
        with settings.applied():
            while True:
                payload = conn.recv()
                if payload is None:
                    break
                cfg = TrialConfig.model_validate_json(payload)
                try:
                    row = run_attempt(cfg, Path(out))
                except Interrupted as exc:
                    conn.send(("stopped", cfg.trial_id, _row_of_stopped(cfg, Path(out), exc)))
                    break
                except Exception as exc:  # noqa: BLE001 - the trial could not start: the parent reports it
                    conn.send(("failed", cfg.trial_id, _portable(exc)))
                    continue
                conn.send(("row", cfg.trial_id, row))
    except (KeyboardInterrupt, EOFError, OSError):
        pass
    finally:
        from latte_lab.sandbox import Sandbox

        with contextlib.suppress(Exception):  # multiprocessing skips atexit in its children: close them here
            Sandbox.close_all()  # the fork servers, the kept sandboxes, the staging directories
        kill_tree(os.getpid(), include_root=False)
        conn.close()


def _portable(exc: Exception) -> Exception:
    """``exc`` if it survives pickling, else a LatteError with its message."""
    import pickle

    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001 - any pickling failure
        return LatteError(f"{type(exc).__name__}: {exc}")


class _Worker:
    def __init__(self, ctx, out: Path, init, initargs, settings):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_main, args=(child, os.getpid(), str(out), init, initargs, settings),
                                name="latte-sweep-worker", daemon=True)
        # a Ctrl-C or SIGTERM arriving while the worker starts waits until it has installed its handlers
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        try:
            self.proc.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
            child.close()
        self.trial: TrialConfig | None = None


class LocalPool:
    """``n`` worker processes running the trials of one sweep; see the module docstring."""

    def __init__(self, n: int, out: Path, settings):
        from latte_lab.registry import pool_options

        options = pool_options()  # the workers must know teams and tasks registered here, notebook cells too
        self.ctx = options.get("mp_context") or multiprocessing.get_context()
        self.init, self.initargs = options.get("initializer"), options.get("initargs", ())
        self.n, self.out, self.settings = n, out, settings
        self.workers: list[_Worker] = []

    def _spawn(self) -> _Worker:
        worker = _Worker(self.ctx, self.out, self.init, self.initargs, self.settings)
        self.workers.append(worker)
        return worker

    def run(self, todo: list[TrialConfig], on_row: Callable[[dict], None],
            may_start: Callable[[], str | None]) -> str | None:
        """Runs ``todo``; returns why it stopped early (``interrupted`` or a budget message) or None."""
        queue = deque(todo)
        failure: Exception | None = None
        stopped: str | None = None
        lost = 0  # workers that died idle: a few are bad luck, many are a machine that cannot run them
        try:
            while True:
                alive = [w for w in self.workers if w.trial is not None or w.proc.is_alive()]
                lost += len(self.workers) - len(alive)
                self.workers = alive
                if lost > MAX_LOST_WORKERS and failure is None:
                    failure = LatteError(f"{lost} sweep worker processes exited before running a trial; is the "
                                         "machine out of memory or processes? try a smaller n_jobs")
                    queue.clear()
                idle = sum(1 for w in self.workers if w.trial is None)
                while failure is None and idle < len(queue) and len(self.workers) < self.n:
                    self._spawn()
                    idle += 1
                for worker in [w for w in self.workers if w.trial is None and w.proc.is_alive()]:
                    if not queue or failure is not None:
                        break
                    why = may_start()
                    if why is not None:
                        stopped = why
                        queue.clear()
                        break
                    worker.trial = queue.popleft()
                    try:
                        worker.conn.send(worker.trial.model_dump_json())
                    except OSError:  # it died while idle: the trial never reached it
                        queue.appendleft(worker.trial)
                        worker.trial = None
                        worker.proc.join(1)
                busy = [w for w in self.workers if w.trial is not None]
                if not busy:
                    break
                wait([w.conn for w in busy] + [w.proc.sentinel for w in busy], timeout=POLL_SECONDS)
                for worker in busy:
                    failure = self._collect(worker, on_row, queue) or failure
        except KeyboardInterrupt:
            stopped = "interrupted"
            self._interrupt(on_row)
        finally:
            self._shutdown()
        if failure is not None:
            raise failure
        return stopped

    def _collect(self, worker: _Worker, on_row, queue) -> Exception | None:
        """Takes what ``worker`` reported, or settles its trial if it died; returns a failure to raise."""
        if worker.conn.poll():
            try:
                kind, _trial_id, data = worker.conn.recv()
            except (EOFError, OSError):
                kind, data = "died", None
        elif not worker.proc.is_alive():
            kind, data = "died", None
        else:
            return None
        cfg, worker.trial = worker.trial, None
        if kind in ("row", "stopped"):
            if data is not None:
                on_row(data)
            return None
        if kind == "failed":  # the trial could not start, or could not complete it (run_attempt put it in place)
            queue.clear()
            return data
        # the process died without reporting (killed, out of memory, a crash in native code)
        worker.proc.join(1)
        row = settle_attempt(cfg, self.out, f"the worker process running this trial died (exit status "
                                            f"{worker.proc.exitcode}); its partial record is kept")
        if row is not None:
            on_row(row)
        self.workers.remove(worker)
        if queue:
            self._spawn()
        return None

    def _interrupt(self, on_row) -> None:
        """Stops the running trials: SIGTERM, a grace period to write their records, then SIGKILL."""
        previous = signal.getsignal(signal.SIGINT)
        in_main = threading.current_thread() is threading.main_thread()
        if in_main:
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the clean-up short
        try:
            for worker in self.workers:
                if worker.trial is not None and worker.proc.is_alive():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(worker.proc.pid, signal.SIGTERM)
            deadline = time.monotonic() + GRACE_SECONDS
            while time.monotonic() < deadline:
                busy = [w for w in self.workers if w.trial is not None]
                if not busy:
                    break
                wait([w.conn for w in busy] + [w.proc.sentinel for w in busy], timeout=0.1)
                for worker in busy:
                    self._collect(worker, on_row, deque())
            for worker in [w for w in self.workers if w.trial is not None]:
                kill_tree(worker.proc.pid)
                worker.proc.join(JOIN_SECONDS)
                cfg, worker.trial = worker.trial, None
                row = settle_attempt(cfg, self.out, INTERRUPTED_ERROR, reason="interrupted")
                if row is not None:
                    on_row(row)
        finally:
            if in_main:
                signal.signal(signal.SIGINT, previous)

    def _shutdown(self) -> None:
        shutdown_workers(self.workers)


def shutdown_workers(workers: list) -> None:
    """Ask each worker process (``.proc``, ``.conn``) to stop, wait up to JOIN_SECONDS in all, kill the tree of any
    still running, close their pipes and empty ``workers``: the end of a local pool and of an in-flight pool."""
    for worker in workers:
        with contextlib.suppress(OSError, ValueError):
            worker.conn.send(None)
    deadline = time.monotonic() + JOIN_SECONDS
    for worker in workers:
        worker.proc.join(max(0.0, deadline - time.monotonic()))
        if worker.proc.is_alive():
            kill_tree(worker.proc.pid)
            worker.proc.join(1)
        with contextlib.suppress(OSError):
            worker.conn.close()
    workers.clear()


@contextlib.contextmanager
def sigterm_stops_the_sweep():
    """While a sweep runs in the main thread, SIGTERM stops it as Ctrl-C does (SweepTerminated)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)

    def on_sigterm(signum, frame):
        raise SweepTerminated("terminated by SIGTERM")

    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class SweepSettings:
    """What every process of a sweep shares: rate limits, the pacing state, the sweep's budget.

    Picklable (a worker process or a Ray task receives it); :meth:`applied` sets it in the process for
    the duration of a ``with`` block.
    """

    def __init__(self, limits: dict, state, budget):
        self.limits, self.state, self.budget = limits, state, budget

    @contextlib.contextmanager
    def applied(self):
        from latte_lab.models import budget, ratelimit

        with ratelimit.using(self.limits, state=self.state), budget.using_sweep_budget(self.budget, self.state):
            yield self
