"""Text similarity measures (to implement: see the task description)."""

import math  # noqa: F401 - for the implementation
from collections import Counter  # noqa: F401 - for the implementation

from tokenizer import Tokenizer  # noqa: F401 - for the implementation


def cosine_similarity(text_a: str, text_b: str) -> float:
    raise NotImplementedError


def jaccard_similarity(text_a: str, text_b: str) -> float:
    raise NotImplementedError
