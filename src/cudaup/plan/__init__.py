"""``plan``: which CUDA line the driver and the ML packages agree on.

``choice`` is pure (signals and the choice of a line), ``indexes`` is the index
table, ``offers`` reads index pages and wheel metadata, ``export`` writes a PEP 751
lock through uv.
"""

from cudaup.plan.offers import Planner, PlanResult, Target

__all__ = ["PlanResult", "Planner", "Target"]
