"""The one node selection (``envbuild.connect.selection``): what facts, provision, verify and
launch are given, the nodes it makes, and what a run records to reach them again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envbuild.cli import main
from envbuild.connect.selection import SELECTION_SCHEMA, NodeSelection
from envbuild.errors import InputError
from envbuild.provision.options import ProvisionOptions, select_nodes
from envbuild.record import RunRecord
from envbuild.targets import load_target


def test_hosts_take_the_key_and_the_known_hosts(monkeypatch):
    monkeypatch.delenv("ENVBUILD_KNOWN_HOSTS", raising=False)
    sel = NodeSelection(hosts="ops@10.0.0.5:2222,10.0.0.6", identity_file="/k/id", known_hosts=("/k/kh",))
    a, b = sel.nodes()
    assert (a.user, a.port, b.user, b.port) == ("ops", 2222, "ops", None)
    assert {a.identity_file, b.identity_file} == {"/k/id"} and a.known_hosts == b.known_hosts == ("/k/kh",)
    assert not a.insecure
    assert [n.name for n in NodeSelection(hosts="h:2222", port_names=True).nodes()] == ["h:2222"]


def test_the_key_fills_inventory_hosts_that_name_none(tmp_path):
    inv = tmp_path / "nodes.ini"
    inv.write_text("[all]\nn1 ansible_host=10.0.0.1\nn2 ansible_host=10.0.0.2 ansible_ssh_private_key_file=/own\n")
    n1, n2 = NodeSelection(inventory=str(inv), identity_file="/given").nodes()
    assert (n1.identity_file, n2.identity_file) == ("/given", "/own")
    # provision chooses its nodes through the same selection: its -i reaches inventory hosts too
    opts = ProvisionOptions(target="slurm", inventory=str(inv), identity_file="/given")
    assert [n.identity_file for n in select_nodes(opts, load_target("slurm"))] == ["/given", "/own"]


def test_one_source_of_nodes_and_the_controller():
    with pytest.raises(InputError, match="only one of --hosts, --inventory, --local"):
        NodeSelection(hosts="h", local=True)
    assert [n.name for n in NodeSelection(local=True).nodes()] == ["local"]
    assert [n.name for n in NodeSelection(hosts="local").nodes()] == ["local"]
    assert [n.name for n in NodeSelection().nodes(default_local=True)] == ["local"]
    with pytest.raises(InputError, match="target 'slurm' needs nodes"):
        NodeSelection().nodes(needs="target 'slurm' needs nodes")


def test_a_record_holds_paths_never_contents(tmp_path, monkeypatch):
    key = tmp_path / "id"
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nSECRETBODY\n-----END OPENSSH PRIVATE KEY-----\n")
    known = tmp_path / "kh"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ENVBUILD_KNOWN_HOSTS", "kh")
    record = NodeSelection(hosts="h:2200", identity_file="id").record()
    assert record.identity_file == str(key) and record.known_hosts == (str(known),)  # absolute, env's file
    written = record.model_dump(mode="json", by_alias=True)  # as run.json holds it
    assert "SECRETBODY" not in json.dumps(written) and "port_names" not in written
    assert written["schema"] == SELECTION_SCHEMA and written["known_hosts"] == [str(known)]
    monkeypatch.delenv("ENVBUILD_KNOWN_HOSTS")
    again = NodeSelection.model_validate(written)
    assert again == record
    assert again.nodes()[0].known_hosts == (str(known),) and again.nodes()[0].identity_file == str(key)


def _run_json(folder: Path, **fields) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "run.json").write_text(json.dumps({"schema": "envbuild.run/2", "run_id": folder.name, "recipe": "r",
                                                 "target": "t", "status": "ok", **fields}))
    return folder


def test_a_damaged_recorded_selection_is_named_where_run_json_is_read(tmp_path):
    good = NodeSelection(hosts="h:2200", identity_file="/k").record().model_dump(mode="json", by_alias=True)
    for bad, field in (({**good, "port": "22; rm"}, "selection.port"), ({**good, "local": "maybe"}, "selection.local"),
                       ({**good, "known_hosts": "/kh"}, "selection.known_hosts"),
                       ({**good, "key": "SECRET"}, "selection.key: Extra inputs are not permitted")):
        folder = _run_json(tmp_path / field.split(":")[0], selection=bad)
        with pytest.raises(InputError, match=field) as exc:
            RunRecord.load(folder)
        assert str(folder / "run.json") in exc.value.message
    with pytest.raises(InputError, match="only one of --hosts, --inventory, --local"):
        RunRecord.load(_run_json(tmp_path / "two", selection={**good, "local": True}))


def test_a_run_reached_again_and_the_request_over_it(tmp_path):
    recorded = NodeSelection(hosts="u@h:2200", identity_file="/k", known_hosts=("/kh",))
    folder = _run_json(tmp_path / "recorded", selection=recorded.record().model_dump(mode="json", by_alias=True),
                       hosts=["h"])
    run = RunRecord.load(folder)
    assert run.run.selection == recorded and run.selection == recorded  # typed where read, once
    # another key given: the run's nodes, the new key, the run's known_hosts
    mine = NodeSelection(identity_file="/other").over(recorded)
    assert (mine.hosts, mine.identity_file, mine.known_hosts) == ("u@h:2200", "/other", ("/kh",))
    # other nodes given: those, with the run's key and known_hosts
    other = NodeSelection(local=True).over(recorded)
    assert other.local and other.hosts is None and other.identity_file == "/k"


def test_a_run_that_recorded_no_selection_is_mapped_where_it_is_read(tmp_path):
    # a run written before the selection was recorded: its options, else its hosts; run.json
    # stays as it was written
    old = _run_json(tmp_path / "old", schema="envbuild.run/1", hosts=["a", "b"],
                    options={"identity_file": "/k", "known_hosts": ["/kh"], "insecure": True})
    text = (old / "run.json").read_text()
    record = RunRecord.load(old)
    assert record.run.selection is None and "selection" not in record.run.as_written()
    assert record.selection == NodeSelection(hosts="a,b", identity_file="/k", known_hosts=("/kh",), insecure=True)
    assert (old / "run.json").read_text() == text
    inventory = _run_json(tmp_path / "inv", schema="envbuild.run/1", hosts=["n1"], options={"inventory": "/inv.ini"})
    assert RunRecord.load(inventory).selection == NodeSelection(inventory="/inv.ini")
    assert RunRecord.load(_run_json(tmp_path / "local", hosts=["local"], options={})).selection == \
        NodeSelection(local=True)
    assert RunRecord.load(_run_json(tmp_path / "none", hosts=[])).selection is None


def test_verify_of_a_run_with_no_provisioned_node_says_so(tmp_path, capsys):
    """A launch run with nothing provisioned (no nodes/*/plan.json) is no run to verify: the
    message says which run, and how to name the provision run (it said "node1 unreachable")."""
    run = tmp_path / "runs" / "20261126-000000-r-t"
    (run / "nodes" / "node1").mkdir(parents=True)
    (run / "nodes" / "node1" / "smoke.json").write_text("{}")
    (run / "run.json").write_text(json.dumps({"schema": "envbuild.run/1", "run_id": run.name, "recipe": "r",
                                              "target": "t", "status": "failed", "hosts": ["node1"]}))
    assert main(["verify", "--local", "--run", str(run)]) == 2
    err = capsys.readouterr().err
    assert f"run {run.name} records no provisioned node" in err and "--run RUN_DIR" in err
    assert Path(run / "run.json").exists()
