"""nanogpt and nanogpt-h100: karpathy/nanoGPT as its README states it at eba36e84, and the variant
`envbuild port` drafts for the H100 node (CPU-side checks).

The real node's facts (tests/fixtures/nodes/h100-ubuntu2404-cuda13) refuse the published torch
2.0.1 and Python 3.10 and admit the variant, whose shipped file is port's draft but for what its
header names; the benchmark's log (bench.py's, read by the rules the recipe declares) is written
here by evaluating the printing statements of bench.py and model.py at eba36e84 (``PRINTS``,
checked against the pinned commit where ENVBUILD_GIT_MIRROR holds a mirror of nanoGPT): a
complete run, a run killed before its result, a run whose loss turns NaN. The outcomes of both
recipes' runs are also rows of the native-log corpus (tests/data/native_logs/cases.yaml).
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from support.clirun import envbuild

from envbuild.compat.check import preflight
from envbuild.lock.check import check_lock_file
from envbuild.lock.location import SHIPPED_LOCKDIR
from envbuild.recipes import load_recipe
from envbuild.shipped import RECIPES
from envbuild.targets import load_target
from support.h100 import h100_node

SHA = "eba36e84649f3c6d840a93092cb779a260544d08"
H100 = "NVIDIA H100 80GB HBM3"

# the statements that print what the log rules read, as they stand at eba36e84 (FILE:LINE)
PRINTS = {
    "bench.py:111": 'print(f"{k}/{num_steps} loss: {lossf:.4f}")',
    "bench.py:117": 'print(f"time per iteration: {dt/num_steps*1000:.4f}ms, MFU: {mfu*100:.2f}%")',
    "model.py:148": 'print("number of parameters: %.2fM" % (self.get_num_params()/1e6,))',
}


def printed(where: str, **names) -> str:
    """What the print statement at ``where`` writes, with its names bound to ``names``."""
    call = ast.parse(PRINTS[where]).body[0].value
    return str(eval(compile(ast.Expression(call.args[0]), where, "eval"), {}, names))  # PRINTS: our constants, never input


def bench_log(ms: float, *, until: int | None = None, nan_from: int | None = None) -> str:
    """`python bench.py --real_data=False`'s lines the rules read: the parameter count when the
    GPT is built, then bench.py:100-117's 10 burn-in and 20 timed iterations and the result line
    (``until``: killed after that many timed iterations; ``nan_from``: NaN loss from that one)."""
    model = SimpleNamespace(get_num_params=lambda: 123_587_328)
    out = [printed("model.py:148", self=model), "Compiling model..."]
    for stage, num_steps in enumerate([10, 20]):
        for k in range(num_steps):
            if stage == 1 and until is not None and k >= until:
                return "\n".join(out) + "\n"
            lossf = float("nan") if stage == 1 and nan_from is not None and k >= nan_from else 10.99 - k / 10
            out.append(printed("bench.py:111", k=k, num_steps=num_steps, lossf=lossf))
    out.append(printed("bench.py:117", dt=ms * 20 / 1000, num_steps=20, mfu=0.4127))
    return "\n".join(out) + "\n"



def test_the_variant_is_feasible_on_the_real_h100_and_both_locks_are_current():
    target, facts = h100_node()
    variant = load_recipe("nanogpt-h100")
    verdict = preflight(variant, target, facts)
    assert verdict.feasible, [v.message for v in verdict.violations]
    assert variant.variant_of == "nanogpt"
    lock = check_lock_file(SHIPPED_LOCKDIR / "nanogpt-h100" / "h100-venv.lock", variant, target)
    assert {g.name: g.sha for g in lock.git} == {"nanogpt": SHA}
    given = {p.name for p in lock.packages if p.source == "preinstalled"}
    # the node's own: never packed (certifi kept as the node's by hand: its why)
    assert given == {"torch", "numpy", "transformers", "tiktoken", "tqdm", "certifi"}
    assert {"datasets", "wandb"} <= {p.name for p in lock.packages if p.verified}
    published = load_recipe("nanogpt")
    lock = check_lock_file(SHIPPED_LOCKDIR / "nanogpt" / "local.lock", published, load_target("local"))
    torch = lock.package("torch")
    assert (torch.version, torch.source, lock.resolve_as_of) == ("2.0.1", "pypi", "2023-06-22")
    # PyPI's Linux build of torch 2.0.1 is the CUDA 11.7 one: its locked dependencies say so
    assert lock.package("nvidia-cuda-runtime-cu11").version.startswith("11.7")


def test_the_published_pins_are_refused_on_the_h100_node_naming_the_variant():
    target, facts = h100_node()
    published = preflight(load_recipe("nanogpt"), target, facts)
    rows = {v.rule: v.message for v in published.errors}
    assert set(rows) == {"wheel-lacks-gpu-arch", "python-absent"}
    assert "sm_90" in rows["wheel-lacks-gpu-arch"] and "CUDA 11.7" in rows["wheel-lacks-gpu-arch"]
    assert "Python 3.10" in rows["python-absent"]
    assert [v.recipe for v in published.variants] == ["nanogpt-h100"]


@pytest.mark.integration
def test_the_shipped_variant_is_ports_draft_but_for_what_its_header_names(tmp_path):
    """`envbuild port nanogpt --target h100-venv` over a mirror of nanoGPT's tree (the files
    tests/draft_port/test_port.py holds for it) drafts the shipped nanogpt-h100, resolve_as_of and resources
    included (port's rules: deviations resolve-as-of and resources-carried), but for its name,
    certifi kept as the node's (a hand change, found on the lent H200: its why says so) and
    port's note on undecided entries, which it has none of."""
    from support.portsetups import NANOGPT, mirror_repo

    mirror = tmp_path / "mirror"
    mirror.mkdir()
    test_sha = mirror_repo(mirror, "karpathy/nanoGPT", [(NANOGPT, None)])[0]
    data = yaml.safe_load((RECIPES / "nanogpt.yaml").read_text())
    data["sources"][0]["sha"] = test_sha
    (tmp_path / "nanogpt.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    out = tmp_path / "nanogpt-sm90.yaml"
    proc = envbuild("port", str(tmp_path / "nanogpt.yaml"), "--target", "h100-venv", "--git-mirror", str(mirror),
                    "-o", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["fixes"] == [] and json.loads(proc.stdout)["undecided"] == []
    drafted = yaml.safe_load(out.read_text())
    drafted["sources"][0]["sha"] = SHA
    shipped = yaml.safe_load((RECIPES / "nanogpt-h100.yaml").read_text())
    assert drafted["resolve_as_of"] == shipped["resolve_as_of"] == "2026-04-30"
    assert {"resolve-as-of", "resources-carried"} <= {d["id"] for d in drafted["deviations"]}
    by_hand = [p for p in shipped["packages"] if p["name"] == "certifi"]
    assert by_hand and by_hand[0]["preinstalled"] and "effect check" in by_hand[0]["why"]
    assert not any(p["name"] == "certifi" for p in drafted["packages"])
    shipped["packages"].remove(by_hand[0])
    assert (drafted.pop("name"), shipped.pop("name")) == ("nanogpt-sm90", "nanogpt-h100")
    assert drafted.pop("description").startswith(shipped.pop("description").removesuffix("Every change is a deviation below."))
    assert drafted == shipped


def parse(recipe: str, log: Path, *args: str) -> tuple[int, dict]:
    got = envbuild("parse", recipe, str(log), "--json", "--gpu", H100, "--gpus", "1", *args)
    assert "Traceback" not in got.stderr, got.stderr
    return got.returncode, json.loads(got.stdout)


CASES = [
    # (case, log, expected verdict and exit code, what the completion says)
    ("complete", bench_log(78.4123), "NOT JUDGED", 5, "complete", "the end-of-run line was printed at step 19"),
    ("stopped", bench_log(78.4, until=7), "NOTHING FOUND", 2, "stopped", "the last logged step is 6 of 20"),
    ("nan", bench_log(78.4, nan_from=12), "FAIL", 1, "diverged", "a non-finite loss"),
]


@pytest.mark.parametrize("recipe", ["nanogpt", "nanogpt-h100"])
@pytest.mark.parametrize("case,text,verdict,rc,state,says", CASES, ids=[c[0] for c in CASES])
def test_the_declared_rules_judge_bench_py_logs(tmp_path, recipe, case, text, verdict, rc, state, says):
    log = tmp_path / "bench.log"
    log.write_text(text)
    got_rc, out = parse(recipe, log)
    assert (out["verdict"], got_rc) == (verdict, rc), out["reason"]
    assert out["completion"]["state"] == state and says in out["completion"]["detail"], out["completion"]
    if case == "complete":  # bench.py's own mean of its 20 timed iterations, the burn-in left out by it
        assert out["value"] == pytest.approx(78.4123) and out["window"]["n"] == 1
        assert out["metrics"]["mfu_percent"] == pytest.approx(41.27)
        assert "the recipe sets no threshold" in out["reason"]


def test_explain_names_the_rule_that_read_each_line(tmp_path):
    log = tmp_path / "bench.log"
    log.write_text(bench_log(78.4) + bench_log(80.0))  # two runs: the second is judged
    got = envbuild("parse", "nanogpt-h100", str(log), "--explain")
    lines = got.stdout.splitlines()
    assert any("line 1: start read matched: number of parameters: 123.59M" in x for x in lines), got.stdout
    assert any('line 3: progress read {"planned": "10", "step": "0"}' in x for x in lines)
    assert any('line 33: metrics.iteration_time_ms read {"value": "80.0000"}' in x for x in lines)
    assert any('line 33: metrics.mfu_percent read {"value": "41.27"}' in x for x in lines)
    assert any("line 33: complete[0] read matched" in x for x in lines)
    _, out = parse("nanogpt-h100", log)
    assert out["completion"]["runs"] == 2 and out["value"] == pytest.approx(80.0)


def test_every_log_rule_cites_a_line_of_the_printing_code():
    """Both recipes declare the same rules, each citing FILE:LINE at eba36e84; the lines the log
    above is printed from are among them."""
    rules = [load_recipe(name).benchmark.log for name in ("nanogpt", "nanogpt-h100")]
    assert rules[0] == rules[1]
    cited = set()
    for rule in [*rules[0].metrics.values(), rules[0].progress, rules[0].start, *rules[0].complete, *rules[0].diverged]:
        assert rule.source.startswith("karpathy/nanoGPT eba36e84 "), rule.source
        cited |= set(re.findall(r"\b(\w+\.py:\d+)\b", rule.source))
    assert set(PRINTS) <= cited


def test_the_printing_statements_are_those_of_the_pinned_commit():
    from envbuild.gitsrc import mirror_path

    folder = os.environ.get("ENVBUILD_GIT_MIRROR")
    found = mirror_path("https://github.com/karpathy/nanoGPT", Path(folder)) if folder else None
    if found is None:
        pytest.skip("no mirror of karpathy/nanoGPT: set ENVBUILD_GIT_MIRROR to a folder of mirrors holding it")
    for where, statement in PRINTS.items():
        path, line = where.split(":")
        text = subprocess.run(["git", "--git-dir", str(found), "show", f"{SHA}:{path}"], check=True,
                              capture_output=True, text=True).stdout
        assert text.splitlines()[int(line) - 1].strip() == statement, where
