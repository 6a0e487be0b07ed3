"""The simulated agent's words: action tags in the text protocol and a short rationale (pure).

Replies look like a real model's: a few sentences of reasoning, then the tags. The rationale's
length follows the profile's verbosity, so token counts behave like a model's.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from latte_lab.models.base import CHARS_PER_TOKEN

WORK_MARKER = "Working on task"  # first words of a worker's rationale; the agent reads its own history
_MARKER_RE = re.compile(rf"{WORK_MARKER} ([\w\-]+)")
# Text that the parser would read as a tag: "<" followed by a letter, "/" or "!".
_TAGLIKE = re.compile(r"<(?=[A-Za-z/!])")
_SELF_TAG = re.compile(r"<(\w+)((?:\s+\w+=\"[^\"]*\")*)\s*/?>")
_ATTR = re.compile(r"(\w+)=\"([^\"]*)\"")

# Filler reasoning, used to reach the profile's verbosity; deliberately generic.
_FILLER = (
    "I want to keep the change small so that nothing else in the module moves.",
    "The docstring states the contract precisely, so I will follow it literally.",
    "Other teammates may be touching the same files, so I keep my edit focused.",
    "Running the tests afterwards will tell me whether the fix holds.",
    "Edge cases such as empty inputs deserve a second look before I move on.",
    "I will report back once I know whether the tests agree.",
    "The failing output points at a specific behaviour, which narrows the search.",
    "It is better to check the current state of the file than to rely on memory.",
    "Dependencies matter here: downstream pieces only pass once their inputs are right.",
    "I will keep the interface unchanged so that callers keep working.",
)


@dataclass(frozen=True)
class Act:
    """One action tag: its name, attributes (in order) and body (None for self-closing tags)."""

    tag: str
    attrs: tuple[tuple[str, str], ...] = ()
    body: str | None = None

    def attr(self, name: str) -> str | None:
        return dict(self.attrs).get(name)


def act(tag: str, body: str | None = None, **attrs: str) -> Act:
    return Act(tag, tuple((k, str(v)) for k, v in attrs.items()), body)


def _clean_attr(value: str) -> str:
    return value.replace('"', "'").replace("\n", " ").replace("<", "‹").replace(">", "›")


def _clean_body(text: str) -> str:
    return _TAGLIKE.sub("‹", text)


def render(a: Act) -> str:
    if a.tag == "edit_file" and a.body is not None:
        from latte_lab.actions import ActionRenderError, EditFile, render_action

        try:  # the protocol's own renderer fences content that would not read back verbatim
            return render_action(EditFile(a.attr("path") or "", a.body))
        except ActionRenderError:
            pass
    attrs = "".join(f' {k}="{_clean_attr(v)}"' for k, v in a.attrs)
    if a.body is None:
        return f"<{a.tag}{attrs} />"
    body = a.body if a.tag == "edit_file" else _clean_body(a.body.strip())
    if a.tag == "edit_file":
        return f"<{a.tag}{attrs}>\n{body}</{a.tag}>"
    return f"<{a.tag}{attrs}>{body}</{a.tag}>"


def rationale(notes: list[str], verbosity: int, rng: random.Random) -> str:
    """The notes, padded with generic reasoning up to about ``verbosity`` tokens (±25%)."""
    text = " ".join(n.strip() for n in notes if n.strip())
    target_chars = int(verbosity * CHARS_PER_TOKEN * rng.uniform(0.75, 1.25))
    pool = list(_FILLER)
    rng.shuffle(pool)
    i = 0
    while len(text) < target_chars and i < 4 * len(pool):
        text = (text + " " + pool[i % len(pool)]).strip()
        i += 1
    return _clean_body(text)


def reply_text(notes: list[str], acts: list[Act], verbosity: int, rng: random.Random) -> str:
    parts = [rationale(notes, verbosity, rng)]
    parts.extend(render(a) for a in acts)
    return "\n\n".join(p for p in parts if p)


def tags_in(text: str) -> list[Act]:
    """Self-closing and opening tags of one of the agent's own earlier replies (attributes only)."""
    out = []
    for m in _SELF_TAG.finditer(text or ""):
        out.append(Act(m.group(1), tuple(_ATTR.findall(m.group(2) or ""))))
    return out


def marked_task(text: str) -> str | None:
    """The task an earlier reply said it was working on (the first ``Working on task X``)."""
    m = _MARKER_RE.search(text or "")
    return m.group(1) if m else None
