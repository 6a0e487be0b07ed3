"""The ``>>>`` examples of the documentation's pages: what they run in, and a rewrite of what they print.

Every number a page shows from code is an example's output, so it is checked: ``make test`` runs the pages
of ``docs/`` as doctests (``pytest --doctest-glob='*.md'``, in its background doctest job, with
``docs/conftest.py`` putting them in :func:`environment`). When a change moves what they print (the
simulated model's trials, above all), ``make docs-numbers`` reruns every example of every page and writes
what each prints now in place of what the page said, in one go::

    python docs/doc_examples.py                  # rewrite the outputs of docs/*.md and docs/concepts/*.md
    python docs/doc_examples.py --check FILE...  # only say which outputs differ (exit status 1 if any)

Then read ``git diff docs`` and commit the pages with the change. A page's examples run in order in one
namespace, as pytest runs them; an example that raises is written as the traceback's first and last lines.
"""

from __future__ import annotations

import argparse
import contextlib
import doctest
import io
import os
import sys
import tempfile
import traceback
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = ("docs/*.md", "docs/concepts/*.md", "docs/api/cli.md")


@contextlib.contextmanager
def environment() -> Iterator[None]:
    """What the examples run in: a temporary working folder (so ``runs/`` lands there), a response cache of
    its own, and one trial per config: pages show the same trial (debug, latte, seed 0) more than once, and
    a trial is deterministic, so a config run before gives the result it gave (``run_trial`` called with
    anything but a config and ``progress`` runs as usual)."""
    import latte_lab

    run_trial = latte_lab.run_trial
    trials: dict[str, object] = {}

    def once_per_config(config, *args, **kwargs):
        if args or set(kwargs) - {"progress"}:
            return run_trial(config, *args, **kwargs)
        key = config.model_dump_json()
        if key not in trials:
            trials[key] = run_trial(config, **kwargs)
        return trials[key]

    here = Path.cwd()
    saved = {k: os.environ.get(k) for k in ("LATTE_LAB_CACHE", "MPLBACKEND")}
    with tempfile.TemporaryDirectory(prefix="latte-doc-examples-") as tmp:
        os.chdir(tmp)
        os.environ["LATTE_LAB_CACHE"] = str(Path(tmp) / "responses.sqlite")
        os.environ["MPLBACKEND"] = "Agg"
        latte_lab.run_trial = once_per_config
        try:
            yield
        finally:
            latte_lab.run_trial = run_trial
            os.chdir(here)
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


@contextlib.contextmanager
def page_registries() -> Iterator[None]:
    """The team and task registries as they were before a page: a page that registers a team or a task of
    its own (concepts/teams.md, concepts/tasks.md) leaves them as they were for the next one."""
    from latte_lab import tasks, teams

    registries = (teams.REGISTRY, tasks.REGISTRY)
    for registry in registries:
        registry.names()  # loads the built-ins, so that they are part of what is kept
    kept = [(dict(r._entries), dict(r._aliases)) for r in registries]
    try:
        yield
    finally:
        for registry, (entries, aliases) in zip(registries, kept):
            registry._entries, registry._aliases = entries, aliases


class _Recorder(doctest.DocTestRunner):
    """Runs a page's examples and records what each printed (or the exception it raised), as a doctest
    ``want``."""

    def __init__(self):
        super().__init__(verbose=False, optionflags=0)
        self.got: dict[int, str] = {}  # example's line in the page -> its output

    def report_success(self, out, test, example, got):
        # an example that raised as its page says has no output of its own: its traceback stays
        self.got[example.lineno] = example.want if example.exc_msg is not None else got

    def report_failure(self, out, test, example, got):
        head = "Traceback (most recent call last):\n"
        if head in got:  # another exception than the page says: doctest gives the whole traceback
            printed, _, trace = got.partition(head)
            got = printed + head + "    ...\n" + trace.rstrip("\n").split("\n")[-1] + "\n"
        self.got[example.lineno] = got

    def report_unexpected_exception(self, out, test, example, exc_info):
        last = traceback.format_exception_only(exc_info[0], exc_info[1])[-1]
        self.got[example.lineno] = "Traceback (most recent call last):\n    ...\n" + last


def rewrite(text: str, name: str) -> tuple[str, list[int]]:
    """The page with every example's output as it runs now, and the lines (1-based) of the examples whose
    output changed."""
    test = doctest.DocTestParser().get_doctest(text, {"__name__": "__main__"}, name, name, 0)
    if not test.examples:
        return text, []
    runner = _Recorder()
    with page_registries():
        runner.run(test, out=lambda s: None, clear_globs=True)
    lines = text.splitlines(keepends=True)
    changed = []
    checker = doctest.OutputChecker()  # as the doctest compares: "<BLANKLINE>" stands for an empty line
    for example in reversed(test.examples):  # from the bottom, so that the line numbers above stay right
        got = runner.got.get(example.lineno, "")
        flags = sum(flag for flag, on in example.options.items() if on)  # an example's own, e.g. +ELLIPSIS
        if got == example.want or checker.check_output(example.want, got, flags):
            continue
        got = "\n".join(line if line.strip() else "<BLANKLINE>" for line in got.rstrip("\n").split("\n"))
        start = example.lineno + example.source.count("\n")
        pad = " " * example.indent
        new = [pad + line + "\n" for line in got.split("\n")] if got else []
        lines[start:start + example.want.count("\n")] = new
        changed.append(example.lineno + 1)
    return "".join(lines), sorted(changed)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pages", nargs="*", help="Markdown files (default: docs/*.md and docs/concepts/*.md)")
    parser.add_argument("--check", action="store_true", help="report the outputs that differ, write nothing")
    args = parser.parse_args(argv)
    pages = [Path(p).resolve() for p in args.pages] or sorted(p for g in PAGES for p in ROOT.glob(g))
    stale = 0
    with environment(), contextlib.redirect_stderr(io.StringIO()):  # progress bars go to stderr
        for page in pages:
            text = page.read_text()
            new, changed = rewrite(text, str(page))
            where = page.relative_to(ROOT) if page.is_relative_to(ROOT) else page
            if changed:
                stale += 1
                verb = "differs" if args.check else "rewrote"
                print(f"{where}: {verb} the output of the examples at lines {', '.join(map(str, changed))}",
                      file=sys.__stdout__)
                if not args.check:
                    page.write_text(new)
    if not stale:
        print(f"every output of {len(pages)} pages is as it runs now", file=sys.__stdout__)
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
