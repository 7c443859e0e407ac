"""Job -> Kubernetes manifests: a headless Service for the first pod and one Pod per node. Pure.

Each pod asks for the target's GPUs (``nvidia.com/gpu``), CPUs, memory, the RDMA device
resource where the target has InfiniBand (with IPC_LOCK, which RDMA memory registration
needs), and a memory-backed ``/dev/shm`` of the target's size. The first pod's address
reaches the others as the Service's name in ``ENVBUILD_MASTER_ADDR`` (and ``MASTER_ADDR``);
the Service publishes not-ready addresses so the name resolves while the master starts.
Each pod runs the task script (the plan's env file, the recipe's variables, its command)
with ``bash -c``. No Kubernetes API runs in the test suite: the manifests are golden-tested
and validated offline against the Kubernetes schema (kubernetes-validate).
"""

from __future__ import annotations

import yaml

from envbuild.launch.job import Job, heredoc, task_script

API_VERSION = "1.30"  # the Kubernetes schema the manifests are validated against
PORT = 29500


def _names(job: Job) -> list[str]:
    if job.nodes == 1:
        return [job.name]
    return [f"{job.name}-master"] + [f"{job.name}-worker" + (f"-{i}" if job.nodes > 2 else "")
                                     for i in range(1, job.nodes)]


def _labels(job: Job, role: str) -> dict:
    return {"app.kubernetes.io/name": job.name, "app.kubernetes.io/component": role,
            "app.kubernetes.io/managed-by": "envbuild"}


def manifests(job: Job) -> list[dict]:
    opts = job.options
    port = job.master_port if job.master_port else PORT
    names = _names(job)
    master = names[0]
    service = f"{job.name}-rdzv"
    docs: list[dict] = []
    if job.nodes > 1:
        docs.append({"apiVersion": "v1", "kind": "Service",
                     "metadata": {"name": service, "namespace": opts.namespace if opts else "default",
                                  "labels": _labels(job, "rendezvous")},
                     "spec": {"clusterIP": "None", "publishNotReadyAddresses": True,
                              "selector": _labels(job, "master"),
                              "ports": [{"name": "rendezvous", "port": port, "targetPort": port}]}})
    limits: dict = {"cpu": str(job.cpu_cores) if job.cpu_cores else None,
                    "memory": f"{job.memory_gib}Gi" if job.memory_gib else None}
    if job.gpus_per_node:
        limits["nvidia.com/gpu"] = job.gpus_per_node
    if job.infiniband:
        limits[opts.rdma_resource if opts else "rdma/hca_shared_devices_a"] = 1
    limits = {k: v for k, v in limits.items() if v is not None}
    prelude = []
    for name, content in sorted(job.files.items()):
        prelude += heredoc(f'"$JOB_DIR"/{name}', content)
    for rank, name in enumerate(names):
        role = "master" if rank == 0 and job.nodes > 1 else ("worker" if job.nodes > 1 else "main")
        command = job.commands[rank] if job.mode == "pods" else job.commands[0]
        script = task_script(job, ['mkdir -p "$JOB_DIR"', *prelude], command)
        env = [{"name": "ENVBUILD_JOB_ID", "value": job.name},
               {"name": "ENVBUILD_NNODES", "value": str(job.nodes)},
               {"name": "ENVBUILD_NODE_RANK", "value": str(rank)},
               {"name": "ENVBUILD_GPUS_PER_NODE", "value": str(job.gpus_per_node)},
               {"name": "ENVBUILD_NPROC_PER_NODE", "value": str(job.nproc_per_node)},
               {"name": "ENVBUILD_MASTER_ADDR", "value": service if job.nodes > 1 else "127.0.0.1"},
               {"name": "ENVBUILD_MASTER_PORT", "value": str(port)},
               {"name": "MASTER_ADDR", "value": service if job.nodes > 1 else "127.0.0.1"},
               {"name": "JOB_DIR", "value": "/tmp/envbuild-job"}]
        container = {"name": "main", "image": job.container_image, "command": ["bash", "-c", script],
                     "env": env, "resources": {"limits": limits},
                     "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}]}
        if job.infiniband:
            container["securityContext"] = {"capabilities": {"add": ["IPC_LOCK"]}}
        shm = {"medium": "Memory"} | ({"sizeLimit": job.shm_size} if job.shm_size else {})
        docs.append({"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": name, "namespace": opts.namespace if opts else "default",
                                  "labels": _labels(job, role),
                                  "annotations": {"envbuild/recipe": job.recipe, "envbuild/target": job.target,
                                                  **({"envbuild/replaced": job.replaced} if job.replaced else {})}},
                     "spec": {"restartPolicy": "Never", "containers": [container],
                              "volumes": [{"name": "dshm", "emptyDir": shm}]}})
    assert master  # the first pod is the rendezvous host
    return docs


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper, value: str):
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def render(job: Job) -> str:
    head = "".join(f"# {line}\n" for line in job.header)
    head += "".join(f"# NOTE: {line}\n" for line in job.notes)
    body = yaml.dump_all(manifests(job), Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=100)
    return head + body
