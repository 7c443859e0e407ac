"""envbuild verify --local: the environment on this machine against a one-node run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envbuild.cli import main
from support.observed import build_so, make_env, observe_local, sh

pytestmark = pytest.mark.integration


@pytest.fixture
def local_run(tmp_path, monkeypatch):
    lock, plan = make_env(tmp_path / "node", {"six": "1.16.0"})
    run = tmp_path / "home" / "runs" / "20261122-100000-tiny-local"
    node = run / "nodes" / "this-machine"
    node.mkdir(parents=True)
    (node / "plan.json").write_text(json.dumps(plan))
    (node / "observed.json").write_text(json.dumps(observe_local(plan).model_dump(by_alias=True)))
    (run / "lock.lock").write_text(json.dumps(lock))
    (run / "run.json").write_text(json.dumps({"schema": "envbuild.run/1", "run_id": run.name, "recipe": "tiny",
                                              "target": "local", "status": "ok", "hosts": ["this-machine"]}))
    monkeypatch.setenv("ENVBUILD_HOME", str(tmp_path / "home"))
    return run, plan


def test_local_clean_then_rebuilt_extension_is_drift(local_run, capsys):
    run, plan = local_run
    assert main(["verify", "--local", "--target", "local", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["nodes"][0]["status"] == "clean"
    tree = plan["steps"][0]["params"]["dest"]
    build_so(Path(tree) / "megatron" / "fused_kernels.so", 43)
    assert main(["verify", "--local", "--run", str(run), "--json"]) == 1
    [node] = json.loads(capsys.readouterr().out)["nodes"]
    assert [d["kind"] for d in node["drift"]] == ["so-hash-changed"]


def test_missing_environment_python_is_exit_3(local_run, capsys):
    run, plan = local_run
    sh("rm", "-rf", plan["prefix"] + "/bin")
    assert main(["verify", "--local", "--run", str(run)]) == 3
    err = capsys.readouterr().err
    assert "could not observe: this-machine" in err and "bin/python" in err
