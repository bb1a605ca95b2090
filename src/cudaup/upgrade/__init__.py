"""``upgrade``: move a Python environment to another CUDA line in one step, and back.

``environment`` reads what an environment holds through its own interpreter;
``families`` is the family table (which project is a package's build for each CUDA
major); ``census`` (pure) says which distributions carry a line and what to ask the
resolver for; ``planning`` plans the move with ``plan``'s resolver; ``changes``
(pure) is the change set; ``clone`` clones, fingerprints and exchanges whole trees;
``snapshots`` is the store beside the environment and its journal; ``apply`` runs uv
into the work tree; ``verify`` checks it in its own interpreter; ``transaction``
puts them in order: upgrade, rollback, the list.
"""

from cudaup.upgrade.planning import UpgradePlan, UpgradeRequest, plan_upgrade
from cudaup.upgrade.transaction import RollbackOutcome, UpgradeOutcome, Upgrader

__all__ = [
    "RollbackOutcome",
    "UpgradeOutcome",
    "UpgradePlan",
    "UpgradeRequest",
    "Upgrader",
    "plan_upgrade",
]
