"""The pages of docs/ run as doctests (``make test``'s doctest job: ``pytest --doctest-glob='*.md'``) in
the environment :mod:`doc_examples` sets up, the same one ``make docs-numbers`` rewrites their outputs in."""

from __future__ import annotations

import doc_examples
import pytest


@pytest.fixture(scope="session")
def _doc_environment():
    with doc_examples.environment():
        yield


@pytest.fixture(autouse=True)
def _page(_doc_environment):
    with doc_examples.page_registries():
        yield
