"""A recipe's ``run`` section (envbuild.recipes.schema.Run): how each published command runs on
a cluster, as recipe data with sources. Malformed runs are refused where the file is read,
naming the file, the line and the field; the section stays out of the lock's recipe digest."""

from __future__ import annotations

import pytest
import yaml

from envbuild.catalog import digest
from envbuild.errors import InputError
from envbuild.recipes import DATA, load_recipe

BASE = load_recipe("alpa-megatron")


def write(tmp_path, run: dict, **bench) -> str:
    data = yaml.safe_load((DATA / "alpa-megatron.yaml").read_text())
    data["run"] = run
    data["benchmark"].update(bench)
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


ONCE = {"launcher": "once", "source": "s", "why": "w"}


@pytest.mark.parametrize("run, field, message", [
    ({"4gpus": ONCE}, "run", "neither 'default' nor a benchmark variant"),
    ({"default": {"launcher": "once", "why": "w"}}, "run.default.source", "required field is missing"),
    ({"default": {**ONCE, "launcher": "mpirun"}}, "run.default.launcher", "Input should be"),
    ({"default": {**ONCE, "launcher": "deepspeed"}}, "run.default", "argv is the program"),
    ({"default": {**ONCE, "argv": ["x.py"]}}, "run.default", "argv is the program"),
    ({"x": {**ONCE, "launcher": "pods", "pod_commands": ["nope"]}}, "run", "not among benchmark.variants"),
    ({"default": {**ONCE, "multi_node_args": ["--n"]}}, "run.default", "per-node launch only"),
    ({"default": {**ONCE, "nodes": 3}}, "run.default", "outside min_nodes..max_nodes"),
    ({"default": {**ONCE, "files": {"../x": "y"}}}, "run.default.files", "one plain name"),
    ({"default": {**ONCE, "output": {"source": "s", "why": "w"}}}, "run.default.output", "say where the output is"),
    ({"default": {**ONCE, "output": {"file": "/etc/x", "source": "s", "why": "w"}}}, "run.default.output",
     "inside the command's working folder"),
    ({"default": {**ONCE, "address_var": "A; rm"}}, "run.default.address_var", ""),
    ({"default": {**ONCE, "scheduler_options": {"pbs": ["-l x\nrm -rf ~"]}}}, "run.default.scheduler_options",
     "one flag and one value"),
    ({"default": {**ONCE, "scheduler_options": {"pbs": ["-l a=$(id)"]}}}, "run.default.scheduler_options",
     "one flag and one value"),
])
def test_a_malformed_run_is_refused_naming_file_line_and_field(tmp_path, run, field, message):
    path = write(tmp_path, run)
    with pytest.raises(InputError) as exc:
        load_recipe(path)
    text = str(exc.value) + " " + (exc.value.where or "")
    assert field in text and message in text, text
    assert (exc.value.where or "").startswith(path + ":"), exc.value.where  # file and line


def test_runs_of_the_shipped_recipes_are_read_and_typed():
    alpa = load_recipe("alpa-megatron")
    assert alpa.run_of(None).total_gpus == [1] and alpa.run_of("8gpu").launcher == "per-node"
    assert alpa.run_of("8gpu").multi_node_args[:2] == ["--nnodes", "$ENVBUILD_NNODES"]
    mds = load_recipe("megatron-deepspeed-slurm")
    assert mds.run_of(None).launcher == "deepspeed" and "ds_config.json" in mds.run_of("multi-node").files
    assert mds.run_of("multi-node").max_nodes is None  # any number from 2 on
    pods = load_recipe("megatronapp").run_of("two-pods")
    assert pods.pod_commands == ["two-pods-master", "two-pods-worker"] and pods.pod_setup.startswith("sed -i")
    assert load_recipe("h100-megatron-deepspeed").run_of(None) is None  # says nothing: runs once, as published
    for name in ("alpa-megatron", "megatron-deepspeed-slurm", "megatronapp", "opt-175b-azure",
                 "polaris-megatron-deepspeed", "cpu-reference"):
        for key, run in load_recipe(name).run.items():
            assert run.source and run.why, (name, key)


def test_the_run_section_is_not_part_of_the_recipe_digest_a_lock_records(tmp_path):
    """How jobs start says nothing of what is installed: a changed run leaves the locks current."""
    other = load_recipe(write(tmp_path, {"default": {**ONCE, "gpus_per_node": 2}}))
    assert other.run != BASE.run and digest(other) == digest(BASE)
    changed = load_recipe(write(tmp_path, dict(BASE.model_dump(mode="json", by_alias=True)["run"]), metric="x"))
    assert digest(changed) != digest(BASE)  # the rest of the recipe still counts
