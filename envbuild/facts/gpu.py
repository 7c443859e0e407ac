"""GPU facts from ``nvidia-smi``: the CSV query, the ``-q -x`` XML and ``topo -m``.

>>> parse_gpu_query("name, compute_cap\\nNVIDIA H100 80GB HBM3, 9.0\\n")[0].compute_capability
'9.0'
"""

from __future__ import annotations

import csv
import io
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

from envbuild.facts.model import Gpu
from envbuild.facts.probe import Probe

QUERY_FIELDS = "index,name,driver_version,memory.total,compute_cap,pci.bus_id,uuid"
# drivers older than 510 reject compute_cap as a query field
QUERY_FIELDS_OLD = "index,name,driver_version,memory.total,pci.bus_id,uuid"

PROBES = [
    Probe(
        "gpu_query",
        "command -v nvidia-smi >/dev/null 2>&1 || exit 127\n"
        f"__eb_to nvidia-smi --query-gpu={QUERY_FIELDS} --format=csv 2>&1 ||"
        f" __eb_to nvidia-smi --query-gpu={QUERY_FIELDS_OLD} --format=csv",
    ),
    Probe("gpu_xml", "command -v nvidia-smi >/dev/null 2>&1 || exit 127\n__eb_to nvidia-smi -q -x"),
    Probe("gpu_topo", "command -v nvidia-smi >/dev/null 2>&1 || exit 127\n__eb_to nvidia-smi topo -m"),
]

# compute capability by product name, used only when the driver cannot report compute_cap
CC_BY_NAME = [
    ("H200", "9.0"), ("H100", "9.0"), ("GH200", "9.0"), ("H800", "9.0"),
    ("B200", "10.0"), ("B100", "10.0"), ("GB200", "10.0"),
    ("L40", "8.9"), ("L4", "8.9"), ("RTX 4090", "8.9"), ("A100", "8.0"), ("A800", "8.0"),
    ("A30", "8.0"), ("A10", "8.6"), ("A40", "8.6"), ("RTX 3090", "8.6"), ("V100", "7.0"),
    ("T4", "7.5"), ("P100", "6.0"),
]

MAX_GPUS = 64  # more than any node holds (16 on the largest boards): a listing beyond it is not believed
MAX_FIELD = 256  # characters of one field (a name, a bus id) before it is not believed

NO_GPU_MARKERS = ("NVIDIA-SMI has failed", "No devices were found", "couldn't communicate with the NVIDIA driver")


def no_gpu_reason(text: str) -> str | None:
    """The line explaining why nvidia-smi saw no GPU, or None if ``text`` is not such a message."""
    for line in text.splitlines():
        if any(m in line for m in NO_GPU_MARKERS):
            return line.strip()
    return None


def _int_mib(value: str) -> int | None:
    m = re.match(r"\s*(\d+)\s*MiB", value)
    return int(m.group(1)) if m else None


def _clean(value: str | None) -> str | None:
    value = (value or "").strip()
    return None if value in ("", "N/A", "[N/A]", "[Not Supported]") else value


def cc_from_name(name: str) -> str | None:
    """Compute capability guessed from the product name (table ``CC_BY_NAME``)."""
    return next((cc for key, cc in CC_BY_NAME if key in name), None)


def _query_rows(text: str) -> list[dict[str, str]]:
    if no_gpu_reason(text) is not None:
        return []
    lines = [ln for ln in text.splitlines() if ln.strip()]
    # an old driver first rejects compute_cap, then the fallback query prints its own table
    starts = [i for i, ln in enumerate(lines) if {"name", "index"} & {c.strip() for c in ln.split(",")}]
    if not starts:
        return []
    rows = list(csv.reader(io.StringIO("\n".join(lines[starts[-1]:])), skipinitialspace=True))
    header = [re.sub(r"\s*\[.*?\]$", "", h.strip()) for h in rows[0]]
    return [{h: (row[j].strip() if j < len(row) else "") for j, h in enumerate(header)} for row in rows[1:]]


def parse_gpu_query(text: str) -> list[Gpu]:
    """Parse ``nvidia-smi --query-gpu=... --format=csv``; columns are read by header name.

    Headers carry units ("memory.total [MiB]"); missing ``index`` means row order. A failure
    message ("NVIDIA-SMI has failed ...", "No devices were found") gives an empty list.
    """
    gpus = []
    rows = _query_rows(text)
    if len(rows) > MAX_GPUS:
        return []  # assemble says why (too_many)
    for i, rec in enumerate(rows):
        name = rec.get("name", "")
        cc = _clean(rec.get("compute_cap")) or cc_from_name(name)
        if not name or cc is None or any(len(v) > MAX_FIELD for v in rec.values()):
            continue
        index = rec.get("index", "")
        gpus.append(
            Gpu(
                index=int(index) if index.isdigit() else i,
                name=name,
                compute_capability=cc,
                memory_mib=_int_mib(rec.get("memory.total", "")),
                uuid=_clean(rec.get("uuid")),
                pci_bus_id=_clean(rec.get("pci.bus_id")),
            )
        )
    return gpus


def too_many(text: str) -> str | None:
    """Why a listing is not believed: more GPUs than a node holds (None: it is believable)."""
    n = len(_query_rows(text))
    return f"nvidia-smi listed {n} GPUs, more than a node holds ({MAX_GPUS}): not believed" if n > MAX_GPUS else None


def parse_query_driver(text: str) -> str | None:
    """The driver version column of the CSV query (first row), or None."""
    rows = _query_rows(text)
    return _clean(rows[0].get("driver_version")) if rows else None


@dataclass
class SmiXml:
    """What ``nvidia-smi -q -x`` says that the CSV query does not: the CUDA version of the driver."""

    driver_version: str | None = None
    cuda_version: str | None = None
    gpus: list[dict] = field(default_factory=list)  # name, uuid, pci_bus_id, memory_mib, minor


def parse_nvidia_smi_xml(text: str) -> SmiXml:
    """Parse ``nvidia-smi -q -x``. Text that is not that XML (e.g. a failure message) -> empty."""
    start = text.find("<nvidia_smi_log")
    if start < 0:
        return SmiXml()
    body = text[start:]
    try:
        root = ET.fromstring(body)
    except ET.ParseError:
        return SmiXml()
    out = SmiXml(_clean(root.findtext("driver_version")), _clean(root.findtext("cuda_version")))
    for g in root.findall("gpu"):
        minor = _clean(g.findtext("minor_number"))
        out.gpus.append(
            {
                "name": _clean(g.findtext("product_name")),
                "uuid": _clean(g.findtext("uuid")),
                "pci_bus_id": _clean(g.findtext("pci/pci_bus_id")) or g.get("id"),
                "memory_mib": _int_mib(g.findtext("fb_memory_usage/total") or ""),
                "minor": int(minor) if minor and minor.isdigit() else None,
            }
        )
    return out


def parse_topology(text: str) -> str | None:
    """``nvidia-smi topo -m`` kept verbatim (trailing blanks removed); None if it failed."""
    if no_gpu_reason(text) is not None or "GPU0" not in text:
        return None
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


def merge_xml(gpus: list[Gpu], xml: SmiXml) -> list[Gpu]:
    """Fill uuid / bus id / memory the CSV lacked from the XML (matched by bus id, then order)."""
    by_bus = {(g["pci_bus_id"] or "").upper(): g for g in xml.gpus}
    merged = []
    for i, gpu in enumerate(gpus):
        x = by_bus.get((gpu.pci_bus_id or "").upper()) or (xml.gpus[i] if i < len(xml.gpus) else {})
        merged.append(
            gpu.model_copy(
                update={
                    "uuid": gpu.uuid or x.get("uuid"),
                    "pci_bus_id": gpu.pci_bus_id or x.get("pci_bus_id"),
                    "memory_mib": gpu.memory_mib if gpu.memory_mib is not None else x.get("memory_mib"),
                }
            )
        )
    return merged
