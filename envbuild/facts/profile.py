"""Facts assumed from a target profile, and live facts completed by it.

``from_target`` gives what envbuild must assume about a node of a target class when it has not
seen one (lock, plan and preflight from a laptop); ``refine`` merges live facts over it: what
was measured wins, the profile fills only what is unknown. The ``local`` target (``from_facts``)
assumes nothing.

>>> from envbuild.targets import load_target           # doctest: +SKIP
>>> from_target(load_target("azure-nd96")).nvcc        # doctest: +SKIP
'11.4'
"""

from __future__ import annotations

from envbuild.cuda_arch import max_cuda_for_driver
from envbuild.facts.model import Gpu, IbDevice, Interpreter, NodeFacts
from envbuild.targets.schema import Target

# Fields whose "unknown" is an empty container rather than None.
_EMPTY = (list, dict)

# A key in NodeFacts.missing means the gatherer looked on the node: its answer (absent) stands.
_LOOKED_AT = {
    "gpus": ("gpus", "driver_version", "driver_cuda"),
    "nvcc": ("nvcc", "nvcc_path", "cuda_home"),
    "os": ("os_id", "os_version", "os_pretty"),
}


def from_target(target: Target) -> NodeFacts:
    """The facts a node of ``target`` is assumed to have (origin ``profile:<name>``)."""
    gpus = []
    if target.gpus:
        gpus = [Gpu(index=i, name=target.gpus.model, compute_capability=target.gpus.compute_capability,
                    memory_mib=target.gpus.memory_gib * 1024) for i in range(target.gpus.count)]
    cuda = target.cuda
    missing = {}
    if target.from_facts:
        missing["*"] = f"target {target.name} takes everything from live facts"
    if target.gpus and not cuda.driver and not cuda.driver_cuda:
        missing["driver_version"] = "not in the target profile"
    return NodeFacts(
        host=target.name,
        origin=f"profile:{target.name}",
        gpus=gpus,
        driver_version=cuda.driver,
        driver_cuda=cuda.driver_cuda or max_cuda_for_driver(cuda.driver),
        nvcc=cuda.toolkit,
        nvcc_path="/usr/local/cuda/bin/nvcc" if cuda.toolkit else None,
        cuda_home="/usr/local/cuda" if cuda.toolkit else None,
        os_id=target.platform.os_id,
        os_version=target.platform.os_version,
        glibc=target.platform.glibc,
        arch=target.platform.arch,
        cpu_cores=target.cpu_cores,
        memory_gib=float(target.memory_gib) if target.memory_gib is not None else None,
        pythons=[Interpreter(path=f"/usr/bin/python{v}", version=v) for v in target.python],
        modules=list(target.conda_modules),
        infiniband=[IbDevice(name="ib (profile)")] if target.infiniband else [],
        container_engines={target.container_runtime: "profile"} if target.container_runtime else {},
        missing=missing,
    )


def _unknown(value: object) -> bool:
    return value is None or (isinstance(value, _EMPTY) and not value)


def refine(target: Target, facts: NodeFacts) -> NodeFacts:
    """Live ``facts`` completed by ``target``'s profile: measured values win, gaps are filled.

    A field is a gap when it is unknown (None/empty) and not explained in ``facts.missing``:
    a fact the gatherer looked for and did not find (``missing["nvcc"]``) stays absent, so a
    node without nvcc is never assumed to have the profile's toolkit. For a ``from_facts`` target
    (``local``) the facts are returned unchanged. When the profile filled anything, the origin
    becomes ``<origin>+profile:<target>`` and each filled field is listed in ``missing`` as ``"assumed from profile <target>"``.
    """
    if target.from_facts:
        return facts
    assumed = from_target(target)
    update: dict[str, object] = {}
    skip = {"schema_", "host", "origin", "collected_at", "missing", "topology", "pip_packages"}
    for key in facts.missing:
        skip.update(_LOOKED_AT.get(key, (key,)))
    for name in NodeFacts.model_fields:
        if name in skip:
            continue
        mine, theirs = getattr(facts, name), getattr(assumed, name)
        if _unknown(mine) and not _unknown(theirs):
            update[name] = theirs
    if not update:
        return facts
    missing = dict(facts.missing)
    for name in update:
        missing.setdefault(name, f"assumed from profile {target.name}")
    update["missing"] = missing
    update["origin"] = f"{facts.origin}+profile:{target.name}"
    return facts.model_copy(update=update)
