"""Job -> Kubernetes manifests: one Indexed Job (a pod per node) and, across nodes, the headless
Service that names its pods. Pure.

The workload is a ``batch/v1`` Job with ``completionMode: Indexed``: ``completions`` and
``parallelism`` are the node count, ``backoffLimit: 0`` (a failed rank fails the run; a
restarted rank would join a rendezvous that has moved on), and each pod reads its node rank
from the completion index the Job controller writes into its annotations. The pods' template
sets ``subdomain`` to the Service's name, so pod *i* resolves as ``<job>-<i>.<service>``
(Kubernetes: "Job with Pod-to-Pod Communication"); the first pod's name reaches the others in
``ENVBUILD_MASTER_ADDR`` (and ``MASTER_ADDR``). The Service publishes not-ready addresses, so
the names resolve while the pods start. A required pod anti-affinity on
``kubernetes.io/hostname`` places every pod of the job on its own node (the GPUs and the
InfiniBand port of a node belong to one rank group).

Each pod asks for the target's GPUs (``nvidia.com/gpu``) on a node whose GPU feature discovery
label names the target's GPU product, CPUs, memory, the RDMA device resource where the target
has InfiniBand (IPC_LOCK only where the target says its namespace allows it: the Pod Security
baseline level refuses it) and a memory-backed ``/dev/shm`` of the target's size. The
workload runs in the target's namespace (else ``envbuild``, never the shared ``default``),
stops at the job's wall time (``activeDeadlineSeconds``), is deleted a day after it finishes
(``ttlSecondsAfterFinished``, the target's), and carries Kueue's queue label when asked. Each pod runs the task script
(the plan's env file, the recipe's variables, its command; where ranks run different commands,
a ``case`` on the rank) with ``bash -c``. No Kubernetes API runs in the test suite: the
manifests are golden-tested and validated offline against the Kubernetes schema
(kubernetes-validate).

``--k8s-workload jobset`` renders the same Indexed Job as the one replicated job of a JobSet
(``jobset.x-k8s.io/v1alpha2``, for clusters that run the JobSet controller): the controller
makes the headless Service and the pods' hostnames, ``failurePolicy.maxRestarts: 0`` keeps a
failed rank a failed run. ``--k8s-workload pytorchjob`` renders a Kubeflow ``PyTorchJob``
(``kubeflow.org/v1``): one Master and N-1 Worker replicas of the same pod; the operator names
the master ``<job>-master-0`` and gives each pod its ``RANK``, which becomes the node rank.
``--k8s-workload trainjob`` renders Kubeflow Trainer v2's ``TrainJob``
(``trainer.kubeflow.org/v1alpha1``, the successor of the PyTorchJob, kept as legacy) on the
``torch-distributed`` ClusterTrainingRuntime the Trainer installs: ``spec.trainer`` holds the
image, command, environment, node count, ranks and resources per node; what the runtime's pod
lacks (the /dev/shm volume, the GPU-product selector, the anti-affinity) is a runtime patch
managed by ``envbuild``. The Trainer's torch plugin gives each pod PET_NODE_RANK (its completion
index), which becomes the node rank; its JobSet names the first pod ``<job>-node-0-0.<job>``,
the rendezvous host. A TrainJob has no TTL field (its runtime's JobSet decides).
kubernetes-validate knows no CRD: the Job template of a JobSet is validated as a ``batch/v1``
Job, a PyTorchJob's pod templates as a ``v1`` Pod.
"""

from __future__ import annotations

import yaml

from envbuild.launch.job import ADDRESS_SCRIPT, DEFAULT_NAMESPACE, Job, heredoc, task_script
from envbuild.launch.queues import seconds_of
from envbuild.node.ib_addresses import PORT as ADDRESS_PORT
from envbuild.render.shell import q

API_VERSION = "1.30"  # the Kubernetes schema the manifests are validated against
PORT = 29500
INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"  # set by the Job controller (Indexed)
HOSTNAME_KEY = "kubernetes.io/hostname"
# JobSet (kubernetes-sigs/jobset, its CRD installed in the cluster): the same Indexed Job as its
# one replicated job; pod hostnames <jobset>-<replicated job>-<job index>-<pod index>.<jobset>
# (site/static/examples/simple/jobset-with-network.yaml of kubernetes-sigs/jobset)
JOBSET_API = "jobset.x-k8s.io/v1alpha2"
REPLICATED_JOB = "node"
# PyTorchJob (Kubeflow's training operator, its CRD installed): a Master replica and N-1 Worker
# replicas; the operator sets MASTER_ADDR (<job>-master-0), MASTER_PORT (the container's port
# named pytorchjob-port), WORLD_SIZE and RANK (master 0, workers 1..) in every pod
# (https://www.kubeflow.org/docs/components/trainer/legacy-v1/user-guides/pytorch/)
PYTORCHJOB_API = "kubeflow.org/v1"
# TrainJob (Kubeflow Trainer v2, kubeflow/trainer v2.3.0: pkg/apis/trainer/v1alpha1/trainjob_types.go;
# the torch plugin's PET_* variables and port 29500 in pkg/constants/constants.go and
# pkg/runtime/framework/plugins/torch/torch.go; the runtime charts/.../runtimes/torch-distributed.yaml,
# whose one replicated job and container are both named "node")
TRAINJOB_API = "trainer.kubeflow.org/v1alpha1"
TRAINER_RUNTIME = "torch-distributed"
TRAINER_NODE = "node"
# NVIDIA GPU feature discovery's node label of the GPU product (NVIDIA/k8s-device-plugin, GFD)
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
# Kueue admits a workload labelled with its LocalQueue (https://kueue.sigs.k8s.io/docs/tasks/run/jobs/)
KUEUE_LABEL = "kueue.x-k8s.io/queue-name"


def _labels(job: Job) -> dict:
    return {"app.kubernetes.io/name": job.name, "app.kubernetes.io/managed-by": "envbuild"}


def _command(job: Job) -> str:
    """The command every pod runs: the job's one command, or a ``case`` on the node rank where
    the ranks run different commands (MegatronApp's master and worker scripts)."""
    if job.mode != "pods" or len(set(job.commands)) == 1:
        return job.commands[0]
    lines = ['case "$ENVBUILD_NODE_RANK" in']
    for rank, command in enumerate(job.commands):
        lines += [f"  {rank})", f"    {command}", "    ;;"]
    lines += ["  *)", "    echo " + q("envbuild: no command for node rank ") + '"$ENVBUILD_NODE_RANK" >&2',
              "    exit 2", "    ;;", "esac"]
    return "\n".join(lines)


def manifests(job: Job) -> list[dict]:
    """The job's manifests: across nodes, the headless Service of a plain Indexed Job (the
    controllers of the other workloads make their own), then the workload itself."""
    opts = job.options
    namespace = (opts.namespace if opts else None) or DEFAULT_NAMESPACE
    workload = opts.k8s_workload if opts else "job"
    jobset, pytorchjob, trainjob = workload == "jobset", workload == "pytorchjob", workload == "trainjob"
    port = job.master_port if job.master_port else PORT
    # a JobSet's controller makes the headless Service (named after the JobSet) and each pod's
    # hostname, <jobset>-<replicated job>-<job index>-<pod index>; the training operator makes
    # a Service per replica, the master's <job>-master-0
    service = job.name if (jobset or trainjob) else f"{job.name}-rdzv"
    first = (f"{job.name}-{REPLICATED_JOB}-0-0" if jobset else f"{job.name}-{TRAINER_NODE}-0-0" if trainjob
             else f"{job.name}-0")
    master = (f"{job.name}-master-0" if pytorchjob else f"{first}.{service}") if job.nodes > 1 else "127.0.0.1"
    labels = _labels(job)
    docs: list[dict] = []
    controller_named = jobset or pytorchjob or trainjob  # their controllers make the Service, name the pods
    if job.nodes > 1 and not controller_named:
        docs.append(_service(job, service, namespace, labels, port))
    container = _main_container(job, workload, master, port)
    pod = _pod(job, container, labels, None if controller_named else service)
    queue = opts.kueue_queue if opts else None
    metadata = {"name": job.name, "namespace": namespace,
                "labels": {**labels, **({KUEUE_LABEL: queue} if queue else {})},
                "annotations": {"envbuild/recipe": job.recipe, "envbuild/target": job.target,
                                **({"envbuild/replaced": job.replaced} if job.replaced else {})}}
    deadline = seconds_of(opts.time_limit) if opts and opts.time_limit else None
    docs.append(_workload(job, workload, metadata, container, pod, deadline))
    return docs


def _service(job: Job, service: str, namespace: str, labels: dict, port: int) -> dict:
    """The headless Service that names an Indexed Job's pods (``<job>-<i>.<service>``), its names
    resolving while the pods start: the rendezvous port, and the InfiniBand address exchange's."""
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": service, "namespace": namespace,
                         "labels": {**labels, "app.kubernetes.io/component": "rendezvous"}},
            "spec": {"clusterIP": "None", "publishNotReadyAddresses": True, "selector": labels,
                     "ports": [{"name": "rendezvous", "port": port, "targetPort": port}]
                     + ([{"name": "ib-addresses", "port": ADDRESS_PORT, "targetPort": ADDRESS_PORT}]
                        if job.address_var else [])}}


def _limits(job: Job) -> dict:
    """A pod's resource limits: the target's CPUs, memory, GPUs and RDMA device resource."""
    opts = job.options
    limits: dict = {"cpu": str(job.cpu_cores) if job.cpu_cores else None,
                    "memory": f"{job.memory_gib}Gi" if job.memory_gib else None}
    if job.gpus_per_node:
        limits["nvidia.com/gpu"] = job.gpus_per_node
    if job.infiniband:
        limits[opts.rdma_resource if opts else "rdma/hca_shared_devices_a"] = 1
    return {k: v for k, v in limits.items() if v is not None}


def _prelude(job: Job, workload: str) -> list[str]:
    """The task script's first lines in a pod: the job folder's files, the InfiniBand addresses,
    and the node rank where an operator gives it (PyTorchJob's RANK, the Trainer's PET_NODE_RANK)."""
    prelude = []
    for name, content in sorted(job.files.items()):
        prelude += heredoc(f'"$JOB_DIR"/{name}', content)
    if job.address_var:  # before the environment: the script needs only the image's python3
        prelude += [f"# {job.address_var}: every rank's InfiniBand address, gathered by pod 0 at start",
                    f'{job.address_var}="$(python3 "$JOB_DIR"/{ADDRESS_SCRIPT} --per-node '
                    f'"$ENVBUILD_NPROC_PER_NODE" --port {ADDRESS_PORT})"', f"export {job.address_var}"]
    if workload == "pytorchjob":  # the operator's RANK: the master 0, worker i i+1
        prelude = ["# the node rank: the training operator's RANK (master 0, worker i: i+1)",
                   'export ENVBUILD_NODE_RANK="${RANK:?the training operator sets RANK}"', *prelude]
    if workload == "trainjob":  # the Trainer's torch plugin: PET_NODE_RANK is the pod's completion index
        prelude = ["# the node rank: the Trainer's PET_NODE_RANK (the pod's completion index)",
                   'export ENVBUILD_NODE_RANK="${PET_NODE_RANK:?the Trainer sets PET_NODE_RANK}"', *prelude]
    return ['mkdir -p "$JOB_DIR"', *prelude]


def _main_container(job: Job, workload: str, master: str, port: int) -> dict:
    """The pod's one container: the image, the task script under ``bash -c``, the ENVBUILD_*
    variables (the node rank from the completion index, unless an operator gives it), the limits
    and the /dev/shm mount."""
    pytorchjob = workload == "pytorchjob"
    script = task_script(job, _prelude(job, workload), _command(job))
    rank = [] if workload in ("pytorchjob", "trainjob") else [{"name": "ENVBUILD_NODE_RANK", "valueFrom": {
        "fieldRef": {"fieldPath": f"metadata.annotations['{INDEX_ANNOTATION}']"}}}]
    env = [{"name": "ENVBUILD_JOB_ID", "value": job.name},
           {"name": "ENVBUILD_NNODES", "value": str(job.nodes)},
           *rank,
           {"name": "ENVBUILD_GPUS_PER_NODE", "value": str(job.gpus_per_node)},
           {"name": "ENVBUILD_NPROC_PER_NODE", "value": str(job.nproc_per_node)},
           {"name": "ENVBUILD_MASTER_ADDR", "value": master},
           {"name": "ENVBUILD_MASTER_PORT", "value": str(port)},
           *([] if pytorchjob else [{"name": "MASTER_ADDR", "value": master}]),  # the operator sets its own
           {"name": "JOB_DIR", "value": "/tmp/envbuild-job"}]
    container = {"name": "pytorch" if pytorchjob else "main", "image": job.container_image,
                 "command": ["bash", "-c", script], "env": env, "resources": {"limits": _limits(job)},
                 "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}]}
    if pytorchjob:  # the operator's MASTER_PORT is this port's
        container["ports"] = [{"name": "pytorchjob-port", "containerPort": port}]
    if job.infiniband and job.ipc_lock:  # the target says its namespace allows it (privileged level)
        container["securityContext"] = {"capabilities": {"add": ["IPC_LOCK"]}}
    return container


def _pod(job: Job, container: dict, labels: dict, subdomain: str | None) -> dict:
    """The pod spec: never restarted; across nodes, one pod per node (a required anti-affinity)
    named under ``subdomain`` (None: a controller names the pods); on the target's GPU product;
    a memory-backed /dev/shm of the target's size."""
    shm = {"medium": "Memory"} | ({"sizeLimit": job.shm_size} if job.shm_size else {})
    pod: dict = {"restartPolicy": "Never"}
    if job.nodes > 1:
        if subdomain is not None:
            pod["subdomain"] = subdomain
        pod["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": labels}, "topologyKey": HOSTNAME_KEY}]}}
    if job.gpu_product:  # GPU feature discovery's label: the GPUs the run was planned for
        pod["nodeSelector"] = {GPU_PRODUCT_LABEL: job.gpu_product}
    pod |= {"containers": [container], "volumes": [{"name": "dshm", "emptyDir": shm}]}
    return pod


def _workload(job: Job, workload: str, metadata: dict, container: dict, pod: dict, deadline: int | None) -> dict:
    """The workload of ``--k8s-workload``: an Indexed Job (alone, or as a JobSet's one replicated
    job), a PyTorchJob's Master and Workers, or a TrainJob; none restarts a failed rank, each
    stops at the wall time and is deleted after the target's TTL (a TrainJob has none)."""
    labels = _labels(job)
    limits_of_run = {"ttlSecondsAfterFinished": job.ttl_after_finished_s,
                     **({"activeDeadlineSeconds": deadline} if deadline else {})}
    spec = {"completionMode": "Indexed", "completions": job.nodes, "parallelism": job.nodes,
            "backoffLimit": 0, **({"activeDeadlineSeconds": deadline} if deadline else {}),
            "template": {"metadata": {"labels": labels}, "spec": pod}}
    if workload == "trainjob":
        return _trainjob(job, metadata, container, pod, deadline)
    if workload == "pytorchjob":
        template = {"metadata": {"labels": labels}, "spec": pod}
        replicas = {"Master": {"replicas": 1, "restartPolicy": "Never", "template": template}}
        if job.nodes > 1:
            replicas["Worker"] = {"replicas": job.nodes - 1, "restartPolicy": "Never", "template": template}
        return {"apiVersion": PYTORCHJOB_API, "kind": "PyTorchJob", "metadata": metadata,
                "spec": {"runPolicy": {"backoffLimit": 0, "cleanPodPolicy": "None", **limits_of_run},
                         "pytorchReplicaSpecs": replicas}}
    if workload == "jobset":
        return {"apiVersion": JOBSET_API, "kind": "JobSet", "metadata": metadata,
                "spec": {"failurePolicy": {"maxRestarts": 0},
                         "ttlSecondsAfterFinished": job.ttl_after_finished_s,
                         "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True},
                         "replicatedJobs": [{"name": REPLICATED_JOB, "replicas": 1,
                                             "template": {"metadata": {"labels": labels}, "spec": spec}}]}}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata,
            "spec": {**spec, "ttlSecondsAfterFinished": job.ttl_after_finished_s}}


def _trainjob(job: Job, metadata: dict, container: dict, pod: dict, deadline: int | None) -> dict:
    """A Trainer v2 TrainJob on the torch-distributed runtime: the container's image, command,
    environment and limits as ``spec.trainer``; its /dev/shm mount, the pod's volumes, selector
    and anti-affinity (and IPC_LOCK where the target allows it) as a runtime patch."""
    trainer = {"image": container["image"], "command": container["command"], "env": container["env"],
               "numNodes": job.nodes, "numProcPerNode": job.nproc_per_node,
               "resourcesPerNode": container["resources"]}
    node = {"name": TRAINER_NODE, "volumeMounts": container["volumeMounts"],
            **({"securityContext": container["securityContext"]} if "securityContext" in container else {})}
    pod_patch = {k: v for k, v in pod.items() if k in ("volumes", "nodeSelector", "affinity")} | {"containers": [node]}
    labels = _labels(job)  # on every pod: the anti-affinity selects them
    patch = {"manager": "envbuild", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
        {"name": TRAINER_NODE, "template": {"spec": {"template": {"metadata": {"labels": labels},
                                                                  "spec": pod_patch}}}}]}}}}
    spec = {"runtimeRef": {"name": TRAINER_RUNTIME, "apiGroup": "trainer.kubeflow.org",
                           "kind": "ClusterTrainingRuntime"},
            **({"activeDeadlineSeconds": deadline} if deadline else {}),
            "trainer": trainer, "runtimePatches": [patch]}
    return {"apiVersion": TRAINJOB_API, "kind": "TrainJob", "metadata": metadata, "spec": spec}


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data) -> bool:  # every mapping written out: no &id001 anchors
        return True


def _str(dumper, value: str):
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def render(job: Job) -> str:
    head = "".join(f"# {line}\n" for line in job.header)
    head += "".join(f"# NOTE: {line}\n" for line in job.notes)
    body = yaml.dump_all(manifests(job), Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=100)
    return head + body
