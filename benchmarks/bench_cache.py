"""Response-cache lookup speed on a 50,000-entry cache.

Prints the time to build the cache (batched inserts) and the median / p95 time of ``get`` for hits and
misses, plus single-row ``put``. Run: ``.venv/bin/python benchmarks/bench_cache.py``.
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from pathlib import Path

from latte_lab.models import Message, ModelRequest, ModelResponse, ResponseCache, Scope, Usage

ENTRIES = 50_000  # a large sweep: ~300 trials x ~160 calls
BATCH = 5_000  # rows per transaction while building
LOOKUPS = 5_000  # timed gets per kind (hit / miss)
PUTS = 500  # timed single-row puts
PROMPT_CHARS = 2_000  # a typical agent prompt (system + history excerpt)
SEED = 0  # fixed so runs are comparable


def request(i: int, prompt: str) -> ModelRequest:
    return ModelRequest(
        provider="openai", model="gpt-4o", system="You are Dev1 on a team.",
        messages=[Message("user", f"{prompt} #{i}")],
        scope=Scope(seed=i // 200, agent=f"Dev{i % 5}", call_index=i % 200, trial=f"t{i // 200}"),
    )


def response(i: int) -> ModelResponse:
    return ModelResponse(text=f"<claim_task id=\"task-{i}\" /> " + "x" * 800, usage=Usage(900, 200),
                         latency_s=3.2, model="gpt-4o")


def timed(fn, items) -> list[float]:
    out = []
    for item in items:
        start = time.perf_counter_ns()
        fn(item)
        out.append((time.perf_counter_ns() - start) / 1e3)
    return out


def describe(name: str, micros: list[float]) -> None:
    p95 = statistics.quantiles(micros, n=20)[-1]
    print(f"{name:<22} median {statistics.median(micros):8.1f} us   p95 {p95:8.1f} us   (n={len(micros)})")


def main() -> None:
    rng = random.Random(SEED)
    prompt = "".join(rng.choice("abcdefghij klmnop\n") for _ in range(PROMPT_CHARS))
    with tempfile.TemporaryDirectory() as tmp:
        cache = ResponseCache(Path(tmp) / "bench.sqlite")
        start = time.perf_counter()
        for lo in range(0, ENTRIES, BATCH):
            cache.put_many((request(i, prompt), response(i)) for i in range(lo, min(lo + BATCH, ENTRIES)))
        build = time.perf_counter() - start
        size = cache.stats().size_bytes
        print(f"built {len(cache):,} entries in {build:.2f} s ({ENTRIES / build:,.0f} rows/s), {size / 1e6:.1f} MB")

        hits = [request(rng.randrange(ENTRIES), prompt) for _ in range(LOOKUPS)]
        misses = [request(ENTRIES + i, prompt) for i in range(LOOKUPS)]
        describe("get (hit)", timed(cache.get, hits))
        describe("get (miss)", timed(cache.get, misses))
        extra = [(request(2 * ENTRIES + i, prompt), response(i)) for i in range(PUTS)]
        describe("put (one row)", timed(lambda pair: cache.put(*pair), extra))
        assert cache.stats().hits == LOOKUPS
        cache.close()


if __name__ == "__main__":
    main()
