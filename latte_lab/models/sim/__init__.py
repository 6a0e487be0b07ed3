"""The simulated model: a seeded offline policy that plays every role of every team.

:class:`SimulatedModel` (``model.py``) answers requests; its behaviour is set by a :class:`Profile`
(``profiles.py``). Internals: what one call knows from its prompt (``turn.py``), the work on units and
the evidence behind a patch (``work.py``), the role policies (``policy.py`` for graph workers and the
dispatch, ``lead.py``, ``flat.py``, ``documents.py``, graph nodes in ``nodes.py``), the units an agent
builds from its prompt's text (``units.py``) and what it makes of them (``skill.py``), the examples and check
scripts it writes (``examples.py``), what it may write about a project's data (``evidence.py``) and the
analysis it runs to write a report about data (``analysis.py``), the fix book that holds what correct code
looks like and is the only module reading task internals (``fixbook.py``), source splicing (``source.py``),
generic slips (``mutate.py``) and reply text (``text.py``).

>>> from latte_lab.models.sim import PROFILES, SimulatedModel
>>> sorted(PROFILES), SimulatedModel().profile.name
(['calibrated', 'careful', 'default', 'fast'], 'default')
"""

from latte_lab.models.sim.model import SimulatedModel
from latte_lab.models.sim.profiles import PROFILES, Profile, resolve_profile

__all__ = ["PROFILES", "Profile", "SimulatedModel", "resolve_profile"]
