"""The simulated model: a seeded offline policy that plays every role of every team.

:class:`SimulatedModel` (``model.py``) answers requests; its behaviour is set by a :class:`Profile`
(``profiles.py``). Internals: source splicing (``source.py``), task skill (``skill.py``), one call and
the work on units (``turn.py``), the role policies (``policy.py`` choosing among ``graph_roles.py``,
``flat_roles.py``, ``pipeline_roles.py``) and reply text (``text.py``).

>>> from latte_lab.models.sim import PROFILES, SimulatedModel
>>> sorted(PROFILES), SimulatedModel().profile.name
(['careful', 'default', 'fast'], 'default')
"""

from latte_lab.models.sim.model import SimulatedModel
from latte_lab.models.sim.profiles import PROFILES, Profile, resolve_profile

__all__ = ["PROFILES", "Profile", "SimulatedModel", "resolve_profile"]
