"""envbuild.launch renderers: golden files for every launch script and manifest, shellcheck on
every generated script (the batch scripts and the task scripts they write), the Kubernetes
manifests validated offline against the Kubernetes schema, and the refusals.

No PBS server and no Kubernetes API run here: PBS scripts and pod manifests are checked as
text (golden, shellcheck, schema) only. Slurm scripts are also submitted to a real Slurm
cluster in tests/launch/test_launch_slurm.py.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

from envbuild.errors import InputError
from envbuild.launch import LaunchOptions, build_job, render_job, render_launch
from envbuild.launch.k8s import API_VERSION
from envbuild.plan.build import PlanOptions
from envbuild.plan.resolve import resolve
from envbuild.recipes import load_recipe
from envbuild.targets import DATA, load_target
from support.ib_inventory import profile_facts
from support import paths
from support.launchcases import CASES, IMAGE, plan_for, render

GOLDEN = paths.GOLDEN / "launch"
HEREDOC = re.compile(r"<<'(ENVBUILD_EOF_[0-9a-f]+)'\n(.*?)\n\1\n", re.S)

@pytest.fixture(scope="module")
def rendered():
    return {name: render(name) for name in CASES}


@pytest.mark.parametrize("name", sorted(CASES))
def test_launch_matches_golden(name: str, rendered) -> None:
    r = rendered[name]
    path = GOLDEN / f"{name}.{r.filename.rsplit('.', 1)[1]}"
    if os.environ.get("ENVBUILD_UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(r.text)
    assert path.exists(), f"no golden file {path}; create it with ENVBUILD_UPDATE_GOLDEN=1"
    assert r.text == path.read_text(), f"launch changed; review and rerun with ENVBUILD_UPDATE_GOLDEN=1 ({path})"


def test_every_golden_file_has_a_case() -> None:
    stems = {p.name.rsplit(".", 1)[0] for p in GOLDEN.iterdir()}
    assert stems == set(CASES), "stale golden files: remove them or add their case"


def _scripts(rendered) -> dict[str, str]:
    """Every shell script the launches contain: the batch scripts, the task scripts they write
    (heredocs), and each pod's command."""
    out = {}
    for name, r in rendered.items():
        if r.filename.endswith(".yaml"):
            for doc in yaml.safe_load_all(r.text):
                if doc["kind"] == "TrainJob":
                    out[f"{name}-{doc['metadata']['name']}.sh"] = doc["spec"]["trainer"]["command"][2]
                    continue
                if doc["kind"] == "PyTorchJob":
                    pod = doc["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
                else:
                    jobs = [rj["template"] for rj in doc["spec"]["replicatedJobs"]] if doc["kind"] == "JobSet" else [doc]
                    pod = jobs[0].get("spec", {}).get("template", {}).get("spec", {})
                for c in pod.get("containers", []):
                    out[f"{name}-{doc['metadata']['name']}.sh"] = c["command"][2]
            continue
        out[f"{name}.sh"] = r.text
        for i, (_, body) in enumerate(HEREDOC.findall(r.text)):
            if body.startswith("#!"):
                out[f"{name}-task{i}.sh"] = body + "\n"
    return out


@pytest.mark.lint
def test_shellcheck_every_generated_script(rendered, tmp_path) -> None:
    scripts = _scripts(rendered)
    assert all(any(key.startswith(f"{case}.") or key.startswith(f"{case}-") for key in scripts) for case in CASES)
    assert sum(key.endswith(tuple(f"-task{i}.sh" for i in range(9))) for key in scripts) >= 10  # heredocs found
    for name, text in scripts.items():
        (tmp_path / name).write_text(text)
    proc = subprocess.run(["shellcheck", "--shell=bash", "--severity=style", *sorted(scripts)],
                          cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.lint
def test_manifests_validate_against_the_kubernetes_schema(rendered) -> None:
    import kubernetes_validate

    docs = [d for r in rendered.values() if r.filename.endswith(".yaml") for d in yaml.safe_load_all(r.text)]
    assert {d["kind"] for d in docs} == {"Job", "Service", "JobSet", "PyTorchJob", "TrainJob"}
    for doc in docs:
        if doc["kind"] == "TrainJob":  # a CRD: the trainer's container and the patched pod as a v1 Pod
            trainer = doc["spec"]["trainer"]
            (rj,) = doc["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
            patch = rj["template"]["spec"]["template"]
            (node,) = patch["spec"]["containers"]
            container = {"name": node["name"], "image": trainer["image"], "command": trainer["command"],
                         "env": trainer["env"], "resources": trainer["resourcesPerNode"], **node}
            pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "node", **patch["metadata"]},
                   "spec": {**patch["spec"], "containers": [container], "restartPolicy": "Never"}}
            kubernetes_validate.validate(pod, API_VERSION, strict=True)
            continue
        if doc["kind"] == "PyTorchJob":  # a CRD: each replica's pod template is a v1 Pod's
            for role, replica in doc["spec"]["pytorchReplicaSpecs"].items():
                pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": role.lower(), **replica["template"]["metadata"]},
                       "spec": replica["template"]["spec"]}
                kubernetes_validate.validate(pod, API_VERSION, strict=True)
            continue
        if doc["kind"] == "JobSet":  # a CRD the schema does not know: its Job template is a batch/v1 Job
            for rj in doc["spec"]["replicatedJobs"]:
                doc = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": rj["name"]},
                       "spec": rj["template"]["spec"]}
                kubernetes_validate.validate(doc, API_VERSION, strict=True)
            continue
        kubernetes_validate.validate(doc, API_VERSION, strict=True)  # raises on any schema error


def test_a_jobset_runs_the_same_indexed_job_and_names_pod_0_as_its_controller_does(rendered) -> None:
    """--k8s-workload jobset: one JobSet whose one replicated job is the Job the default renders
    (same pods, same rank source, same anti-affinity), no Service of our own (the JobSet
    controller makes it, named after the JobSet), and MASTER_ADDR the hostname JobSet gives
    pod 0: <jobset>-<replicated job>-0-0.<jobset>."""
    (jobset,) = yaml.safe_load_all(rendered["megatronapp--rtx4090-pod--k8s-two-pods-jobset"].text)
    _, job = yaml.safe_load_all(rendered["megatronapp--rtx4090-pod--k8s-two-pods"].text)
    assert (jobset["apiVersion"], jobset["kind"]) == ("jobset.x-k8s.io/v1alpha2", "JobSet")
    spec = jobset["spec"]
    assert spec["failurePolicy"] == {"maxRestarts": 0}
    assert spec["network"] == {"enableDNSHostnames": True, "publishNotReadyAddresses": True}
    (rj,) = spec["replicatedJobs"]
    inner = rj["template"]["spec"]
    assert rj["replicas"] == 1 and (inner["completionMode"], inner["completions"], inner["backoffLimit"]) == \
        ("Indexed", 2, 0)
    pod, default_pod = inner["template"]["spec"], job["spec"]["template"]["spec"]
    assert "subdomain" not in pod and pod["affinity"] == default_pod["affinity"]
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in pod["containers"][0]["env"]}
    default_env = {e["name"]: e.get("value", e.get("valueFrom")) for e in default_pod["containers"][0]["env"]}
    name = jobset["metadata"]["name"]
    assert env["MASTER_ADDR"] == env["ENVBUILD_MASTER_ADDR"] == f"{name}-{rj['name']}-0-0.{name}"
    assert env["ENVBUILD_NODE_RANK"] == default_env["ENVBUILD_NODE_RANK"]
    assert {k: v for k, v in env.items() if "MASTER_ADDR" not in k} == \
        {k: v for k, v in default_env.items() if "MASTER_ADDR" not in k}
    assert pod["containers"][0]["command"][2].replace(env["MASTER_ADDR"], "M") == \
        default_pod["containers"][0]["command"][2].replace(default_env["MASTER_ADDR"], "M")


def test_two_pods_are_one_indexed_job_on_two_nodes(rendered) -> None:
    svc, job = yaml.safe_load_all(rendered["megatronapp--rtx4090-pod--k8s-two-pods"].text)
    spec, pod = job["spec"], job["spec"]["template"]["spec"]
    assert (job["kind"], spec["completionMode"], spec["completions"], spec["parallelism"], spec["backoffLimit"]) \
        == ("Job", "Indexed", 2, 2, 0)
    # pod i is <job>-i.<service>: the Service selects the job's pods and is their subdomain
    assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["publishNotReadyAddresses"] is True
    assert svc["spec"]["selector"] == job["spec"]["template"]["metadata"]["labels"]
    assert pod["subdomain"] == svc["metadata"]["name"]
    # every pod on its own node
    (term,) = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term == {"labelSelector": {"matchLabels": job["spec"]["template"]["metadata"]["labels"]},
                    "topologyKey": "kubernetes.io/hostname"}
    (c,) = pod["containers"]
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in c["env"]}
    master = f"{job['metadata']['name']}-0.{svc['metadata']['name']}"
    assert env["ENVBUILD_MASTER_ADDR"] == env["MASTER_ADDR"] == master and env["ENVBUILD_MASTER_PORT"] == "6000"
    # the rank is the completion index the Job controller gives each pod
    assert env["ENVBUILD_NODE_RANK"] == {"fieldRef": {"fieldPath":
                                                      "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}
    assert c["image"] == IMAGE
    assert c["resources"]["limits"] == {"cpu": "16", "memory": "200Gi", "nvidia.com/gpu": 4,
                                        "rdma/hca_shared_devices_a": 1}
    assert pod["volumes"] == [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}}]
    assert c["volumeMounts"] == [{"name": "dshm", "mountPath": "/dev/shm"}]
    assert ". /opt/envbuild/megatronapp/.envbuild/env.sh" in c["command"][2]


def test_a_trainjob_runs_on_the_trainers_torch_runtime_with_its_rank(rendered, tmp_path) -> None:
    """--k8s-workload trainjob: Kubeflow Trainer v2's TrainJob on the torch-distributed runtime,
    two nodes of 4 ranks, the same pod script as the Indexed Job's but for its rank, which is
    the Trainer's PET_NODE_RANK (run here with bash: rank 1 runs the worker's script; without
    PET_NODE_RANK the script stops), the rendezvous host the first pod the Trainer's JobSet names,
    every pod on its own node (the anti-affinity selects the labels the patch gives them)."""
    (tj,) = yaml.safe_load_all(rendered["megatronapp--rtx4090-pod--k8s-two-pods-trainjob"].text)
    (_, job) = yaml.safe_load_all(rendered["megatronapp--rtx4090-pod--k8s-two-pods"].text)
    spec = tj["spec"]
    assert (tj["apiVersion"], spec["runtimeRef"]) == ("trainer.kubeflow.org/v1alpha1", {
        "name": "torch-distributed", "apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime"})
    trainer = spec["trainer"]
    assert (trainer["numNodes"], trainer["numProcPerNode"], trainer["image"]) == (2, 4, IMAGE)
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in trainer["env"]}
    assert env["ENVBUILD_MASTER_ADDR"] == "envbuild-megatronapp-node-0-0.envbuild-megatronapp"
    assert "ENVBUILD_NODE_RANK" not in env and not any(name.startswith("PET_") for name in env)  # the Trainer's
    (rj,) = spec["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    pod = rj["template"]["spec"]["template"]
    (term,) = pod["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["labelSelector"]["matchLabels"] == pod["metadata"]["labels"]
    assert spec["runtimePatches"][0]["manager"] == "envbuild" and rj["name"] == "node"
    script = trainer["command"][2]
    indexed = job["spec"]["template"]["spec"]["containers"][0]["command"][2]
    assert script.replace("the Trainer's PET_NODE_RANK (the pod's completion index)", "").replace(
        'export ENVBUILD_NODE_RANK="${PET_NODE_RANK:?the Trainer sets PET_NODE_RANK}"\n', "").replace(
        "# the node rank: \n", "") == indexed
    for name in ("run_master.sh", "run_worker.sh"):
        (tmp_path / name).write_text(f"echo ran {name}\n")
    (tmp_path / "examples" / "megatron4.0").mkdir(parents=True)
    (tmp_path / "examples/megatron4.0/pretrain_gpt_distributed_small.sh").write_text("MASTER_ADDR=x\n")
    rank_line = 'export ENVBUILD_NODE_RANK="${PET_NODE_RANK:?the Trainer sets PET_NODE_RANK}"\n'
    body = rank_line + script[script.index('case "$ENVBUILD_NODE_RANK" in'):]
    base = {"PATH": os.environ["PATH"], "ENVBUILD_MASTER_ADDR": env["ENVBUILD_MASTER_ADDR"]}
    p = subprocess.run(["bash", "-c", body], cwd=tmp_path, env={**base, "PET_NODE_RANK": "1"},
                       capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout == "ran run_worker.sh\n", p.stderr
    p = subprocess.run(["bash", "-c", body], cwd=tmp_path, env=base, capture_output=True, text=True)
    assert p.returncode != 0 and "the Trainer sets PET_NODE_RANK" in p.stderr and "ran" not in p.stdout


@pytest.mark.parametrize("rank,script", [("0", "run_master.sh"), ("1", "run_worker.sh")])
def test_two_pods_rank_picks_master_or_worker_script(rendered, tmp_path, rank, script) -> None:
    """The pod script runs for real with bash: each rank runs its own published script, any
    other rank is refused (the scripts are stand-ins that print their name)."""
    _, job = yaml.safe_load_all(rendered["megatronapp--rtx4090-pod--k8s-two-pods"].text)
    text = job["spec"]["template"]["spec"]["containers"][0]["command"][2]
    body = text[text.index('case "$ENVBUILD_NODE_RANK" in'):]
    for name in ("run_master.sh", "run_worker.sh"):
        (tmp_path / name).write_text(f"echo ran {name}\n")
    (tmp_path / "examples" / "megatron4.0").mkdir(parents=True)
    (tmp_path / "examples/megatron4.0/pretrain_gpt_distributed_small.sh").write_text("MASTER_ADDR=192.168.0.2\n")
    env = {"PATH": os.environ["PATH"], "ENVBUILD_NODE_RANK": rank, "ENVBUILD_MASTER_ADDR": "envbuild-megatronapp-0.rdzv"}
    p = subprocess.run(["bash", "-c", body], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout == f"ran {script}\n", p.stderr
    edited = (tmp_path / "examples/megatron4.0/pretrain_gpt_distributed_small.sh").read_text()
    assert edited == "MASTER_ADDR=envbuild-megatronapp-0.rdzv\n"
    p = subprocess.run(["bash", "-c", body], cwd=tmp_path, env={**env, "ENVBUILD_NODE_RANK": "2"},
                       capture_output=True, text=True)
    assert p.returncode == 2 and "no command for node rank 2" in p.stderr


def test_two_pods_fill_the_addresses_before_their_scripts(rendered, tmp_path) -> None:
    """The pod script writes envbuild/node/ib_addresses.py into the job folder and sets
    MEGATRONAPP_IB_ADDRESSES from it before the environment and the rank's script; the Service
    publishes the port pod 0 gathers on. Those lines run here for real in bash (one node, this
    machine's /sys: no InfiniBand, so the node's ranks get 127.0.0.1)."""
    from envbuild.node import ib_addresses

    svc, job = yaml.safe_load_all(rendered["megatronapp--rtx4090-pod--k8s-two-pods"].text)
    assert {"name": "ib-addresses", "port": ib_addresses.PORT, "targetPort": ib_addresses.PORT} \
        in svc["spec"]["ports"]
    text = job["spec"]["template"]["spec"]["containers"][0]["command"][2]
    start = text.index('cat > "$JOB_DIR"/ib_addresses.py')
    end = text.index("export MEGATRONAPP_IB_ADDRESSES\n") + len("export MEGATRONAPP_IB_ADDRESSES\n")
    assert end < text.index(". /opt/envbuild/megatronapp/.envbuild/env.sh") < text.index('case "$ENVBUILD_NODE_RANK"')
    lines = "set -euo pipefail\n" + text[start:end] + 'echo "$MEGATRONAPP_IB_ADDRESSES"\n'
    env = {"PATH": os.environ["PATH"], "JOB_DIR": str(tmp_path), "ENVBUILD_NNODES": "1", "ENVBUILD_NODE_RANK": "0",
           "ENVBUILD_NPROC_PER_NODE": "4"}
    p = subprocess.run(["bash", "-c", lines], env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout == "127.0.0.1,127.0.0.1,127.0.0.1,127.0.0.1\n", p.stderr
    assert (tmp_path / "ib_addresses.py").read_text() == Path(ib_addresses.__file__).read_text()
    # a node of two without an address stops the pod before anything runs
    p = subprocess.run(["bash", "-c", lines], env={**env, "ENVBUILD_NNODES": "2", "ENVBUILD_NODE_RANK": "1"},
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and p.stdout == "" and "no IPv4 address" in p.stderr
    # the smoke replaces the training command: nothing reads the addresses
    assert "MEGATRONAPP_IB_ADDRESSES" not in rendered["megatronapp--rtx4090-pod--k8s-smoke"].text


def test_kubernetes_needs_a_pushed_image() -> None:
    recipe, target = load_recipe("megatronapp"), load_target("rtx4090-pod")
    with pytest.raises(InputError) as err:
        render_launch(recipe, target, plan_for(recipe, target), LaunchOptions(scheduler="k8s"))
    assert "pulls its image from a registry" in err.value.message
    assert "podman push" in err.value.hint and "--image" in err.value.hint


def test_activation_is_the_plans_env_file_and_nothing_installs(rendered) -> None:
    for name, r in rendered.items():
        recipe, target, _ = CASES[name]
        rec, tgt = load_recipe(recipe), load_target(target)
        env_file = plan_for(rec, tgt).step("env-file").params.path
        word = env_file.replace("~/", '"$HOME"/')
        assert f". {word}" in r.text, name
        assert not re.search(r"pip install|python3? -m venv|conda create|git clone", r.text), name


def test_published_launchers(rendered) -> None:
    snmg = rendered["megatron-deepspeed-slurm--slurm--slurm"].text
    assert 'deepspeed --num_gpus "$ENVBUILD_GPUS_PER_NODE"' in snmg and "--tensor-model-parallel-size 4" in snmg
    assert ("srun --nodes=1 --ntasks=1 --container-image="
            "/opt/envbuild/megatron-deepspeed-slurm/envbuild-megatron-deepspeed-slurm-slurm.sqsh") in snmg
    mnmg = rendered["megatron-deepspeed-slurm--slurm--slurm-multi-node"].text
    assert "#SBATCH --nodes=2" in mnmg and "--rdzv_backend c10d" in mnmg and "--pipeline-model-parallel-size 2" in mnmg
    assert 'ENVBUILD_MASTER_PORT="$((SLURM_JOB_ID % 16384 + 49152))"' in mnmg
    opt = rendered["opt-175b-azure--azure-nd96--slurm"].text
    for line in ("export NCCL_SOCKET_IFNAME=eth0", "export NCCL_TOPO_FILE=/opt/microsoft/ndv4-topo.xml",
                 "export UCX_NET_DEVICES=eth0", "export CUDA_DEVICE_ORDER=PCI_BUS_ID"):
        assert line in opt
    pbs = rendered["polaris-megatron-deepspeed--polaris--pbs-smoke"].text
    assert "module load conda/2023-10-04" in pbs
    assert 'mpiexec -n "$((ENVBUILD_NNODES * 4))" --ppn 4 --hostfile "$PBS_NODEFILE"' in pbs
    assert "#PBS -l select=2:ncpus=32:ngpus=4" in pbs
    # deviations hosfile-typo and single-job-guard: the job runs the training script once (it
    # calls mpiexec over $PBS_NODEFILE itself) and hands it no HOSTFILE
    for name in ("polaris-megatron-deepspeed--polaris--pbs", "polaris-megatron-deepspeed--polaris--pbs-2nodes"):
        native = rendered[name].text
        assert native.count("./ALCF/train-gpt3.sh\n") == 1 and "HOSTFILE" not in native, name


def test_replacement_is_said_in_the_script(rendered) -> None:
    for name in [n for n in CASES if n.endswith("-smoke")]:
        text = rendered[name].text
        assert "NOTE: --smoke-only: the training command" in text, name
        assert re.search(r"echo ['\"]envbuild: --smoke-only: the training command", text) \
            or "envbuild/replaced: '--smoke-only: the training command" in text, name


def _job(recipe, target, **kw):
    from envbuild.launch import build_job

    rec, tgt = load_recipe(recipe), load_target(target)
    return build_job(rec, tgt, plan_for(rec, tgt), LaunchOptions(**kw))


@pytest.mark.parametrize("recipe,target,kw,words", [
    ("polaris-megatron-deepspeed", "polaris", dict(scheduler="slurm"), "runs its jobs through pbs"),
    ("megatron-deepspeed-slurm", "slurm", dict(scheduler="slurm", variant="multi-node", nodes=1), "runs on 2+ node"),
    ("megatron-deepspeed-slurm", "slurm", dict(scheduler="slurm", gpus_per_node=2), "model parallel layout"),
    ("alpa-megatron", "slurm", dict(scheduler="slurm", nodes=2), "runs on 1 node"),
    ("alpa-megatron", "slurm", dict(scheduler="slurm", variant="8gpu", nodes=3), "no configuration for 24 GPUs"),
    ("alpa-megatron", "slurm", dict(scheduler="slurm", variant="16gpu"), "no variant '16gpu'"),
    ("opt-175b-azure", "azure-nd96", dict(scheduler="slurm", gpus_per_node=4), "runs 8 GPU(s) per node"),
    ("alpa-megatron", "h100", dict(scheduler="k8s"), "needs an image"),
    ("alpa-megatron", "slurm", dict(scheduler="slurm", output_dir="out dir"), "scheduler directive"),
    ("alpa-megatron", "slurm", dict(scheduler="slurm", smoke_only=True, command_override="true"), "not both"),
    # Polaris's qsub refuses a job without -A and -q: the flags that fix it are named
    # (the queue is chosen from the profile's queue table: tests below)
    ("polaris-megatron-deepspeed", "polaris", dict(scheduler="pbs"), "pass --account PROJECT, or set jobs.account"),
    ("polaris-megatron-deepspeed", "polaris", dict(scheduler="pbs", account="p", time_limit="1h"), "not HH:MM:SS"),
    ("polaris-megatron-deepspeed", "polaris", dict(scheduler="pbs"), "https://docs.alcf.anl.gov/polaris/running-jobs/"),
    ("polaris-megatron-deepspeed", "polaris", dict(scheduler="pbs", account="p", partition="debug\n#PBS -W x"),
     "scheduler directive cannot hold"),
    ("alpa-megatron", "slurm", dict(scheduler="slurm", account="a b"), "scheduler directive cannot hold"),
    ("megatron-deepspeed-slurm", "slurm", dict(scheduler="slurm", nodes=2), "use --variant multi-node for 2 nodes"),
])
def test_refusals_say_why(recipe, target, kw, words) -> None:
    with pytest.raises(InputError) as exc:
        _job(recipe, target, **kw)
    assert words in str(exc.value) + str(exc.value.hint or "")


def _own_polaris(tmp_path, **jobs) -> Path:
    """An operator's copy of the shipped polaris target file with its own jobs defaults (and
    no queue table, unless given: the queue-table tests use the shipped one)."""
    data = yaml.safe_load((DATA / "polaris.yaml").read_text())
    data["jobs"].pop("queues")
    data["jobs"].update(jobs)
    path = tmp_path / "my-polaris.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _pbs(target, **kw) -> str:
    rec, tgt = load_recipe("polaris-megatron-deepspeed"), load_target(target)
    return render_launch(rec, tgt, plan_for(rec, tgt), LaunchOptions(scheduler="pbs", **kw)).text


def test_a_target_file_with_account_and_queue_needs_no_flags(tmp_path) -> None:
    """jobs.account and jobs.queue in the operator's own target file become #PBS -A and -q, and
    the header says they came from the profile; with the same values as flags the directives
    are the shipped golden's."""
    text = _pbs(str(_own_polaris(tmp_path, account="myproject", queue="debug")))
    assert "#PBS -q debug\n#PBS -A myproject\n" in text
    assert "# account myproject: from the target profile (jobs.account)" in text
    assert "# queue debug: from the target profile (jobs.queue)" in text
    flags = _pbs(str(_own_polaris(tmp_path)), account="myproject", partition="debug")
    assert [x for x in text.splitlines() if x.startswith("#PBS")] == \
        [x for x in flags.splitlines() if x.startswith("#PBS")]


def test_flags_win_over_the_target_profile(tmp_path) -> None:
    text = _pbs(str(_own_polaris(tmp_path, account="myproject", queue="debug")), account="other", partition="prod")
    assert "#PBS -q prod\n#PBS -A other\n" in text
    assert "myproject" not in text and "from the target profile" not in text
    # one from each: the flag's queue, the profile's account
    text = _pbs(str(_own_polaris(tmp_path, account="myproject", queue="debug")), partition="prod")
    assert "#PBS -q prod\n#PBS -A myproject\n" in text
    assert "(jobs.account)" in text and "(jobs.queue)" not in text


def test_a_profile_default_only_fills_what_it_has(tmp_path) -> None:
    with pytest.raises(InputError) as exc:
        _pbs(str(_own_polaris(tmp_path, account="myproject")))
    assert "without a queue (partition)" in str(exc.value) and "account" not in str(exc.value)
    assert exc.value.hint.startswith("pass --partition QUEUE, or set jobs.queue in your own copy")


def test_the_queue_comes_from_the_sites_limits(tmp_path) -> None:
    """Polaris's queue table (its user guide): 2 nodes for the recipe's expected 15 min x 2 go
    to debug, said in the header; 12 nodes to prod; --partition prod for 2 nodes is kept as
    asked and warned of (the issue's example asked -q prod for 2 nodes); a profile default that
    does not fit gives way to the first queue that does; --time longer than every queue's warns."""
    text = _pbs("polaris", account="p", nodes=2)
    assert "#PBS -l walltime=00:30:00\n" in text and "#PBS -q debug\n" in text
    assert "# time 00:30:00: twice the recipe's expected 15 min for its benchmark" in text
    assert "# queue debug: the first of the target's queues that takes 2 node(s) for 00:30:00" in text
    assert "#PBS -q prod\n" in _pbs("polaris", account="p", nodes=12)
    assert "#PBS -q debug-scaling\n" in _pbs("polaris", account="p", nodes=4)
    rec, tgt = load_recipe("polaris-megatron-deepspeed"), load_target("polaris")
    job = build_job(rec, tgt, plan_for(rec, tgt), LaunchOptions(scheduler="pbs", account="p", nodes=2,
                                                                 partition="prod"))
    assert job.options.partition == "prod"
    assert job.warnings == ("prod takes 10-496 nodes, the job asks 2 (https://docs.alcf.anl.gov/polaris/"
                            "running-jobs/ : qsub needs -A <project> and -q <queue>, e.g. -q debug or -q prod)",)
    assert "# WARNING: prod takes 10-496 nodes" in render_job(job).text
    data = yaml.safe_load((DATA / "polaris.yaml").read_text())
    data["jobs"]["queue"] = "prod"
    own = tmp_path / "prod-default.yaml"
    own.write_text(yaml.safe_dump(data))
    text = _pbs(str(own), account="p", nodes=2)
    assert "#PBS -q debug\n" in text and "the profile's prod does not fit (prod takes 10-496 nodes" in text
    job = build_job(rec, tgt, plan_for(rec, tgt), LaunchOptions(scheduler="pbs", account="p", nodes=2,
                                                                 time_limit="80:00:00"))
    assert job.warnings and job.warnings[0].startswith("the job (2 node(s), 80:00:00) fits none of the target's queues")
    assert "#PBS -q debug-scaling" not in render_job(job).text


def test_queue_fit_is_a_table_read(tmp_path) -> None:
    from envbuild.launch.queues import choose_queue, default_walltime, misfits
    from envbuild.targets.schema import Queue

    q = Queue(name="small", min_nodes=2, max_nodes=4, max_walltime="03:00:00")
    assert misfits(q, 3, "03:00:00") == []
    assert misfits(q, 1, "03:00:01") == ["small takes 2-4 nodes, the job asks 1",
                                          "small runs jobs for at most 03:00:00, the job asks 03:00:01"]
    assert misfits(Queue(name="big", min_nodes=8), 4, "01:00:00") == ["big takes 8 or more nodes, the job asks 4"]
    assert choose_queue(None, None, [], 2, "01:00:00").queue is None
    assert choose_queue("mine", None, [q], 3, "01:00:00").warnings[0].startswith("queue mine is not among")
    rec = load_recipe("cpu-reference")
    walltime, why = default_walltime(rec, smoke_only=True)
    smoke = next(r for r in rec.resources if r.experiment == "smoke")
    assert walltime == f"00:{max(10, int(-(-2 * smoke.minutes // 1))):02d}:00" and "smoke" in why


def test_a_job_on_every_gpu_of_its_nodes_is_exclusive() -> None:
    """Slurm: --exclusive when the job takes every GPU of its nodes, and --time always."""
    rec, tgt = load_recipe("megatron-deepspeed-slurm"), load_target("slurm")
    text = render_launch(rec, tgt, plan_for(rec, tgt), LaunchOptions(scheduler="slurm", variant="multi-node")).text
    assert "#SBATCH --exclusive\n" in text and "#SBATCH --time=" in text
    fewer = render_launch(rec, tgt, plan_for(rec, tgt), LaunchOptions(scheduler="slurm", variant="multi-node",
                                                                      smoke_only=True, gpus_per_node=1)).text
    assert "--exclusive" not in fewer


def test_the_site_requirement_is_for_its_scheduler_only() -> None:
    """Polaris's qsub needs -A and -q; a script run on the node itself (local) does not."""
    job = _job("polaris-megatron-deepspeed", "polaris", scheduler="local")
    assert job.options.account is None and job.options.partition is None


def test_values_are_quoted() -> None:
    job = _job("alpa-megatron", "slurm", scheduler="local", command_override="echo 'a b' $HOME")
    from envbuild.launch.local import render

    text = render(job)
    from envbuild.launch.job import say

    assert say(job.replaced)[-1] in text  # the note is one quoted word: its $HOME is printed
    assert say(job.replaced)[-1].startswith("echo 'envbuild: --command-override")
    assert "\necho 'a b' $HOME\n" in text  # the command is the user's shell text, as given
    assert '. "$HOME"/.envbuild/envs/alpa-megatron/.envbuild/env.sh' in text


def test_a_pytorchjob_has_a_master_and_workers_ranked_by_the_operator(rendered, tmp_path) -> None:
    """--k8s-workload pytorchjob: a Master replica and N-1 Workers of the default's pod (the
    container named pytorch, its port pytorchjob-port, no subdomain, no rank annotation); the
    node rank is the operator's RANK, read by the pod script itself (run here in bash)."""
    (pj,) = yaml.safe_load_all(rendered["megatronapp--rtx4090-pod--k8s-two-pods-pytorchjob"].text)
    assert (pj["apiVersion"], pj["kind"]) == ("kubeflow.org/v1", "PyTorchJob")
    assert pj["spec"]["runPolicy"] == {"backoffLimit": 0, "cleanPodPolicy": "None",
                                       "ttlSecondsAfterFinished": 86400, "activeDeadlineSeconds": 600}
    replicas = pj["spec"]["pytorchReplicaSpecs"]
    assert {k: v["replicas"] for k, v in replicas.items()} == {"Master": 1, "Worker": 1}
    assert replicas["Master"]["template"] == replicas["Worker"]["template"]
    pod = replicas["Master"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["name"] == "pytorch" and c["ports"] == [{"name": "pytorchjob-port", "containerPort": 6000}]
    assert "subdomain" not in pod and "podAntiAffinity" in pod["affinity"]
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in c["env"]}
    assert "MASTER_ADDR" not in env and "ENVBUILD_NODE_RANK" not in env  # the operator's to set
    assert env["ENVBUILD_MASTER_ADDR"] == f"{pj['metadata']['name']}-master-0"
    script = c["command"][2]
    line = next(x for x in script.splitlines() if x.startswith("export ENVBUILD_NODE_RANK="))
    p = subprocess.run(["bash", "-c", f'{line}\necho "$ENVBUILD_NODE_RANK"'], env={"PATH": os.environ["PATH"], "RANK": "1"},
                       capture_output=True, text=True)
    assert p.stdout == "1\n"
    p = subprocess.run(["bash", "-c", line], env={"PATH": os.environ["PATH"]}, capture_output=True, text=True)
    assert p.returncode != 0 and "the training operator sets RANK" in p.stderr
    assert script.index(line) < script.index('case "$ENVBUILD_NODE_RANK" in')


def _help_examples(command: str) -> list[list[str]]:
    """The command lines under "Examples:" in ``envbuild COMMAND --help``, continuation lines joined."""
    from envbuild.cli import _register, cli

    _register()
    text = cli.commands[command].help
    lines, joined = text[text.index("Examples:"):].splitlines()[1:], []
    for line in (x.strip() for x in lines):
        if not line.startswith("envbuild ") and not (joined and joined[-1].endswith("\\")):
            break
        joined.append(joined.pop()[:-1] + line if joined and joined[-1].endswith("\\") else line)
    return [shlex.split(x)[1:] for x in joined]


def test_every_launch_help_example_that_renders_runs_as_written(tmp_path) -> None:
    """What `envbuild launch --help` shows is what a user runs: each example that only renders
    (no --submit) exits 0 as written, in an empty folder, and writes its -o file. The Kubernetes
    one needs no facts: the pods find their InfiniBand addresses when they start."""
    from support.clirun import envbuild

    examples = _help_examples("launch")
    k8s = [a for a in examples if "k8s" in a]
    assert k8s and all("--facts" not in a and "--image" in a for a in k8s), examples
    rendering = [a for a in examples if "--submit" not in a]
    assert len(rendering) >= 3, examples
    for argv in rendering:
        res = envbuild(*argv, cwd=tmp_path, env={**os.environ, "ENVBUILD_HOME": str(tmp_path / "home")})
        assert res.returncode == 0, (argv, res.stderr)
        if "-o" in argv:
            assert (tmp_path / argv[argv.index("-o") + 1]).read_text().startswith("#"), argv
    image = k8s[0][k8s[0].index("--image") + 1]
    assert f"image: {image}" in (tmp_path / k8s[0][k8s[0].index("-o") + 1]).read_text()


def test_a_container_job_prepares_the_data_its_image_does_not_hold_before_training() -> None:
    """megatron-deepspeed-slurm's image holds no copy of its undigested downloads: the job runs
    the image's prepare.sh once, in one container, before the tasks (--stage into the job's
    folder: issue 38, data prepared once, no compute node fetching it again), and each task copies
    it (--from) after the environment and before the training command, said in a NOTE; the plan
    of a provisioned container node names the same script (its image context has it).
    --smoke-only (no training data read) and --no-container (the node's own data step) do not."""
    from envbuild.plan.resolve import default_backend
    from envbuild.plan.image import plan_digest, prepare_script, stage_name

    rec, tgt = load_recipe("megatron-deepspeed-slurm"), load_target("slurm")
    plan = plan_for(rec, tgt)
    script = "/opt/envbuild/megatron-deepspeed-slurm/.envbuild/files/prepare.sh"
    assert prepare_script(plan) == script
    # the staged folder is named for the image's plan: another image never reuses its data
    stage = stage_name(plan)
    assert stage == "envbuild-data-" + plan_digest(plan)[:12]
    for variant in (None, "multi-node"):
        text = render_launch(rec, tgt, plan, LaunchOptions(scheduler="slurm", variant=variant)).text
        task = HEREDOC.findall(text)[-1][1].splitlines()
        staged = f'"$JOB_DIR"/{stage}'
        assert task.index(f"sh {script} --from {staged}") < next(n for n, x in enumerate(task) if x.startswith("cd "))
        lines = text.splitlines()
        once = next(n for n, x in enumerate(lines) if x.endswith(f"sh {script} --stage {staged}"))
        assert lines[once].startswith("srun --nodes=1 --ntasks=1 --container-image=")
        assert once < max(n for n, x in enumerate(lines) if x.startswith("srun ") and x.endswith(".task.sh\""))
        assert f"NOTE: data: {script} --stage $JOB_DIR/{stage} runs once per job" in " ".join(
            x.removeprefix("# ") for x in lines)
    smoke = render_launch(rec, tgt, plan, LaunchOptions(scheduler="slurm", variant="multi-node", smoke_only=True,
                                                        gpus_per_node=2)).text
    assert "prepare.sh" not in smoke
    assert "prepare.sh" not in render_launch(rec, tgt, plan, LaunchOptions(scheduler="slurm", no_container=True)).text
    node = resolve(rec, tgt, profile_facts(tgt).model_copy(update={"container_engines": {"podman": "4.3.1"}}),
                   None, PlanOptions(backend=default_backend(rec, None), host="n1")).plan
    assert node.backend == "container" and prepare_script(node) == script
    image = node.image().params.image.plan
    assert stage_name(node) == "envbuild-data-" + plan_digest(image)[:12]
    other = plan_for(rec.model_copy(update={"env": {**rec.env, "ENVBUILD_TEST_CHANGE": "1"}}), tgt)
    assert stage_name(other) != stage
    # an image without such data has no prepare step: the k8s recipe's pods start training directly
    pod = render_launch(load_recipe("megatronapp"), load_target("rtx4090-pod"),
                        plan_for(load_recipe("megatronapp"), load_target("rtx4090-pod")),
                        LaunchOptions(scheduler="k8s", container_image=IMAGE)).text
    assert "prepare.sh" not in pod


def test_a_run_of_no_gpus_asks_for_none_on_a_gpu_target(tmp_path) -> None:
    """A recipe's run that says ``gpus_per_node: 0`` (a CPU program) is taken at its word on a
    target whose profile has GPUs (slurm: 8 a node): the job asks for none, where 0 once read as
    unsaid and the job was refused ("runs 0 GPU(s) per node, not 8"). A run that says nothing
    still takes the target's count, and --gpus-per-node is still held to what the run says."""
    from envbuild.shipped import RECIPES

    data = yaml.safe_load((RECIPES / "cpu-reference.yaml").read_text())
    del data["default"]
    data.update(name="my-cpu-run", targets=["slurm"])
    data["run"]["default"]["gpus_per_node"] = 0
    path = tmp_path / "my-cpu-run.yaml"
    path.write_text(yaml.safe_dump(data))
    rec, tgt = load_recipe(path), load_target("slurm")
    plan = plan_for(rec, tgt)
    r = render_launch(rec, tgt, plan, LaunchOptions(scheduler="slurm"))
    assert r.job.gpus_per_node == 0 and "--gres" not in r.text and "ENVBUILD_GPUS_PER_NODE=0" in r.text
    with pytest.raises(InputError, match="runs 0 GPU"):
        render_launch(rec, tgt, plan, LaunchOptions(scheduler="slurm", gpus_per_node=2))
    del data["run"]["default"]["gpus_per_node"]
    path.write_text(yaml.safe_dump(data))
    assert render_launch(load_recipe(path), tgt, plan, LaunchOptions(scheduler="slurm")).job.gpus_per_node == 8


def test_a_per_node_run_of_ones_own_starts_on_every_pbs_node(tmp_path) -> None:
    """A recipe's per-node run (a launcher on each node: torchrun with its rendezvous on the
    first) on PBS runs its task on every node of the job, one each, its node rank the node's
    (PALS), not once on the first node only. Polaris's own recipe runs once (its script starts
    its ranks with mpiexec) and keeps its single ``bash task``."""
    from envbuild.shipped import RECIPES

    data = yaml.safe_load((RECIPES / "alpa-megatron.yaml").read_text())
    data.pop("default", None)
    data.update(name="my-alpa-on-pbs", targets=["polaris"])
    path = tmp_path / "my-alpa-on-pbs.yaml"
    path.write_text(yaml.safe_dump(data))
    rec, tgt = load_recipe(path), load_target("polaris")
    assert rec.run_of("8gpu").launcher == "per-node"
    r = render_launch(rec, tgt, plan_for(rec, tgt),
                      LaunchOptions(scheduler="pbs", variant="8gpu", nodes=2, account="p", partition="debug"))
    assert r.job.mode == "per-node" and r.job.nodes == 2
    assert 'mpiexec -n "$ENVBUILD_NNODES" --ppn 1 --hostfile "$PBS_NODEFILE" --envall bash' in r.text
    assert 'export ENVBUILD_NODE_RANK="${PALS_NODEID:-${PMI_RANK:-0}}"' in r.text
    # the run's own multi-node arguments read the rank each node's task exported
    assert '--nnodes "${ENVBUILD_NNODES}" --node_rank "${ENVBUILD_NODE_RANK}"' in r.text, r.text
    once = render_launch(load_recipe("polaris-megatron-deepspeed"), tgt,
                         plan_for(load_recipe("polaris-megatron-deepspeed"), tgt),
                         LaunchOptions(scheduler="pbs", nodes=2, account="p", partition="debug")).text
    assert 'mpiexec -n "$ENVBUILD_NNODES" --ppn 1' not in once and "export ENVBUILD_NODE_RANK=0" in once


def test_every_rendered_workload_meets_the_pod_security_baseline(rendered) -> None:
    """Issue 40: the Kubernetes outputs pass the Pod Security baseline level (no IPC_LOCK unless
    the target says its namespace allows it), run in a namespace of their own, stop at the
    job's wall time and are deleted a day after they finish, on nodes labelled with the
    target's GPU product."""
    from envbuild.launch.k8s import GPU_PRODUCT_LABEL
    from envbuild.launch.podsecurity import baseline_violations

    for name, r in rendered.items():
        if not r.filename.endswith(".yaml"):
            continue
        docs = list(yaml.safe_load_all(r.text))
        assert baseline_violations(docs) == [], name
        assert {d["metadata"]["namespace"] for d in docs} == {"envbuild"}, name
        work = docs[-1]
        deadline = 3600 if name.endswith("smoke") else 600  # no smoke time in the recipe: one hour
        if work["kind"] == "Job":
            spec, pods = work["spec"], [work["spec"]["template"]["spec"]]
            assert spec["ttlSecondsAfterFinished"] == 86400 and spec["activeDeadlineSeconds"] == deadline, name
        elif work["kind"] == "JobSet":
            assert work["spec"]["ttlSecondsAfterFinished"] == 86400
            inner = work["spec"]["replicatedJobs"][0]["template"]["spec"]
            assert inner["activeDeadlineSeconds"] == 600
            pods = [inner["template"]["spec"]]
        elif work["kind"] == "TrainJob":  # no TTL field: the runtime's JobSet decides
            assert work["spec"]["activeDeadlineSeconds"] == 600
            (rj,) = work["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
            pods = [rj["template"]["spec"]["template"]["spec"]]
        else:
            policy = work["spec"]["runPolicy"]
            assert (policy["ttlSecondsAfterFinished"], policy["activeDeadlineSeconds"]) == (86400, 600)
            pods = [r["template"]["spec"] for r in work["spec"]["pytorchReplicaSpecs"].values()]
        for pod in pods:
            assert pod["nodeSelector"] == {GPU_PRODUCT_LABEL: "NVIDIA-GeForce-RTX-4090"}, name
            assert "securityContext" not in pod["containers"][0], name
        assert "IPC_LOCK is not added (the Pod Security baseline level refuses it)" in " ".join(
            x.removeprefix("# ") for x in r.text.splitlines() if x.startswith("#"))


def test_a_sites_kubernetes_names_come_from_its_target_copy(tmp_path) -> None:
    """jobs.namespace, kueue_queue, rdma_resource, gpu_product, ipc_lock and ttl in an operator's
    copy of rtx4090-pod; --namespace and --kueue-queue win; IPC_LOCK then breaks the baseline
    level, and the checker says where; a name Kubernetes would refuse is refused first."""
    from envbuild.launch.podsecurity import baseline_violations

    data = yaml.safe_load((DATA / "rtx4090-pod.yaml").read_text())
    data.setdefault("jobs", {}).update(namespace="ml-team", kueue_queue="gpu-queue", rdma_resource="rdma/ib",
                                       gpu_product="NVIDIA-GeForce-RTX-4090-D", ipc_lock=True, ttl_after_finished_s=600)
    own = tmp_path / "pods.yaml"
    own.write_text(yaml.safe_dump(data))
    rec, tgt = load_recipe("megatronapp"), load_target(str(own))
    text = render_launch(rec, tgt, plan_for(rec, tgt), LaunchOptions(scheduler="k8s", variant="two-pods",
                                                                     container_image=IMAGE)).text
    svc, job = yaml.safe_load_all(text)
    assert job["metadata"]["namespace"] == svc["metadata"]["namespace"] == "ml-team"
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "gpu-queue"
    assert job["spec"]["ttlSecondsAfterFinished"] == 600
    pod = job["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-GeForce-RTX-4090-D"}
    container = pod["containers"][0]
    assert container["resources"]["limits"]["rdma/ib"] == 1
    assert container["securityContext"] == {"capabilities": {"add": ["IPC_LOCK"]}}
    assert baseline_violations([svc, job]) == [
        "Job envbuild-megatronapp: spec.template.spec: Capabilities "
        "(containers[0].securityContext.capabilities.add: IPC_LOCK)"]
    flags = render_launch(rec, tgt, plan_for(rec, tgt), LaunchOptions(
        scheduler="k8s", variant="two-pods", container_image=IMAGE, namespace="other", kueue_queue="q2")).text
    _, job = yaml.safe_load_all(flags)
    assert job["metadata"]["namespace"] == "other" and job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "q2"
    with pytest.raises(InputError, match="not a Kubernetes name"):
        render_launch(rec, tgt, plan_for(rec, tgt), LaunchOptions(scheduler="k8s", container_image=IMAGE,
                                                                  namespace="Bad_Name"))


def test_the_baseline_checker_reads_every_control_it_lists() -> None:
    from envbuild.launch.podsecurity import BASELINE, baseline_violations

    pod = {"hostNetwork": True, "securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}],
                                                    "seccompProfile": {"type": "Unconfined"}},
           "volumes": [{"name": "h", "hostPath": {"path": "/"}}],
           "containers": [{"name": "c", "ports": [{"containerPort": 1, "hostPort": 80}],
                           "securityContext": {"privileged": True, "procMount": "Unmasked",
                                               "appArmorProfile": {"type": "Unconfined"},
                                               "windowsOptions": {"hostProcess": True},
                                               "capabilities": {"add": ["SYS_ADMIN", "CHOWN"]}}}]}
    found = baseline_violations([{"kind": "Pod", "metadata": {"name": "p"}, "spec": pod}])
    assert {f.split(": ")[2].split(" (")[0] for f in found} == {control for control, _ in BASELINE}
    assert not any("CHOWN" in f for f in found)


@pytest.mark.process
def test_a_pbs_job_brings_the_pack_to_each_node_through_mpiexec(tmp_path) -> None:
    """--packed on PBS (no sbcast there): before the task, mpiexec starts one rank per node and
    each copies the pack from the shared folder to its own disk, checks its sha256 and unpacks it
    at the prefix. The script passes shellcheck; the per-node command runs here with sh as a
    node would: it unpacks a genuine pack, and refuses a changed one (exit 1, nothing unpacked)."""
    from envbuild.bundle import envpack

    rec, tgt = load_recipe("polaris-megatron-deepspeed"), load_target("polaris")
    made = tmp_path / "made" / "env"
    (made / ".envbuild" / "state").mkdir(parents=True)
    (made / ".envbuild" / "env.sh").write_text("export X=1\n")
    for step in ("env-file", "smoke"):  # what --smoke-only reads from the pack (its markers)
        (made / ".envbuild" / "state" / f"{step}.done").write_text("0\n")
    (tmp_path / "shared").mkdir()
    packed = envpack.pack(made, tmp_path / "shared" / "env.tar.gz")
    plan = resolve(rec, tgt, profile_facts(tgt), None, PlanOptions(prefix=str(made), host="polaris")).plan
    text = render_launch(rec, tgt, plan, LaunchOptions(scheduler="pbs", nodes=2, smoke_only=True, account="p",
                                                       partition="debug", packed=packed)).text
    line = next(x for x in text.splitlines() if x.startswith("mpiexec -n \"$ENVBUILD_NNODES\" --ppn 1"))
    assert text.index(line) < text.index("# the task each rank")
    (tmp_path / "job.pbs").write_text(text)
    sc = subprocess.run(["shellcheck", "--shell=bash", "job.pbs"], cwd=tmp_path, capture_output=True, text=True)
    assert sc.returncode == 0, sc.stdout
    script = shlex.split(line)[-1]
    import shutil

    shutil.rmtree(made)  # the node's own disk: nothing there yet
    p = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert (made / ".envbuild" / "env.sh").read_text() == "export X=1\n" and "checked the pack" in p.stdout
    shutil.rmtree(made)
    data = bytearray(Path(packed.archive).read_bytes())
    data[len(data) // 2] ^= 0xFF
    Path(packed.archive).write_bytes(bytes(data))
    p = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "does not match its sha256" in p.stderr and not made.exists()
    with pytest.raises(InputError, match="--fanout is sbcast's"):  # no sbcast on PBS: refused, not ignored
        render_launch(rec, tgt, plan, LaunchOptions(scheduler="pbs", nodes=2, smoke_only=True, account="p",
                                                    partition="debug", packed=packed, fanout=2))
