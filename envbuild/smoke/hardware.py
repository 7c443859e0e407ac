"""Whether a measured figure may be compared with a published one: only on the same GPU model.

A recipe's published figure names the GPU it was measured on (``benchmark.published.gpu``);
a run's GPU comes from its node's facts (nvidia-smi's name) or, for ``envbuild parse``, from
``--gpu``. ``comparison(published_gpu, run_gpu)`` says whether the two are the same model
(``FAMILIES``: the model token of the name, with its memory size where both names give one)
and, when they are not or one is unknown, why no comparison is made. Nothing normalises across
models: an A100 figure is never a percentage of a V100 one.

    >>> comparison("Tesla V100-SXM2-16GB", "NVIDIA A100-SXM4-80GB").comparable
    False
    >>> comparison("NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB PCIe").comparable
    False
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from envbuild.recipes.linear import linear

# model tokens as nvidia-smi and vendors write them; the first that matches names the model
FAMILIES = ["H200", "H100", "H800", "GH200", "A100", "A800", "A10G", "A10", "A30", "A40", "L40S", "L40",
            "L4", "V100", "P100", "T4", "RTX 4090", "RTX 3090", "RTX A6000", "MI300X", "MI250X"]
MEMORY = linear(r"(?i)(\d+)\s*GB")
FORM = linear(r"(?i)\b(SXM\d?|PCIE|NVL)\b")
FAMILY = [(f, linear(rf"\b{re.escape(f)}\b")) for f in FAMILIES]


@dataclass(frozen=True)
class Comparison:
    comparable: bool
    why: str


def model(name: str | None) -> tuple[str | None, str | None, str | None]:
    """(model token, memory, form factor) of a GPU name; None where the name does not say."""
    if not name:
        return None, None, None
    upper = name.upper().replace("-", " ")
    family = next((f for f, rx in FAMILY if rx.search(upper)), None)
    mem = MEMORY.search(name)
    form = FORM.search(name.replace("-", " "))
    return family, mem.group(1) if mem else None, form.group(1).upper() if form else None


def comparison(published_gpu: str | None, run_gpu: str | None, what: str = "published") -> Comparison:
    """Whether a figure ``what`` (published, the threshold measured, the reference recorded) on
    ``published_gpu`` may be compared with a run on ``run_gpu``: the same model, memory and form
    factor where both names say them."""
    if not published_gpu:
        return Comparison(False, f"the recipe does not say which GPU its {what} figure was measured on")
    if not run_gpu:
        return Comparison(False, f"{what} on {published_gpu}; this run's GPU is not known")
    (pf, pm, pform), (rf, rm, rform) = model(published_gpu), model(run_gpu)
    if pf is None or rf is None or pf != rf:
        return Comparison(False, f"{what} on {published_gpu}, measured on {run_gpu}: different GPU models")
    if pm and rm and pm != rm:
        return Comparison(False, f"{what} on {published_gpu}, measured on {run_gpu}: {pm} GB and {rm} GB")
    if pform and rform and pform != rform:
        return Comparison(False, f"{what} on {published_gpu}, measured on {run_gpu}: {pform} and {rform}")
    return Comparison(True, f"both on {pf}")


def short_name(name: str) -> str:
    """The model token of a GPU name with its memory where the name gives it ("H100 80GB"); the
    name itself where no known model token is in it.

    >>> short_name("NVIDIA H100 80GB HBM3"), short_name("NVIDIA H200"), short_name("Mystery GPU")
    ('H100 80GB', 'H200', 'Mystery GPU')
    """
    family, mem, _ = model(name)
    if family is None:
        return name
    return f"{family} {mem}GB" if mem else family


def node_gpus(facts: dict | None) -> tuple[str | None, int | None]:
    """(GPU model, count) of a node's facts.json (``gpus``: nvidia-smi's rows): the model when
    every GPU of the node is the same one, else the names joined (no model then matches)."""
    gpus = [g for g in (facts or {}).get("gpus") or [] if isinstance(g, dict)]
    names = sorted({str(g.get("name")) for g in gpus if g.get("name")})
    return (", ".join(names) or None), (len(gpus) or None)
