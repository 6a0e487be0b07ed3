"""ScriptedModel: replies in order, per agent, from a function; running out is a ModelError."""

from __future__ import annotations

import pytest
from conftest_models import make_request

from latte_lab.errors import ConfigError, ModelError
from latte_lab.models import Model, ScriptedModel
from latte_lab.models.base import estimate_tokens


def test_list_replies_in_order_then_runs_out():
    model = ScriptedModel(["a", "bb"], latency_s=1.5)
    assert isinstance(model, Model)
    first = model.generate(make_request(agent="Dev1"))
    assert (first.text, first.latency_s, first.cached, first.model) == ("a", 1.5, False, "scripted")
    assert model.generate(make_request(agent="Dev2")).text == "bb"
    with pytest.raises(ModelError, match="ran out of replies after 2 calls"):
        model.generate(make_request())
    assert len(model.calls) == 3


def test_per_agent_replies():
    model = ScriptedModel({"Lead": ["plan"], "Dev1": ["w1", "w2"]})
    assert model.generate(make_request(agent="Dev1")).text == "w1"
    assert model.generate(make_request(agent="Lead")).text == "plan"
    assert model.generate(make_request(agent="Dev1")).text == "w2"
    with pytest.raises(ModelError, match="for agent 'Lead' after 1 calls"):
        model.generate(make_request(agent="Lead"))
    with pytest.raises(ModelError, match="no replies for agent 'Dev3'"):
        model.generate(make_request(agent="Dev3"))


def test_callable_replies_and_usage_estimate():
    model = ScriptedModel(lambda r: r.messages[-1].content.upper(), tokens_per_char=0.5)
    request = make_request(text="abcd")
    response = model.generate(request)
    assert response.text == "ABCD"
    prompt_chars = len(request.system) + 4
    assert response.usage.input_tokens == estimate_tokens("x" * prompt_chars, 0.5)
    assert response.usage.output_tokens == 2


def test_bad_replies():
    with pytest.raises(ConfigError):
        ScriptedModel("just a string")
    with pytest.raises(ModelError, match="must be a string"):
        ScriptedModel(lambda r: 42).generate(make_request())
