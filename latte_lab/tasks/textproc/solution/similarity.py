"""Text similarity measures."""

import math
from collections import Counter

from tokenizer import Tokenizer


def cosine_similarity(text_a: str, text_b: str) -> float:
    tokenizer = Tokenizer()
    a, b = Counter(tokenizer.tokenize_words(text_a)), Counter(tokenizer.tokenize_words(text_b))
    if not a or not b:
        return 0.0
    dot = sum(count * b[word] for word, count in a.items())
    norm = math.sqrt(sum(c * c for c in a.values())) * math.sqrt(sum(c * c for c in b.values()))
    return dot / norm


def jaccard_similarity(text_a: str, text_b: str) -> float:
    tokenizer = Tokenizer()
    a, b = set(tokenizer.tokenize_words(text_a)), set(tokenizer.tokenize_words(text_b))
    if not a and not b:
        return 0.0
    return len(a & b) / len(a | b)
