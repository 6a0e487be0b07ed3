"""``latte-lab cache stats`` and ``latte-lab cache import``."""

from __future__ import annotations

from conftest_models import make_request

from latte_lab.cli import main
from latte_lab.models import Cassette, RecordingModel, ResponseCache, ScriptedModel


def test_cache_import_then_stats(tmp_path, capsys):
    run = tmp_path / "run1"
    cassette = Cassette(run / "calls.jsonl")
    model = RecordingModel(ScriptedModel(["a", "b", "c"]), cassette)
    for i in range(3):
        model.generate(make_request(call_index=i))
    cassette.close()
    db = tmp_path / "cache.sqlite"
    assert main(["cache", "import", str(run), "--path", str(db)]) == 0
    assert "imported 3 responses (3 new)" in capsys.readouterr().out
    assert main(["cache", "stats", "--path", str(db)]) == 0
    assert "entries: 3" in capsys.readouterr().out
    with ResponseCache(db) as cache:
        assert cache.get(make_request(call_index=2)).text == "c"


def test_cache_import_of_nothing_fails_cleanly(tmp_path, capsys):
    assert main(["cache", "import", str(tmp_path / "nope"), "--path", str(tmp_path / "c.sqlite")]) == 1
    assert "no cassettes" in capsys.readouterr().err
