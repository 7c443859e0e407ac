"""The typed run record (envbuild/record/): every committed run-folder shape reads through
RunRecord.load (older ones mapped in migrate.py), and the writer refuses what the record does
not hold."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from envbuild.errors import InputError
from envbuild.record import RUN_SCHEMA, RecordError, RunRecord, RunWriter, create_run, read_run_info
from envbuild.record.verdict import Verdict
from support.paths import ROOT

RUN = ROOT / "tests" / "data" / "runs" / "20261122-073000-alpa-megatron-h100-ubuntu2404"
# the pipeline records of the GPU runs in docs/results: each holds the run.json and smoke.json
# of its provision runs (provision.<name>.run / .smoke), as envbuild wrote them then
SUMMARIES = sorted({*ROOT.glob("docs/results/*/*summary.json"), *ROOT.glob("docs/results/h100-offline-run*.json")})


def committed_shapes() -> list[tuple[str, dict, dict | None]]:
    """(where, run.json, smoke.json or None) of every committed run record."""
    out = [(str(RUN.relative_to(ROOT)), json.loads((RUN / "run.json").read_text()), None)]
    for path in SUMMARIES:
        for name, prov in json.loads(path.read_text()).get("provision", {}).items():
            if isinstance(prov, dict) and isinstance(prov.get("run"), dict):
                out.append((f"{path.relative_to(ROOT)}:{name}", prov["run"], prov.get("smoke")))
    return out


SHAPES = committed_shapes()


def test_the_committed_shapes_are_found():
    # the GPU runs of docs/results (h100-offline run 1 and 2, h200x2 run 4, alpa-megatron's three)
    # each keep two provision runs: a record that moved would silently leave this test empty
    assert len(SHAPES) >= 13, [w for w, *_ in SHAPES]
    assert any(smoke for *_, smoke in SHAPES)


def _text(data) -> str:
    return json.dumps(data, sort_keys=True)


def _folder(tmp_path: Path, run: dict, smoke: dict | None) -> Path:
    folder = tmp_path / str(run["run_id"])
    (folder / "nodes" / "local").mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps(run))
    if smoke is not None:
        (folder / "nodes" / "local" / "smoke.json").write_text(json.dumps(smoke))
    return folder


@pytest.mark.parametrize("where,run,smoke", SHAPES, ids=[w for w, *_ in SHAPES])
def test_every_committed_run_record_round_trips(tmp_path, where, run, smoke):
    record = RunRecord.load(_folder(tmp_path, run, smoke))
    # envbuild.run/1 is read as /2: the same fields, every one kept; a /2 record reads back as written
    assert run["schema"] in ("envbuild.run/1", RUN_SCHEMA) and record.run.schema_ == RUN_SCHEMA
    assert _text({**record.run.as_written(), "schema": run["schema"]}) == _text(run)
    if smoke is None:
        return
    got = record.node("local").smoke
    written = got.as_written()
    for name, section in smoke.items():
        if name == "native":
            continue
        assert _text(written[name]) == _text(section)  # the smoke scripts' sections, whole, ints as ints
    native = {k: v for k, v in written["native"].items() if k != "verdict"}
    assert _text(native) == _text({k: v for k, v in smoke["native"].items() if k != "verdict"})
    verdict = got.native.verdict
    old = smoke["native"]["verdict"]
    # an older verdict is mapped onto the judge's: metric, value and reason kept, the threshold
    # it was compared with kept as what it was compared with (its GPU not recorded then)
    assert (verdict.metric, verdict.value, verdict.reason) == (old["metric"], old["value"], old["reason"])
    if old.get("threshold") is not None and verdict.verdict in ("PASS", "FAIL") and verdict.value is not None:
        assert verdict.compared.value == old["threshold"]


def test_an_old_native_verdict_gets_the_word_the_judge_gives():
    # before the completion check (h200x2 run 4) a verdict had no status, and "passed": true
    # meant only that no threshold was set; before the one judge there was no verdict word
    by_where = {w: smoke for w, _, smoke in SHAPES}
    h200 = by_where["docs/results/h200x2-run4/summary.json:prov1"]["native"]["verdict"]
    h100 = by_where["docs/results/h100-offline-run1.json:prov1"]["native"]["verdict"]
    assert "status" not in h200 and h200["passed"] is True and h200["threshold"] is None
    from envbuild.record import migrate

    mapped = migrate.smoke({"native": {"verdict": h200}})["native"]["verdict"]
    assert Verdict.model_validate(mapped).verdict == "NOT JUDGED" and Verdict.model_validate(mapped).passed is None
    mapped = migrate.smoke({"native": {"verdict": h100}})["native"]["verdict"]
    assert Verdict.model_validate(mapped).verdict in ("FAIL", "NOTHING FOUND")
    assert Verdict.model_validate(mapped).passed is False


def test_the_committed_run_folder_reads_whole():
    record = RunRecord.load(RUN)
    assert [n.host for n in record.nodes()] == ["gpu-a", "gpu-b"]
    for node in record.nodes():
        assert node.result.status == "ok" and node.facts.gpus and node.plan.steps
        assert node.observed is not None and node.smoke.gpt.tokens_per_s > 0
        # an old preflight shape ({feasible, verdict, violations}) mapped onto compat's Verdict
        assert node.preflight.feasible and node.preflight.host == node.host
        # gpu-a holds a verdict written before the one judge (status pass), mapped onto the
        # judge's; gpu-b the judge's own
        assert node.smoke.native.verdict.verdict == {"gpu-a": "PASS", "gpu-b": "FAIL"}[node.host]
        assert node.smoke.native.metrics
    assert record.recipe.name == "alpa-megatron" and record.lock_digest == record.run.lock_digest


def test_an_old_preflight_refusal_keeps_its_problems(tmp_path):
    folder = tmp_path / "run"
    shutil.copytree(RUN, folder)
    (folder / "nodes" / "gpu-a" / "preflight.json").write_text(json.dumps({
        "verdict": "infeasible", "violations": [
            {"id": "cuda-major", "severity": "error", "message": "nvcc 13.0 vs cu111", "fix": "CUDA 11"},
            {"id": "note", "severity": "info", "message": "informative only"},
            {"id": "old-gcc", "severity": "warning", "message": "gcc 9"}]}))
    pre = RunRecord.load(folder).node("gpu-a").preflight
    assert not pre.feasible
    assert [(v.rule, v.severity, v.fix) for v in pre.violations] == [
        ("cuda-major", "error", "CUDA 11"), ("old-gcc", "warning", "")]


def test_writer_refuses_a_field_the_record_does_not_hold(tmp_path):
    writer = create_run("r", "local", argv=["envbuild"], hosts=["n1"], options={}, home=tmp_path)
    before = (writer.path / "run.json").read_text()
    with pytest.raises(RecordError, match=r"run\.json: refused: statuss: not a field of the run record"):
        writer.update(statuss="ok")
    with pytest.raises(RecordError, match=r"run\.json: refused: status: Input should be 'running', 'ok'"):
        writer.update(status="finished")
    with pytest.raises(RecordError, match=r"fleet\.nodes: Input should be a valid integer"):
        writer.update(fleet={"pushed": False, "nodes": "three"})
    assert (writer.path / "run.json").read_text() == before  # nothing written
    with pytest.raises(RecordError, match=r"result\.json: refused: exit: Extra inputs are not permitted"):
        writer.node_result("n1", {"status": "ok", "exit": 0})
    with pytest.raises(RecordError, match=r"smoke\.json: refused: native\.verdict\.verdict: Field required"):
        writer.node_smoke("n1", {"native": {"verdict": {"metric": "m", "reason": "no word"}}})


def test_writer_updates_are_typed_and_read_back(tmp_path):
    writer = create_run("r", "local", argv=["envbuild"], hosts=["n1"], options={"hosts": "n1"}, home=tmp_path)
    writer.update(lock_path=tmp_path / "x.lock", fleet={"pushed": False, "nodes": 1, "why": "one node"})
    info = writer.finish("ok", verdict="PASS", exit_code=0)
    again = read_run_info(writer.path)
    assert again == info and again.lock_path == str(tmp_path / "x.lock") and again.fleet.why == "one node"
    assert again.finished and again.finished_run and again.given_hosts == "n1" and again.given_inventory is None
    # the judge's verdict is written and read back as its model; a field it does not hold is refused
    verdict = {"verdict": "PASS", "metric": "tflops", "value": 150.0, "window": {"n": 2, "median": 150.0,
                                                                               "min": 149.0, "max": 151.0}}
    writer.node_smoke("n1", {"native": {"ran": True, "verdict": verdict}})
    smoke = RunRecord.load(writer.path).node("n1").smoke
    assert smoke.native.verdict.verdict == "PASS" and smoke.native.verdict.window.median == 150.0
    with pytest.raises(RecordError, match="verdict"):
        writer.node_smoke("n1", {"native": {"verdict": {**verdict, "passed": True}}})


@pytest.mark.parametrize("text,where", [
    ('{"schema": "envbuild.run/9", "run_id": "x", "recipe": "r", "target": "t", "status": "ok"}',
     "schema 'envbuild.run/9' is not a run record envbuild reads"),
    ('{"run_id": "x", "recipe": "r", "target": "t", "status": "done"}', "not a run record: status: Input should be"),
    ('{"run_id": "x", "recipe": "r", "target": "t", "status": "ok", "hostz": []}',
     "not a run record: hostz: Extra inputs are not permitted"),
    ('[1, 2]', "not a run record: a JSON list, expected an object"),
])
def test_a_damaged_run_json_names_the_file_and_the_field(tmp_path, text, where):
    (tmp_path / "run.json").write_text(text)
    with pytest.raises(InputError) as exc:
        RunRecord.load(tmp_path)
    assert str(tmp_path / "run.json") in exc.value.message and where in exc.value.message


def test_a_damaged_node_file_is_named_when_read(tmp_path):
    folder = tmp_path / "run"
    shutil.copytree(RUN, folder)
    (folder / "nodes" / "gpu-b" / "result.json").write_text('{"status": "fine"}')
    record = RunRecord.load(folder)
    assert record.node("gpu-a").result.status == "ok"  # the other node still reads
    with pytest.raises(InputError, match=r"gpu-b/result\.json: not a node result: status: Input should be"):
        _ = record.node("gpu-b").result


def test_run_writer_is_the_only_writer_of_run_json():
    # no flow merges run.json as a dict any more: RunDir has no update_run, and run.json is
    # written only in envbuild/record/write.py
    import envbuild.rundir as rundir

    assert not hasattr(rundir.RunDir, "update_run")
    writers = [p.relative_to(ROOT) for p in (ROOT / "envbuild").rglob("*.py")
               if '"run.json"' in p.read_text() and ".write(" in p.read_text()
               and 'write("run.json"' in p.read_text()]
    assert writers == [Path("envbuild/record/write.py")]
    assert RunWriter.update.__doc__ and "RunInfo" in RunWriter.update.__doc__


def _launch_json(folder: Path, **fields) -> dict:
    data = {"schema": "envbuild.launch/1", "scheduler": "local", "script": "/x/job.sh",
            "job": {"scheduler": "local", "job_id": "local", "state": "COMPLETED", "exit_code": "0"},
            "node": "n1", "nodes": ["n1"], "node_dir": "n1", **fields}
    (folder / "launch.json").write_text(json.dumps(data))
    return data


@pytest.mark.parametrize("old,word,passed", [("pass", "PASS", True), ("not-judged", "NOT JUDGED", None),
                                             ("fail", "FAIL", False)])
def test_a_launch_record_in_the_old_words_reads_in_the_one_vocabulary(tmp_path, old, word, passed):
    # launch.json as envbuild launch --submit wrote it before its status took the judge's words
    folder = shutil.copytree(RUN, tmp_path / "run")
    written = _launch_json(folder, passed=passed, status=old)
    launch = RunRecord.load(folder).launch
    assert launch.status == word and launch.passed is passed
    assert {**launch.as_written(), "status": old} == written  # nothing else changed
    assert json.loads((folder / "launch.json").read_text())["status"] == old  # the file stays as written
    # today's words read as written; a word of neither vocabulary is refused, named
    _launch_json(folder, passed=passed, status=word)
    assert RunRecord.load(folder).launch.status == word
    _launch_json(folder, status="passed")
    with pytest.raises(InputError, match=r"launch\.json: not a launch record: status: Input should be 'PASS'"):
        _ = RunRecord.load(folder).launch


def test_the_writer_refuses_a_launch_status_outside_the_vocabulary(tmp_path):
    writer = create_run("r", "local", argv=["envbuild"], hosts=[], options={}, home=tmp_path)
    record = {"scheduler": "local", "job": {"scheduler": "local", "job_id": "local", "state": "COMPLETED",
                                            "exit_code": "0"}}
    with pytest.raises(RecordError, match=r"launch\.json: refused: status: Input should be 'PASS'"):
        writer.launch({**record, "status": "pass"})
    assert writer.launch({**record, "status": "NOT JUDGED"}).status == "NOT JUDGED"


def test_the_recipes_benchmark_is_read_as_the_recipes_own_model(tmp_path):
    from envbuild.recipes.schema import Benchmark

    bench = RunRecord.load(RUN).recipe.benchmark
    recipe = json.loads((RUN / "recipe.json").read_text())
    assert isinstance(bench, Benchmark) and bench.parser == recipe["benchmark"]["parser"]
    dumped = bench.model_dump(mode="json")
    assert {k: dumped[k] for k in recipe["benchmark"]} == recipe["benchmark"]  # every field as written
    # one that does not fit the recipe's model is named where recipe.json is read
    folder = shutil.copytree(RUN, tmp_path / "run")
    (folder / "recipe.json").write_text(json.dumps({**recipe, "benchmark": {**recipe["benchmark"], "threshold": "high"}}))
    with pytest.raises(InputError, match=r"recipe\.json: not a recipe: benchmark\.threshold"):
        _ = RunRecord.load(folder).recipe
    # a parser gone since the run was recorded still reads: the record is not a recipe file
    (folder / "recipe.json").write_text(json.dumps({**recipe, "benchmark": {**recipe["benchmark"], "parser": "gone"}}))
    assert RunRecord.load(folder).recipe.benchmark.parser == "gone"


def test_a_nodes_log_is_read_as_lines_and_a_node_without_one_has_none(tmp_path):
    """Run 18's next-node install: the log's lines as the node wrote them (the tree cache's restore
    and save lines among them); the same record with the log gone reads as no lines."""
    src = ROOT / "docs/results/h200x2-run18/alpa-node2/20261128-132125-alpa-megatron-h100-h100-venv"
    node = RunRecord.load(src).nodes()[0]
    lines = node.log_lines
    assert lines == (src / "nodes/local/log.txt").read_text().splitlines()
    assert any(line.startswith("build outputs (tree-megatron-") and "none of its 12 file(s) changed" in line
               for line in lines)
    copy = tmp_path / src.name
    shutil.copytree(src, copy)
    (copy / "nodes/local/log.txt").unlink()
    assert RunRecord.load(copy).nodes()[0].log_lines == []
