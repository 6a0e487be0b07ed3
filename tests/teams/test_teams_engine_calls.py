"""Which models' calls the engine runs in threads: only those that wait on something outside the process."""

from __future__ import annotations

from latte_lab.models import make_model
from latte_lab.models.cassette import Cassette, RecordingModel
from latte_lab.models.scripted import ScriptedModel
from latte_lab.teams.engine import calls_wait


class ServerModel:
    """Stands for a provider: its calls wait on a server."""

    def generate(self, request):  # pragma: no cover - never called here
        raise AssertionError


def test_models_that_compute_here_run_one_call_after_another(tmp_path):
    sim = make_model("simulated")
    assert calls_wait(sim) is False
    assert calls_wait(RecordingModel(sim, Cassette(tmp_path / "calls.jsonl"))) is False
    assert calls_wait(ScriptedModel(lambda request: "")) is False


def test_models_that_wait_on_a_server_run_in_threads(tmp_path):
    assert calls_wait(ServerModel()) is True
    assert calls_wait(RecordingModel(ServerModel(), Cassette(tmp_path / "calls.jsonl"))) is True
