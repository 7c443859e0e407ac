"""Provision: facts -> preflight -> lock -> plan -> run directory -> ansible -> results.

``provision(ProvisionOptions(...)) -> ProvisionOutcome`` runs ``envbuild provision``; its flow,
``envbuild.flows.provision``, makes the options from a ``ProvisionRequest`` and calls it. Its
nodes are chosen by the one node selection (``envbuild.connect.selection``), which run.json
records as ``selection``. Every
node is handled on its own: an unreachable node or one refused by preflight is recorded and
the others go on; a node that fails a step does not stop the others.

Exit codes: 0 every node ok; 4 a node failed a step; 3 a node unreachable; 1 a node refused by
preflight; 2 bad input (raised as InputError before anything runs).

The modules, in the order a run uses them:

- ``options``: the options, checked; the planner's options made from them (``envbuild plan``'s too)
- ``early``: facts and a speculative no-op probe, read from the nodes while the recipe loads
- ``lockfile``: the lock to install (given, shipped, or made now for a recipe of one's own)
- ``replan``: refusals before anything installs, and plans made again (find-links, fleet)
- ``noop``: the no-op check; a run with nothing to do never starts Ansible
- ``playbook``, ``tracker``, ``collect``: the Ansible phase, its events, what is read back
- ``results``: node statuses, interrupts, the verdict and the exit code (fail closed)
- ``run``: ``provision()``, the phases in order
"""

from envbuild.provision.lockfile import take_lock
from envbuild.provision.options import ProvisionOptions, ProvisionOutcome, controller_uv
from envbuild.provision.run import provision

__all__ = ["ProvisionOptions", "ProvisionOutcome", "controller_uv", "provision", "take_lock"]
