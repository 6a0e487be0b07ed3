"""Collection rules for the whole repository, so ``pytest --doctest-modules latte_lab`` works from anywhere.

Task payloads (the files agents edit, hidden suites, reference solutions) are data
that the sandbox runs, not modules of latte_lab: doctest collection must not import them.
"""

collect_ignore_glob = [
    "latte_lab/tasks/*/files",
    "latte_lab/tasks/*/hidden",
    "latte_lab/tasks/*/solution",
]
