"""`envbuild plan --json` prints the plan `provision` executes: one resolution, same digests.

A dry-run provision on this machine gathers the facts, writes each node's plan.json and the
Ansible inventory it would run; `envbuild plan` given the same facts file and options must
print the same plan, and the inventory must carry the same step ids and digests.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envbuild.cli import main
from envbuild.plan.model import Plan
from envbuild.provision import ProvisionOptions, provision
from envbuild.render.ansible import steps_of

pytestmark = pytest.mark.integration


def test_plan_json_equals_the_plan_provision_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ENVBUILD_HOME", str(tmp_path / "home"))
    prefix = str(tmp_path / "env")
    out = provision(ProvisionOptions(target="local", prefix=prefix, wheelhouse="/opt/wheels",
                                     dry_run=True))
    node = out.run_dir / "nodes" / "local"
    ran = Plan.model_validate_json((node / "plan.json").read_text())
    import yaml

    inventory = yaml.safe_load((out.run_dir / "ansible" / "inventory" / "hosts.yml").read_text()
                               .replace("!unsafe ", ""))
    executed = steps_of(inventory["all"]["hosts"]["local"])

    capsys.readouterr()
    rc = main(["plan", "cpu-reference", "--target", "local", "--facts", str(node / "facts.json"),
               "--prefix", prefix, "--wheelhouse", "/opt/wheels", "--json"])
    assert rc in (0, None)
    printed = Plan.model_validate(json.loads(capsys.readouterr().out))

    assert printed == ran
    assert [(s.id, s.digest) for s in printed.steps] == [(s["id"], s["digest"]) for s in executed]
    assert printed.prefix == prefix and Path(printed.prefix).is_absolute()
