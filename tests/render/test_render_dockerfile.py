"""The Dockerfile renderer on data: base images from the table, multi-stage extension builds,
cache-friendly layer order, labels, values as data. Fast (no engine; dockerfile-parse reads
the output)."""

from __future__ import annotations

import io
import os
import re
import subprocess


import pytest
from dockerfile_parse import DockerfileParser

from envbuild.inputs import find_lock
from envbuild.lock.location import SHIPPED_LOCKDIR
from envbuild.recipes import load_recipe
from envbuild.render import dockerfile
from envbuild.compat.base_images import CUDA_ROWS, choose
from envbuild.plan.image import image_plan
from envbuild.plan.placeholders import inventory_values
from envbuild.targets import load_target
from support.ib_inventory import profile_facts



def plan_of(recipe: str, target: str, **kw):
    rec, tgt = load_recipe(recipe), load_target(target)
    lock = find_lock(rec, tgt)
    text = (SHIPPED_LOCKDIR / recipe / f"{target}.lock").read_text() if lock is not None else None
    kw.setdefault("inventory", inventory_values([profile_facts(tgt)]))  # {inventory.*} patches
    return image_plan(rec, tgt, lock, lock_text=text, **kw)


def dfp(text: str) -> DockerfileParser:
    p = DockerfileParser(fileobj=io.BytesIO())
    p.content = text
    return p


def parsed(ip) -> list[dict]:
    return dfp(dockerfile.render(ip).files["Dockerfile"]).structure


@pytest.mark.parametrize("recipe,target,image", [
    ("cpu-reference", "local", "python:3.11-slim-bookworm"),
    ("opt-175b-azure", "azure-nd96", "nvidia/cuda:11.3.1-cudnn8-devel-ubuntu20.04"),
    ("alpa-megatron", "azure-nd96", "nvidia/cuda:11.1.1-cudnn8-devel-ubuntu20.04"),
    ("megatron-deepspeed-slurm", "slurm", "nvcr.io/nvidia/pytorch:22.02-py3"),
    ("megatronapp", "rtx4090-pod", "nvcr.io/nvidia/pytorch:23.04-py3"),
    ("polaris-megatron-deepspeed", "polaris", "nvidia/cuda:11.8.0-cudnn8-devel-ubuntu22.04"),
])
def test_base_image_from_recipe_or_torch_cuda(recipe: str, target: str, image: str) -> None:
    ip = plan_of(recipe, target)
    assert ip.base.image == image
    assert ip.base.source.startswith("https://")
    assert ip.prefix == f"/opt/envbuild/{recipe}" and ip.plan.backend == "venv"


def test_base_override_and_table_rows() -> None:
    assert plan_of("cpu-reference", "local", base="localhost/b:1").base.image == "localhost/b:1"
    assert all(r.nvcc and r.image.startswith("nvidia/cuda:") for r in CUDA_ROWS.values())
    assert choose(load_recipe("cpu-reference"), "cu113").image == CUDA_ROWS["cu113"].image


def test_extension_wheels_build_in_devel_and_install_in_runtime() -> None:
    ip = plan_of("alpa-megatron", "azure-nd96")
    ctx = dockerfile.render(ip)
    items = dfp(ctx.files["Dockerfile"]).structure
    froms = [i["value"] for i in items if i["instruction"] == "FROM"]
    assert froms == ["nvidia/cuda:11.1.1-cudnn8-devel-ubuntu20.04 AS env", "env AS devel", "env AS runtime"]
    stage_of, stage = {}, None
    for i in items:
        if i["instruction"] == "FROM":
            stage = i["value"].split()[-1]
        stage_of[i["startline"]] = stage
    def run(i) -> str:  # a RUN's text, each node tool action it runs spelled out from its file
        return re.sub(r"\S+/files/(actions/\S+\.json)", lambda m: ctx.files["envbuild/" + m.group(1)], i["value"])

    wheel_runs = [i for i in items if i["instruction"] == "RUN" and "bdist_wheel" in run(i)]
    assert len(wheel_runs) == 1 and stage_of[wheel_runs[0]["startline"]] == "devel"
    assert '"op": "wheel"' in run(wheel_runs[0]) and '"TORCH_CUDA_ARCH_LIST": "8.0"' in run(wheel_runs[0])
    copy_from = [i for i in items if i["instruction"] == "COPY" and i["value"].startswith("--from=devel")]
    assert len(copy_from) == 1 and stage_of[copy_from[0]["startline"]] == "runtime"
    runtime_runs = " ".join(run(i) for i in items if i["instruction"] == "RUN" and stage_of[i["startline"]] == "runtime")
    assert "src/apex" not in runtime_runs.replace("--find-links", "")  # the Apex tree stays in devel
    assert "src/megatron" in runtime_runs and '"op": "patch"' in runtime_runs
    tool = [i for i in items if i["instruction"] == "COPY" and "envbuild_node/" in i["value"]]
    assert [stage_of[i["startline"]] for i in tool] == ["devel", "runtime"]  # the node tool: once a stage


def test_layer_order_lock_dependent_last() -> None:
    items = parsed(plan_of("cpu-reference", "local"))
    kinds = [i["instruction"] for i in items]
    # every requirements COPY is right before its pip RUN
    for n, i in enumerate(items):
        if i["instruction"] == "COPY" and "/requirements/" in i["value"]:
            assert items[n + 1]["instruction"] == "RUN" and "-r " in items[n + 1]["value"]
    last_run = max(n for n, k in enumerate(kinds) if k == "RUN")
    label = kinds.index("LABEL")
    lock_copy = next(n for n, i in enumerate(items) if i["instruction"] == "COPY" and "envbuild.lock" in i["value"])
    assert last_run < lock_copy < label and kinds.index("ENV") > last_run
    assert kinds.index("RUN") < next(n for n, i in enumerate(items) if "pip-packages" in i["value"])


def test_a_base_pinned_by_digest_keeps_its_rows_facts_and_is_labelled_so() -> None:
    pinned = "nvidia/cuda:11.1.1-cudnn8-devel-ubuntu20.04@sha256:" + "ab" * 32
    ip = plan_of("alpa-megatron", "azure-nd96", base=pinned)
    assert ip.base.image == pinned and ip.base.digest == "sha256:" + "ab" * 32
    assert ip.base.nvcc == "11.1" and ip.base.apt_python  # the row of its tag
    text = dockerfile.render(ip).files["Dockerfile"]
    assert f"FROM {pinned} AS env" in text
    labels = dfp(text).labels
    assert labels["org.opencontainers.image.base.digest"] == "sha256:" + "ab" * 32
    assert "io.envbuild.base.pinned" not in labels
    tag = dfp(dockerfile.render(plan_of("alpa-megatron", "azure-nd96")).files["Dockerfile"]).labels
    assert tag["io.envbuild.base.pinned"].startswith("no: a tag") and "org.opencontainers.image.base.digest" not in tag
    bad = plan_of("cpu-reference", "local", base="localhost/b@sha256:123").base
    assert bad.digest is None  # not a sha256 digest: a tag-like reference, labelled unpinned


def test_labels_and_verify_files() -> None:
    ip = plan_of("alpa-megatron", "azure-nd96")
    ctx = dockerfile.render(ip)
    got = dfp(ctx.files["Dockerfile"]).labels
    assert got["io.envbuild.recipe"] == "alpa-megatron" and got["io.envbuild.lock.digest"] == ip.plan.lock_digest
    assert got["io.envbuild.source.apex"] == "e2083df5eb96643c61613b9df48dd4eea6b07690"
    assert got["org.opencontainers.image.base.name"].startswith("nvidia/cuda:11.1.1")
    spec = __import__("json").loads(ctx.files["envbuild/verify.json"])
    assert spec["modules"] == ["megatron", "apex", "amp_C"]
    assert "torch" in spec["packages"] and spec["packages"]["torch"].startswith("==1.8.2")
    assert "/opt/envbuild/alpa-megatron/src/apex" not in spec["sources"]  # built in devel only
    assert "envbuild/verify_image.py" in ctx.copies and "envbuild/assets/smoke/gpt.py" in ctx.copies


def test_infeasible_target_stops_at_the_first_run() -> None:
    ip = plan_of("alpa-megatron", "h100")
    assert not ip.feasible
    text = dockerfile.render(ip).files["Dockerfile"]
    assert "PREFLIGHT REFUSED THIS TARGET" in text
    first_run = next(line for line in text.splitlines() if line.startswith("RUN "))
    assert "preflight refused this node" in first_run and "exit 1" in first_run


def test_values_are_data_in_env_and_labels() -> None:
    """``\\$`` keeps ``$`` literal in ENV/LABEL (podman 4.3 gives ``a$HOME "q" b\\c`` for
    ``ENV A="a\\$HOME \\"q\\" b\\\\c"``; dockerfile-parse does not unescape, so it is not used here)."""
    assert dockerfile.dq('a"$HOME`x`\\') == '"a\\"\\$HOME`x`\\\\"'
    assert dockerfile.dq("two\nlines") == '"two\\nlines"'


def test_wheelhouse_wheels_are_mounted_not_copied() -> None:
    ip = plan_of("cpu-reference", "local", wheelhouse=True)
    ctx = dockerfile.render(ip)
    assert ctx.wheels == ["torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"]
    text = ctx.files["Dockerfile"]
    assert "--mount=type=bind,source=wheelhouse,target=/opt/envbuild/wheelhouse" in text
    assert "COPY wheelhouse" not in text


def test_a_package_without_a_hash_fails_the_render_unless_accepted_by_name(tmp_path):
    """OPT's torch 1.10.1+cu113 has no verified hash in its lock: provision refuses it without
    --allow-unverified torch, and so does every render (nothing written); accepted, the CI
    workflow's own render names it too."""
    from support.clirun import envbuild

    out = tmp_path / "ctx"
    p = envbuild("render", "opt-175b-azure", "--target", "azure-nd96", "--format", "dockerfile", "-o", str(out))
    assert p.returncode == 1 and "no verified hash in the lock: torch" in p.stderr and "--allow-unverified" in p.stderr
    assert not out.exists()
    p = envbuild("render", "opt-175b-azure", "--target", "azure-nd96", "--format", "dockerfile", "-o", str(out),
                 "--allow-unverified", "torch")
    assert p.returncode == 0, p.stderr
    assert (out / "Dockerfile").is_file()
    wf = tmp_path / "ci"
    p = envbuild("render", "opt-175b-azure", "--target", "azure-nd96", "--format", "ci", "-o", str(wf),
                 "--allow-unverified", "torch", "--envbuild-source", "git+https://example.org/envbuild.git@" + "0" * 40)
    assert p.returncode == 0, p.stderr
    text = "\n".join(f.read_text() for f in wf.rglob("*.yml"))
    assert "--format dockerfile -o build/context --allow-unverified torch" in text


def test_the_nodes_own_settings_are_given_at_run_time_not_baked_into_env():
    """Azure ND96's NCCL/UCX settings, its topology file on the host and its /mnt cache are the
    node's: the image's ENV holds only the environment's, host.env the node's (docker --env-file)."""
    ctx = dockerfile.render(plan_of("opt-175b-azure", "azure-nd96"))
    env = dfp(ctx.files["Dockerfile"]).envs
    assert env["VIRTUAL_ENV"] == "/opt/envbuild/opt-175b-azure"
    assert not {"NCCL_TOPO_FILE", "PIP_CACHE_DIR", "NCCL_SOCKET_IFNAME"} & set(env), env
    host = dict(line.split("=", 1) for line in ctx.files["host.env"].splitlines())
    assert host["NCCL_TOPO_FILE"] == "/opt/microsoft/ndv4-topo.xml" and host["PIP_CACHE_DIR"] == "/mnt/.cache/pip"
    assert "docker run --env-file host.env" in ctx.files["Dockerfile"].replace("\n# ", " ")
    # a target without settings of its own: no host.env
    assert "host.env" not in dockerfile.render(plan_of("cpu-reference", "local")).files


def test_a_node_setting_with_a_line_break_is_refused_not_split_into_two_variables():
    """The image plan refuses it (host.env holds one line per variable, values verbatim)."""
    from envbuild.errors import InputError

    rec, tgt = load_recipe("opt-175b-azure"), load_target("azure-nd96")
    tgt = tgt.model_copy(update={"env": {**tgt.env, "NCCL_SOCKET_IFNAME": "eth0\nLD_PRELOAD=/tmp/x.so"}})
    with pytest.raises(InputError, match="NCCL_SOCKET_IFNAME holds a line break"):
        image_plan(rec, tgt, None, inventory=inventory_values([profile_facts(tgt)]))


def _stages(items: list[dict]) -> list[tuple[str, dict]]:
    """(stage name, instruction) for each instruction, in order."""
    out, stage = [], None
    for i in items:
        if i["instruction"] == "FROM":
            stage = i["value"].split()[-1]
        out.append((stage, i))
    return out


@pytest.mark.parametrize("recipe,target", [("opt-175b-azure", "azure-nd96"), ("alpa-megatron", "h100")])
def test_build_parallelism_is_a_build_argument_sized_on_the_build_machine(recipe, target) -> None:
    """The Apex build's MAX_JOBS is `ARG MAX_JOBS=` in the stage that builds it, declared right
    before that RUN: unset or empty, the build machine's cores capped by the planned value (96
    for ND96's cores and memory, 1 for the H100 profile's); `--build-arg MAX_JOBS=N` wins; a
    value that is not a positive whole number stops the build with a message. The RUN's own
    words run in bash here, with the variable as Docker sets it for each case."""
    ip = plan_of(recipe, target)
    planned = ip.plan.apex_builds()[0].params.env["MAX_JOBS"]
    items = _stages(parsed(ip))
    n_run, (stage, run) = next((n, x) for n, x in enumerate(items)
                               if x[1]["instruction"] == "RUN" and "MAX_JOBS" in x[1]["value"])
    args = [(n, x) for n, x in enumerate(items) if x[1]["instruction"] == "ARG" and x[1]["value"] == "MAX_JOBS="]
    assert len(args) == 1 and args[0][1][0] == stage == "devel" and args[0][0] < n_run, args
    assert all(i["instruction"] != "RUN" for _, i in items[args[0][0] + 1:n_run])  # no layer between
    body = run["value"]
    word = re.search(r'MAX_JOBS="\$\{MAX_JOBS:-\$\(\( \$\(nproc\) < (\d+) \? \$\(nproc\) : \1 \)\)\}"', body)
    assert word and word.group(1) == planned, body
    check = re.search(r'case "\$\{MAX_JOBS:-1\}" in .*? esac', body).group(0)
    script = f"{check} && env {word.group(0)} sh -c 'echo \"$MAX_JOBS\"'"
    cores = int(subprocess.run(["nproc"], capture_output=True, text=True, check=True).stdout)
    for shell in ("bash", "sh"):  # sh: what a RUN runs in
        for given, want in [(None, min(cores, int(planned))), ("", min(cores, int(planned))), ("4", 4), ("200", 200)]:
            env = {k: v for k, v in os.environ.items() if k != "MAX_JOBS"} | ({} if given is None else {"MAX_JOBS": given})
            out = subprocess.run([shell, "-c", script], env=env, capture_output=True, text=True)
            assert out.returncode == 0 and int(out.stdout) == want, (shell, given, out)
        for bad in ("abc", "0", "-3", "4 5"):
            out = subprocess.run([shell, "-c", script], env={**os.environ, "MAX_JOBS": bad}, capture_output=True,
                                 text=True)
            assert out.returncode == 2 and out.stdout == "", (shell, bad, out)
            assert f"--build-arg MAX_JOBS={bad}: not a positive whole number" in out.stderr


def test_build_parallelism_is_declared_once_per_stage_and_only_in_the_dockerfile() -> None:
    """Polaris's two pip steps that build flash-attention share one ARG in their stage; the
    Apptainer definition (no build arguments) keeps the capped value."""
    ip = plan_of("polaris-megatron-deepspeed", "polaris")
    text = dockerfile.render(ip).files["Dockerfile"]
    assert text.count("\nARG MAX_JOBS=\n") == 1 and text.count('MAX_JOBS="${MAX_JOBS:-$(( $(nproc) < 8') == 2
    from envbuild.render import apptainer

    definition = apptainer.render(ip).files["envbuild.def"]
    assert 'MAX_JOBS="$(( $(nproc) < 8 ? $(nproc) : 8 ))"' in definition and "${MAX_JOBS" not in definition
