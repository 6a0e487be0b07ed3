"""``latte-lab emulate``: a provider on this machine for rehearsing a study (:mod:`latte_lab.models.emulator`).

Without a command it serves until Ctrl-C (or until the process that started it ends), after printing the
environment a study needs to reach it. With a command after ``--`` it runs that command against it and
stops when the command ends, with the command's exit status: Ctrl-C goes to the command (a sweep records
its trials as interrupted), not to the emulator.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

REHEARSAL_CACHE = Path("~/.cache/latte_lab/rehearsal.sqlite")
"""The response cache of rehearsals: kept apart from the real one, whose keys do not say the replies came from
the emulator."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "emulate", help="a loopback provider (OpenAI and Anthropic APIs) answering from the simulated model",
        description="Serve the OpenAI and Anthropic APIs on a loopback port, answering every call with the "
        "simulated model after a latency, under rate limits (429 with Retry-After) and with server errors and "
        "dropped connections at set rates, and log every request. Rehearse a study against it before paying "
        "for it: keys, limits, retries, budget stops, Ctrl-C and resume behave as with the provider.",
        epilog="examples:\n"
        "  latte-lab emulate --latency 3 --tpm 1000000 --error-rate 0.01 --log runs/emulator.jsonl\n"
        "  latte-lab emulate --latency 3 --rpm 500 --tpm 200000 -- \\\n"
        "      latte-lab sweep --tasks debug --models openai/gpt-4o-mini --replicates 20 --in-flight 20 "
        "--out runs/rehearsal")
    p.add_argument("--port", type=int, default=0, help="port to listen on (default: 0, a free port)")
    p.add_argument("--host", default="127.0.0.1", help="loopback address to listen on: 127.0.0.1, ::1 or localhost "
                   "(default: 127.0.0.1)")
    p.add_argument("--latency", type=float, default=0.0, dest="latency_s",
                   help="median seconds per call (default: 0)")
    p.add_argument("--latency-sigma", type=float, default=0.5,
                   help="spread of the latency's logarithm (lognormal); 0 for a fixed latency (default: 0.5)")
    p.add_argument("--rpm", type=float, default=None, dest="requests_per_minute",
                   help="requests per minute before 429 (default: unlimited)")
    p.add_argument("--tpm", type=float, default=None, dest="tokens_per_minute",
                   help="tokens (prompt and reply) per minute before 429 (default: unlimited)")
    p.add_argument("--burst", type=float, default=None, dest="burst_s",
                   help="seconds of each limit that may be used at once (default: 5)")
    p.add_argument("--error-rate", type=float, default=0.0,
                   help="share of calls answered with a server error, 500 or 503 (default: 0)")
    p.add_argument("--drop-rate", type=float, default=0.0,
                   help="share of calls whose connection is closed without an answer (default: 0)")
    p.add_argument("--seed", type=int, default=0, help="seed of the latencies and faults (default: 0)")
    p.add_argument("--profile", default="default", help="simulated model profile answering (default: default)")
    p.add_argument("--log", default=None, help="append every request to this JSON-lines file (default: no file)")
    p.add_argument("--cache", default=str(REHEARSAL_CACHE),
                   help=f"response cache given to the command (default: {REHEARSAL_CACHE})")
    p.add_argument("command", nargs=argparse.REMAINDER,
                   help="a command to run against the emulator, after -- (default: none; serve until Ctrl-C)")
    p.set_defaults(func=_emulate)


def _conditions(args):
    from latte_lab.models.emulator import DEFAULT_BURST_S, Conditions

    latency_sigma = args.latency_sigma if args.latency_s > 0 else 0.0
    return Conditions(latency_s=args.latency_s, latency_sigma=latency_sigma,
                      requests_per_minute=args.requests_per_minute, tokens_per_minute=args.tokens_per_minute,
                      error_rate=args.error_rate, drop_rate=args.drop_rate,
                      burst_s=DEFAULT_BURST_S if args.burst_s is None else args.burst_s, seed=args.seed)


def describe(conditions) -> str:
    """What an emulator imposes, in a few words.

    >>> from latte_lab.models.emulator import Conditions
    >>> describe(Conditions(latency_s=3, latency_sigma=0.5, tokens_per_minute=1e6, error_rate=0.01))
    'median latency 3 s (sigma 0.5), 1,000,000 tokens per minute, 1% server errors'
    """
    parts = [f"median latency {conditions.latency_s:g} s" + (f" (sigma {conditions.latency_sigma:g})"
                                                             if conditions.latency_sigma else "")]
    for value, what in ((conditions.requests_per_minute, "requests"), (conditions.tokens_per_minute, "tokens")):
        if value:
            parts.append(f"{value:,.0f} {what} per minute")
    for rate, what in ((conditions.error_rate, "server errors"), (conditions.drop_rate, "dropped connections")):
        if rate:
            parts.append(f"{rate:.0%} {what}" if rate * 100 == int(rate * 100) else f"{rate:.2%} {what}")
    return ", ".join(parts)


def environment(url: str, cache: str) -> dict[str, str]:
    """What a study run against the emulator at ``url`` needs in its environment: both SDKs' base URLs and a
    response cache of its own."""
    return {"OPENAI_BASE_URL": url + "/v1", "ANTHROPIC_BASE_URL": url,
            "LATTE_LAB_CACHE": str(Path(cache).expanduser())}


def keys_line() -> str:
    """Which provider keys the study will find (names only), and where they go: the rehearsal's check of keys."""
    from latte_lab.models.keys import KEY_HOSTS, load_env

    load_env()
    found = [f"{name} {'found' if os.environ.get(name, '').strip() else 'NOT SET'}" for name in KEY_HOSTS]
    return (f"keys: {', '.join(found)} (in the environment or .env); each goes only to its provider's own API, so "
            "the emulator is sent a placeholder")


def _emulate(args) -> int:
    from latte_lab.cli._common import UsageError
    from latte_lab.models.emulator import Emulator, summary_line
    from latte_lab.models.emulator.process import READY_PREFIX, serve_until_stopped, stop_on_signals, watch_parent

    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if command and args.command[:1] != ["--"]:
        raise UsageError(f"put the command after --: latte-lab emulate ... -- {' '.join(command)}")
    emulator = Emulator(_conditions(args), profile=args.profile, log_path=args.log, host=args.host, port=args.port)
    stop = threading.Event()
    watch_parent(os.getppid(), stop)
    status = [0]

    def ready(emu) -> None:
        print(f"{READY_PREFIX}{emu.url} ({describe(emu.conditions)})", flush=True)
        print(f"  {keys_line()}", flush=True)
        env = environment(emu.url, args.cache)
        if not command:
            print("  rehearse a study against it with these in its environment (Ctrl-C stops the emulator):\n"
                  "    export " + " ".join(f"{k}={v}" for k, v in env.items()), flush=True)
            return
        status[0] = _run(command, env, stop)
        stop.set()

    with stop_on_signals(stop, interrupt=not command):
        serve_until_stopped(emulator, stop, on_ready=ready)
    print(f"latte-lab emulate: {summary_line(emulator.entries())}", flush=True)
    return status[0]


def _run(command: list[str], env: dict[str, str], stop: threading.Event) -> int:
    """Runs ``command`` with ``env`` added. Ctrl-C reaches it (the terminal's process group) and not this
    process (:func:`~latte_lab.models.emulator.process.stop_on_signals`); the emulator stopping (its parent
    gone, SIGTERM) stops the command too."""
    try:
        proc = subprocess.Popen(command, env={**os.environ, **env})
    except OSError as exc:
        print(f"latte-lab: error: cannot run {command[0]!r}: {exc.strerror}", file=sys.stderr)
        return 127
    while True:
        try:
            return proc.wait(0.25)
        except subprocess.TimeoutExpired:
            if stop.is_set():
                proc.send_signal(signal.SIGTERM)
