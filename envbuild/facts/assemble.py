"""Turn the probe sections of one node into ``NodeFacts`` (pure: no I/O).

Every fact that could not be gathered is recorded in ``NodeFacts.missing`` with the reason;
nothing here raises for a missing tool or a GPU-less node.
"""

from __future__ import annotations

from envbuild.facts import conda, containers, cuda, gpu, host, ib, nccl, osinfo, pipconf, python, user
from envbuild.facts.model import NodeFacts
from envbuild.facts.probe import Probe, Section

FACT_MODULES = (gpu, cuda, osinfo, host, user, pipconf, python, conda, ib, nccl, containers)


def all_probes() -> list[Probe]:
    """Every probe, in the order the script runs them."""
    return [p for mod in FACT_MODULES for p in mod.PROBES]


def assemble(sections: dict[str, Section], host_name: str, *, collected_at: str | None = None) -> NodeFacts:
    """Build the facts of ``host_name`` from ``split_sections`` output."""
    f: dict = {"host": host_name, "collected_at": collected_at}
    missing: dict[str, str] = {}
    empty = Section(out="", err="not run", rc=-1)

    def sec(name: str) -> Section:
        return sections.get(name, empty)

    # GPUs and driver
    q, x = sec("gpu_query"), sec("gpu_xml")
    gpus = gpu.parse_gpu_query(q.out)
    xml = gpu.parse_nvidia_smi_xml(x.out)
    f["gpus"] = gpu.merge_xml(gpus, xml)
    f["driver_version"] = xml.driver_version or gpu.parse_query_driver(q.out)
    f["driver_cuda"] = xml.cuda_version
    if not gpus:
        missing["gpus"] = gpu.too_many(q.out) or gpu.no_gpu_reason(q.out + "\n" + q.err) or (
            q.why("nvidia-smi") if not q.ok else "nvidia-smi listed no GPU"
        )
    f["topology"] = gpu.parse_topology(sec("gpu_topo").out) if gpus else None
    if gpus and f["topology"] is None:
        missing["topology"] = sec("gpu_topo").why("nvidia-smi topo -m")

    # CUDA toolkit
    n = sec("nvcc")
    probe = cuda.parse_nvcc_probe(n.out)
    f.update(nvcc=probe.version if n.ok else None, nvcc_path=probe.path if n.ok else None, cuda_home=probe.cuda_home)
    if f["nvcc"] is None:
        missing["nvcc"] = n.why("nvcc")

    # OS
    rel = osinfo.parse_os_release(sec("os_release").out)
    f.update(os_id=rel.get("ID"), os_version=rel.get("VERSION_ID"), os_pretty=rel.get("PRETTY_NAME"))
    if not rel:
        missing["os"] = sec("os_release").why("/etc/os-release")
    f["glibc"] = osinfo.parse_glibc(sec("glibc").out)
    if f["glibc"] is None:
        missing["glibc"] = sec("glibc").why("ldd --version")
    f["arch"] = osinfo.parse_word(sec("uname").out)

    # host
    f["cpu_cores"] = host.parse_nproc(sec("nproc").out)
    f["memory_gib"] = host.parse_meminfo_gib(sec("meminfo").out)
    f["cpu_model"] = host.parse_cpu_model(sec("cpu_model").out)

    # the login user's environment
    u = user.parse_user_env(sec("user_env").out)
    f.update(home=u.get("HOME"), path=u.get("PATH"), user=u.get("USER"))
    if not u.get("HOME", "").startswith("/"):
        f["home"] = None
        missing["home"] = sec("user_env").why("$HOME") if not sec("user_env").ok else "$HOME is not set"

    # pip's configuration files (keys only) and the variables standing in for them
    f["pip_config"], f["pip_config_env"] = pipconf.parse_pip_config(sec("pip_config").out)

    # Python
    f["pythons"] = python.parse_pythons(sec("pythons").out)
    if not f["pythons"]:
        missing["pythons"] = "no python interpreter found"
    pip = sec("pip_list")
    f["pip_packages"] = python.parse_pip_list(pip.out) if pip.ok else {}
    if not pip.ok:
        selected = osinfo.parse_word(sec("python_selected").out) or "python"
        missing["pip_packages"] = pip.why(f"{selected} -m pip list") if not pip.not_found else "no python on PATH"

    # conda and modules
    c = sec("conda")
    f["conda"] = conda.parse_conda(c.out)
    if not f["conda"]:
        missing["conda"] = "conda, mamba, micromamba not found"
    m = sec("modules")
    f["modules"] = conda.parse_module_avail(m.out) if m.ok else []
    if not m.ok:
        missing["modules"] = "environment modules (module command) not found" if m.not_found else m.why("module avail")

    # InfiniBand
    i = sec("infiniband")
    f["infiniband"] = ib.parse_infiniband(i.out) if i.ok else []
    if not f["infiniband"]:
        missing["infiniband"] = "no /sys/class/infiniband devices and no ibstat" if i.not_found else i.why("ibstat")

    # NCCL
    f["nccl_version"] = nccl.parse_nccl(sec("nccl").out) or nccl.nccl_from_pip(f["pip_packages"])
    if f["nccl_version"] is None:
        missing["nccl_version"] = "no libnccl, nccl.h, torch NCCL or nvidia-nccl wheel found"

    # container engines
    f["container_engines"] = containers.parse_containers(sec("containers").out)
    if not f["container_engines"]:
        missing["container_engines"] = "none of " + ", ".join(containers.ENGINES) + " found"

    f["missing"] = missing
    return NodeFacts(**f)
