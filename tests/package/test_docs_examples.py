"""The numbers the documentation shows cannot drift: every value a page shows from code is the output of a
``>>>`` example, which ``make test`` runs (its doctest job: ``--doctest-glob='*.md'`` on the pages) and
``make docs-numbers`` rewrites (docs/doc_examples.py). These tests keep that so: no page shows an output as
a comment that nothing checks, the rewrite puts what an example prints now in place of what the page said,
the trial ids the pages name are their configs' ids, and the README says what it should."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import latte_lab as ll

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "docs"))
import doc_examples  # noqa: E402  (docs/ is not a package)

PAGES = sorted(p for pattern in doc_examples.PAGES for p in REPO.glob(pattern))
CODE_BLOCK = re.compile(r"```python\n(?P<code>.*?)```", re.DOTALL)
# A comment that shows a value: a literal, a number, a bool or None, or an error message.
OUTPUT_COMMENT = re.compile(r"#\s*(?:[(\[{'\"]|-?\d|True\b|False\b|None\b|\w+Error:)")


def _blocks(page: Path) -> list[str]:
    return [m.group("code") for m in CODE_BLOCK.finditer(page.read_text())]


@pytest.mark.parametrize("page", [*PAGES, REPO / "README.md"], ids=lambda p: str(p.relative_to(REPO)))
def test_no_page_shows_an_output_nothing_checks(page):
    """A value shown in a comment of a plain code block would go stale unnoticed: show it as an example's
    output instead (a ``>>>`` block; ``make docs-numbers`` fills the output in)."""
    shown = [line.strip() for code in _blocks(page) if not code.lstrip().startswith(">>>")
             for line in code.splitlines() if OUTPUT_COMMENT.search(line.partition("#")[1] + line.partition("#")[2])]
    assert not shown, f"{page.name} shows outputs in comments: {shown}"


def test_the_pages_with_numbers_are_doctests():
    examples = {p.relative_to(REPO).as_posix(): sum(c.count("\n>>> ") + c.startswith(">>> ") for c in _blocks(p))
                for p in PAGES}
    for page in ("docs/index.md", "docs/getting-started.md", "docs/concepts/analysis.md", "docs/concepts/graph.md",
                 "docs/concepts/scheduling.md", "docs/concepts/tasks.md", "docs/concepts/workspace.md",
                 "docs/concepts/viewer.md"):
        assert examples[page] >= 3, page
    makefile = (REPO / "Makefile").read_text()
    assert "DOC_PAGES := docs/*.md docs/concepts/*.md docs/api/cli.md" in makefile
    assert "--doctest-glob='*.md' $(DOC_PAGES)" in makefile and "docs/doc_examples.py" in makefile


PAGE = '''# A page

```python
>>> import latte_lab as ll
>>> g = ll.CoordinationGraph()
>>> g.discover("a", by="Lead"); g.discover("b", deps=["a"], by="Lead")
>>> g.frontier()
['stale']
>>> print("x\\n\\ny")
>>> g.claim("b", "Dev1")
Traceback (most recent call last):
    ...
latte_lab.errors.OperatorError: an old message
>>> g.counts()["pending"]
2

```

Text between blocks.
'''


def test_the_rewrite_puts_what_each_example_prints_now_in_place(tmp_path):
    with doc_examples.environment():
        new, changed = doc_examples.rewrite(PAGE, "page.md")
    assert changed == [7, 9, 10]  # the stale list, the missing output, the changed error message
    assert new == PAGE.replace("['stale']", "['a']").replace(
        '>>> print("x\\n\\ny")\n', '>>> print("x\\n\\ny")\nx\n<BLANKLINE>\ny\n').replace(
        "an old message", "claim on node 'b' rejected: dependencies not finished: a")
    with doc_examples.environment():
        assert doc_examples.rewrite(new, "page.md") == (new, [])  # as it runs now: nothing to change


def test_the_command_rewrites_files_and_check_only_reports(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    script = [sys.executable, str(REPO / "docs" / "doc_examples.py")]
    check = subprocess.run([*script, "--check", str(page)], capture_output=True, text=True, cwd=tmp_path)
    assert check.returncode == 1 and "differs the output of the examples at lines 7, 9, 10" in check.stdout
    assert page.read_text() == PAGE
    done = subprocess.run([*script, str(page)], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0 and "rewrote the output of the examples at lines 7, 9, 10" in done.stdout
    assert "['a']" in page.read_text()
    again = subprocess.run([*script, "--check", str(page)], capture_output=True, text=True, cwd=tmp_path)
    assert again.returncode == 0 and "every output of 1 pages is as it runs now" in again.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["page.md"]  # runs/ and the cache went elsewhere


def test_a_page_that_registers_a_task_leaves_the_registries_as_they_were():
    before = (ll.tasks.names(), ll.teams.names())
    page = '''```python
>>> from latte_lab.tasks import register
>>> from latte_lab.tasks.debug import DebugTask
>>> @register("debug_copy")
... class Copy(DebugTask):
...     pass
>>> "debug_copy" in ll.tasks.names()
True

```
'''
    with doc_examples.environment():
        assert doc_examples.rewrite("```python\n>>> import latte_lab as ll\n\n```\n" + page, "p.md")[1] == []
    assert (ll.tasks.names(), ll.teams.names()) == before


def test_trial_ids_appear_only_in_examples():
    """A trial id ends in its config's hash, which a new config field changes: outside an example's output
    (which make docs-numbers rewrites) it would go stale. Pages write <trial id> there instead."""
    text = "\n".join(CODE_BLOCK.sub(lambda m: "" if m.group("code").lstrip().startswith(">>>") else m.group(0),
                                    p.read_text()) for p in PAGES)
    named = re.findall(r"\b(?:debug|eda|textproc)-\w+-s\d+-[0-9a-f]{10}\b", text)
    assert not named, f"trial ids outside the pages' examples: {named}"


def test_the_readme_names_the_class_editions_and_not_the_old_solutions_folder():
    readme = (REPO / "README.md").read_text()
    assert "notebooks/solutions" not in readme and "solutions/" not in readme
    assert "make class" in readme and "teacher's edition" in readme and "student edition" in readme
    assert "make docs-numbers" in readme


def test_the_readme_figures_of_the_released_preset_are_the_code_s():
    """The README's paragraph on the released preset: its read_file cap, latte_lab's, and the debug module's
    size that makes the difference matter."""
    readme = " ".join((REPO / "README.md").read_text().split())
    module = ll.tasks.get("debug").starting_files()["signal_toolkit.py"]
    released = ll.TrialConfig.released(task="debug")
    assert f"the first {released.read_file_cap:,} characters of a file" in readme
    assert f"latte_lab shows {ll.TrialConfig(task='debug').read_file_cap:,} by default" in readme
    assert f"the debug module is about {round(len(module), -2):,} characters" in readme
    assert released.read_file_cap < len(module) < ll.TrialConfig(task="debug").read_file_cap


def test_make_lab_starts_jupyterlab_as_root_too():
    """JupyterLab refuses to start as root without --allow-root (containers, hosted machines): make lab adds
    it exactly then."""
    import os

    done = subprocess.run(["make", "--no-print-directory", "-n", "lab", "LAB_ARGS=--no-browser"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    command = next((line for line in done.stdout.splitlines() if "jupyter lab" in line), done.stdout)
    assert done.returncode == 0 and "jupyter lab --notebook-dir=notebooks" in command and "--no-browser" in command
    assert ("--allow-root" in command) == (os.geteuid() == 0), command
