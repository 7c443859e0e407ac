"""The Pod Security Standards' baseline level as a table of checks on a rendered manifest (pure).

Kubernetes enforces the levels in the API server (Pod Security Admission); nothing offline
checks a manifest against them, so the rendered workloads are held to the baseline level here,
rule by rule, each row citing the standard
(https://kubernetes.io/docs/concepts/security/pod-security-standards/, "Baseline"). Every pod
template of a workload is read: a Job's, a JobSet's replicated jobs', a PyTorchJob's replicas'.
"""

from __future__ import annotations

from typing import Callable, Iterator

STANDARD = "https://kubernetes.io/docs/concepts/security/pod-security-standards/"
# Baseline, "Capabilities": adding any capability beyond these is disallowed
ALLOWED_CAPABILITIES = frozenset({"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                                  "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"})
# Baseline, "Sysctls": the safe set
SAFE_SYSCTLS = frozenset({"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
                          "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
                          "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
                          "net.ipv4.tcp_keepalive_probes"})


def pod_specs(manifest: dict) -> Iterator[tuple[str, dict]]:
    """(where, pod spec) of every pod template in one manifest."""
    kind, spec = manifest.get("kind"), manifest.get("spec") or {}
    if kind == "Pod":
        yield "spec", spec
    elif kind == "Job":
        yield "spec.template.spec", spec.get("template", {}).get("spec", {})
    elif kind == "JobSet":
        for i, rj in enumerate(spec.get("replicatedJobs", [])):
            yield (f"spec.replicatedJobs[{i}].template.spec.template.spec",
                   rj.get("template", {}).get("spec", {}).get("template", {}).get("spec", {}))
    elif kind == "TrainJob":  # what envbuild adds to the runtime's pod: its runtime patches
        for i, patch in enumerate(spec.get("runtimePatches") or []):
            for j, rj in enumerate(((patch.get("trainingRuntimeSpec") or {}).get("template") or {})
                                   .get("spec", {}).get("replicatedJobs", [])):
                yield (f"spec.runtimePatches[{i}].trainingRuntimeSpec.template.spec.replicatedJobs[{j}]"
                       ".template.spec.template.spec",
                       rj.get("template", {}).get("spec", {}).get("template", {}).get("spec", {}))
    elif kind == "PyTorchJob":
        for name, replica in (spec.get("pytorchReplicaSpecs") or {}).items():
            yield f"spec.pytorchReplicaSpecs.{name}.template.spec", replica.get("template", {}).get("spec", {})


def _containers(pod: dict) -> Iterator[tuple[str, dict]]:
    for field in ("initContainers", "containers", "ephemeralContainers"):
        for i, c in enumerate(pod.get(field) or []):
            yield f"{field}[{i}]", c


def _contexts(pod: dict) -> Iterator[tuple[str, dict]]:
    yield "securityContext", pod.get("securityContext") or {}
    for where, c in _containers(pod):
        yield f"{where}.securityContext", c.get("securityContext") or {}


def _host_namespaces(pod: dict) -> list[str]:
    return [k for k in ("hostNetwork", "hostPID", "hostIPC") if pod.get(k)]


def _privileged(pod: dict) -> list[str]:
    return [f"{w}.privileged" for w, sc in _contexts(pod) if sc.get("privileged")]


def _host_process(pod: dict) -> list[str]:
    return [f"{w}.windowsOptions.hostProcess" for w, sc in _contexts(pod)
            if (sc.get("windowsOptions") or {}).get("hostProcess")]


def _capabilities(pod: dict) -> list[str]:
    return [f"{w}.securityContext.capabilities.add: {cap}" for w, c in _containers(pod)
            for cap in ((c.get("securityContext") or {}).get("capabilities") or {}).get("add") or []
            if cap not in ALLOWED_CAPABILITIES]


def _host_path(pod: dict) -> list[str]:
    return [f"volumes[{i}].hostPath" for i, v in enumerate(pod.get("volumes") or []) if "hostPath" in v]


def _host_ports(pod: dict) -> list[str]:
    return [f"{w}.ports[{i}].hostPort" for w, c in _containers(pod)
            for i, p in enumerate(c.get("ports") or []) if p.get("hostPort")]


def _proc_mount(pod: dict) -> list[str]:
    return [f"{w}.procMount" for w, sc in _contexts(pod) if sc.get("procMount", "Default") != "Default"]


def _seccomp(pod: dict) -> list[str]:
    return [f"{w}.seccompProfile" for w, sc in _contexts(pod)
            if (sc.get("seccompProfile") or {}).get("type") == "Unconfined"]


def _apparmor(pod: dict) -> list[str]:
    return [f"{w}.appArmorProfile" for w, sc in _contexts(pod)
            if (sc.get("appArmorProfile") or {}).get("type") == "Unconfined"]


def _sysctls(pod: dict) -> list[str]:
    return [f"securityContext.sysctls: {s.get('name')}" for s in (pod.get("securityContext") or {}).get("sysctls") or []
            if s.get("name") not in SAFE_SYSCTLS]


# (the standard's control, the check): each returns the offending fields of one pod spec
BASELINE: tuple[tuple[str, Callable[[dict], list[str]]], ...] = (
    ("HostProcess", _host_process),
    ("Host Namespaces", _host_namespaces),
    ("Privileged Containers", _privileged),
    ("Capabilities", _capabilities),
    ("HostPath Volumes", _host_path),
    ("Host Ports", _host_ports),
    ("AppArmor", _apparmor),
    ("/proc Mount Type", _proc_mount),
    ("Seccomp", _seccomp),
    ("Sysctls", _sysctls),
)


def baseline_violations(manifests: list[dict]) -> list[str]:
    """``KIND NAME: where: control (field)`` for everything the baseline level refuses."""
    out = []
    for m in manifests:
        name = f"{m.get('kind')} {(m.get('metadata') or {}).get('name')}"
        for where, pod in pod_specs(m):
            for control, check in BASELINE:
                out += [f"{name}: {where}: {control} ({field})" for field in check(pod)]
    return out
