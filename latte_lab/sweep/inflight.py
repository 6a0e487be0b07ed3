"""Real-model trials in flight as many as the provider's limits allow, not as many as the machine has cores.

A trial of a real model spends nearly all its time waiting on the network: some thirty rounds of calls of a
few seconds each. ``run_sweep(..., in_flight=N)`` (``latte-lab sweep --in-flight N``) keeps up to ``N``
trials running as threads of a few worker processes (``n_jobs``, one per CPU by default), so a laptop keeps
enough trials going to reach the provider's rate limits; the rate limiter, shared by every thread and
process, then sets the pace. A worker raises its own limit of open files as far as its trials need (about
:data:`FILES_PER_TRIAL` each), and more processes share the trials where the system's hard limit is too low
for them. What the trials run in the sandbox (scripts, test runs, the final evaluation) still takes a core
each, so those runs wait for one of as many slots as the machine has cores (:mod:`latte_lab.sandbox.slots`).

Everything else holds as in :mod:`latte_lab.sweep.local`: each trial runs in the sweep's running area and
is moved into place when it ends, so it lands exactly once whatever stops the sweep; a sweep budget starts
no new trial and stops running ones at their next model call; worker processes never outlive the sweep.
Ctrl-C or SIGTERM starts no further trial and stops the running ones at their next model call
(:mod:`latte_lab.models.stop`: a signal reaches no thread but a process's main one); each is recorded as
interrupted, by its own thread within :data:`GRACE_SECONDS` (a call already under way finishes first), or
else by the sweep after its process is killed.

A trial whose calls are over no longer counts as in flight: it waits for its final evaluation, which gives
way to the sandboxed runs of trials still at work (:mod:`latte_lab.sandbox.slots`), while another trial
starts calling in its place; at most ``N`` trials wait so. Trials started together end together, and without
this their evaluations, one core each, would leave the provider idle while they queued.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable
from multiprocessing.connection import wait
from pathlib import Path

from latte_lab.config import TrialConfig
from latte_lab.errors import ConfigError, LatteError
from latte_lab.sweep.local import (
    INTERRUPTED_ERROR,
    JOIN_SECONDS,
    MAX_LOST_WORKERS,
    POLL_SECONDS,
    Interrupted,
    _portable,
    _row_of_stopped,
    _watch_parent,
    kill_tree,
    run_attempt,
    settle_attempt,
    shutdown_workers,
)

MAX_IN_FLIGHT = 1024  # trials at once; memory is the limit (docs/concepts/real-studies.md gives the figure per trial)
GRACE_SECONDS = 20.0  # after Ctrl-C, a trial in flight gets this long to finish its call under way and its record
# Open files per trial in flight: its records, its cache connection, its HTTP connections and its sandbox's pipes
# (about 18 at the busiest, measured on the debug task with four workers), and those of the process itself.
FILES_PER_TRIAL = 24
FILES_PER_PROCESS = 256


def check_in_flight(in_flight, n_trials: int) -> int:
    """Trials to keep in flight: ``in_flight`` (1 to :data:`MAX_IN_FLIGHT`), never more than there are trials."""
    if isinstance(in_flight, bool) or not isinstance(in_flight, int) or not 1 <= in_flight <= MAX_IN_FLIGHT:
        raise ConfigError(f"in_flight must be a whole number from 1 to {MAX_IN_FLIGHT} (trials running at once); "
                          f"got {in_flight!r}")
    return max(1, min(in_flight, n_trials))


def open_files_limit() -> tuple[int, int]:
    """This process's (soft, hard) limit of open files (a large number where there is none)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    unlimited = resource.RLIM_INFINITY
    return (1 << 20 if soft == unlimited else soft), (1 << 20 if hard == unlimited else hard)


def processes_for(in_flight: int, processes: int) -> int:
    """Worker processes for ``in_flight`` trials: ``processes``, or more when the open-files limit a process may
    raise itself to (the hard limit) cannot hold that many trials each."""
    per_process = max(1, (open_files_limit()[1] - FILES_PER_PROCESS) // FILES_PER_TRIAL)
    return max(processes, math.ceil(in_flight / per_process))


def _raise_open_files(trials: int) -> None:
    """Raises this process's soft limit of open files as far as ``trials`` in flight need (never past the hard
    limit): many systems start processes at 1,024."""
    import resource

    soft, hard = open_files_limit()
    wanted = min(hard, FILES_PER_PROCESS + FILES_PER_TRIAL * trials)
    if wanted > soft:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


# --- in a worker process ---------------------------------------------------------------------------------------

def _request_stop(signum, frame):
    from latte_lab.models import stop

    stop.request(INTERRUPTED_ERROR)


def _run_one(cfg: TrialConfig, out: Path, send: Callable[[tuple], None]) -> None:
    """One trial in a thread of a worker: its row (or why it could not run) goes back to the sweep, and word when
    its calls are over and its evaluation begins."""
    from latte_lab.sandbox import slots

    slots.on_evaluation(lambda: send(("evaluating", cfg.trial_id, None)))
    try:
        row = run_attempt(cfg, out)
    except Interrupted as exc:
        send(("stopped", cfg.trial_id, _row_of_stopped(cfg, out, exc)))
    except Exception as exc:  # noqa: BLE001 - the trial could not start: the parent reports it
        send(("failed", cfg.trial_id, _portable(exc)))
    else:
        send(("row", cfg.trial_id, row))


def _worker_main(conn, parent_pid: int, out: str, init, initargs, settings, gate, trials: int) -> None:
    from latte_lab.models import stop
    from latte_lab.sandbox import slots

    _watch_parent(parent_pid)
    _raise_open_files(trials)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C in a terminal reaches the whole group: the parent decides
    signal.signal(signal.SIGTERM, _request_stop)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    threads: list[threading.Thread] = []
    send_lock = threading.Lock()

    def send(message: tuple) -> None:
        with send_lock, contextlib.suppress(OSError, ValueError):
            conn.send(message)

    try:
        try:
            if init is not None:
                init(*initargs)
            from latte_lab import tasks, teams

            tasks.names(), teams.names()  # the registries, loaded once before the threads look names up
        except Exception as exc:  # noqa: BLE001 - e.g. a registered team's module does not import here
            send(("failed", None, _portable(exc)))
            return
        with settings.applied(), slots.using(gate), stop.arming():
            while True:
                payload = conn.recv()
                if payload is None:
                    break
                cfg = TrialConfig.model_validate_json(payload)
                thread = threading.Thread(target=_run_one, args=(cfg, Path(out), send), name=f"trial-{cfg.trial_id}",
                                          daemon=True)
                thread.start()
                threads = [t for t in threads if t.is_alive()] + [thread]
            for thread in threads:
                thread.join()
    except (KeyboardInterrupt, EOFError, OSError):
        pass
    finally:
        from latte_lab.sandbox import Sandbox

        with contextlib.suppress(Exception):  # multiprocessing skips atexit in its children: close them here
            Sandbox.close_all()
        kill_tree(os.getpid(), include_root=False)
        with contextlib.suppress(OSError):
            conn.close()


# --- in the sweep's process ------------------------------------------------------------------------------------

class _Worker:
    def __init__(self, ctx, out: Path, init, initargs, settings, gate, trials: int):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_main,
                                args=(child, os.getpid(), str(out), init, initargs, settings, gate, trials),
                                name="latte-inflight-worker", daemon=True)
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        try:
            self.proc.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
            child.close()
        self.trials: dict[str, TrialConfig] = {}  # sent and not reported yet, still calling the provider
        self.finishing: dict[str, TrialConfig] = {}  # sent and not reported yet, their calls over (evaluating)

    def holds(self) -> list[TrialConfig]:
        return [*self.trials.values(), *self.finishing.values()]


class InFlightPool:
    """Up to ``in_flight`` trials at once, as threads of ``processes`` worker processes, sandboxed runs bounded
    by ``slots`` (default: this machine's cores); see the module docstring."""

    def __init__(self, in_flight: int, out: Path, settings, *, processes: int | None = None,
                 slots: int | None = None):
        import multiprocessing

        from latte_lab.registry import pool_options
        from latte_lab.sandbox.slots import SlotGate

        options = pool_options()  # the workers must know teams and tasks registered here, notebook cells too
        self.ctx = options.get("mp_context") or multiprocessing.get_context()
        self.init, self.initargs = options.get("initializer"), options.get("initargs", ())
        self.in_flight, self.out, self.settings = in_flight, out, settings
        self.processes = processes_for(2 * in_flight, max(1, min(processes or cores(), in_flight)))
        self.gate = SlotGate(slots or cores(), self.ctx)
        self.workers: list[_Worker] = []
        self.peak_in_flight = 0

    def __repr__(self) -> str:
        return f"InFlightPool({self.in_flight} in flight, {self.processes} processes, {self.gate!r})"

    def _spawn(self) -> _Worker:
        worker = _Worker(self.ctx, self.out, self.init, self.initargs, self.settings, self.gate,
                         math.ceil(2 * self.in_flight / self.processes))
        self.workers.append(worker)
        return worker

    def running(self) -> int:
        """Trials in flight: sent to a worker, and still calling the provider."""
        return sum(len(w.trials) for w in self.workers)

    def finishing(self) -> int:
        """Trials whose calls are over, evaluated or waiting for their evaluation."""
        return sum(len(w.finishing) for w in self.workers)

    def run(self, todo: list[TrialConfig], on_row: Callable[[dict], None],
            may_start: Callable[[], str | None]) -> str | None:
        """Runs ``todo``; returns why it stopped early (``interrupted`` or a budget message) or None."""
        queue = deque(todo)
        failure: Exception | None = None
        stopped: str | None = None
        lost = 0
        try:
            while True:
                alive = [w for w in self.workers if w.holds() or w.proc.is_alive()]
                lost += len(self.workers) - len(alive)
                self.workers = alive
                if lost > MAX_LOST_WORKERS and failure is None:
                    failure = LatteError(f"{lost} sweep worker processes exited before running a trial; is the "
                                         "machine out of memory or processes? try a smaller in_flight")
                    queue.clear()
                while failure is None and queue and len(self.workers) < self.processes:
                    self._spawn()
                while failure is None and queue and self.running() < self.in_flight and self.finishing() < self.in_flight:
                    ready = [w for w in self.workers if w.proc.is_alive()]
                    if not ready:
                        break
                    why = may_start()
                    if why is not None:
                        stopped = why
                        queue.clear()
                        break
                    worker = min(ready, key=lambda w: len(w.trials))
                    cfg = queue.popleft()
                    try:
                        worker.conn.send(cfg.model_dump_json())
                    except OSError:  # it died: the trial never reached it
                        queue.appendleft(cfg)
                        worker.proc.join(1)
                        break
                    worker.trials[cfg.trial_id] = cfg
                self.peak_in_flight = max(self.peak_in_flight, self.running())
                busy = [w for w in self.workers if w.holds()]
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
        """Takes everything ``worker`` reported, or settles its trials if it died; returns a failure to raise."""
        failure = None
        while True:
            try:
                if not worker.conn.poll():
                    break
                kind, trial_id, data = worker.conn.recv()
            except (EOFError, OSError):
                break
            if kind == "evaluating":  # its calls are over: another trial may start calling in its place
                if trial_id in worker.trials:
                    worker.finishing[trial_id] = worker.trials.pop(trial_id)
                continue
            cfg = (worker.trials.pop(trial_id, None) or worker.finishing.pop(trial_id, None)) if trial_id else None
            if kind in ("row", "stopped"):
                if data is not None:
                    on_row(data)
            elif kind == "failed":  # the trial could not start, or the worker could not (run_attempt put it in place)
                queue.clear()
                failure = failure or data
                if cfg is None and trial_id is None:  # the worker itself: its trials never started
                    worker.trials.clear()
                    worker.finishing.clear()
        if worker.holds() and not worker.proc.is_alive():  # died without reporting (killed, out of memory)
            worker.proc.join(1)
            for cfg in worker.holds():
                row = settle_attempt(cfg, self.out, f"the worker process running this trial died (exit status "
                                                    f"{worker.proc.exitcode}); its partial record is kept")
                if row is not None:
                    on_row(row)
            worker.trials.clear()
            worker.finishing.clear()
        return failure

    def _interrupt(self, on_row) -> None:
        """Stops the trials in flight: SIGTERM to the workers (each stops its trials at their next model call),
        a grace period to record them, then SIGKILL and the sweep records what is left."""
        previous = signal.getsignal(signal.SIGINT)
        in_main = threading.current_thread() is threading.main_thread()
        if in_main:
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the clean-up short
        try:
            for worker in self.workers:
                if worker.proc.is_alive():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(worker.proc.pid, signal.SIGTERM)
            deadline = time.monotonic() + GRACE_SECONDS
            while time.monotonic() < deadline:
                busy = [w for w in self.workers if w.holds()]
                if not busy:
                    break
                wait([w.conn for w in busy] + [w.proc.sentinel for w in busy], timeout=0.1)
                for worker in busy:
                    self._collect(worker, on_row, deque())
            for worker in [w for w in self.workers if w.holds()]:
                kill_tree(worker.proc.pid)
                worker.proc.join(JOIN_SECONDS)
                for cfg in worker.holds():
                    row = settle_attempt(cfg, self.out, INTERRUPTED_ERROR, reason="interrupted")
                    if row is not None:
                        on_row(row)
                worker.trials.clear()
                worker.finishing.clear()
        finally:
            if in_main:
                signal.signal(signal.SIGINT, previous)

    def _shutdown(self) -> None:
        shutdown_workers(self.workers)


__all__ = ["GRACE_SECONDS", "MAX_IN_FLIGHT", "InFlightPool", "check_in_flight", "cores", "open_files_limit",
           "processes_for"]
