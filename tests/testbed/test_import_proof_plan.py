"""What a CPU import proof leaves out of a recipe's plan, and why (envbuild.testbed.importproof):
the build steps this node cannot run, and the files of a mirror's snapshot that are missing."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pydantic
import pytest

from envbuild.node.actions import do_git
from envbuild.gitsrc import github_slug
from envbuild.lock import lock_path, read_lock
from envbuild.recipes import load_recipe
from envbuild.recipes.schema import Recipe
from envbuild.testbed.importproof import check_out_without, proof_plan, tree_gaps
from envbuild.testbed.proofrecord import cpu_target


def _fake_mirror(root: Path, recipe, lock) -> str:
    """A folder where every git source of ``recipe`` (and git dependency of ``lock``) has a
    mirror, as ``fetch_urls`` finds one (planning reads no object of it)."""
    for url in [s.url for s in recipe.sources] + [g.url for g in lock.git]:
        owner, name = github_slug(url)
        repo = root / owner / f"{name}.git"
        (repo / "objects").mkdir(parents=True, exist_ok=True)
        (repo / "HEAD").write_text("ref: refs/heads/main\n")
    return str(root)


def _proof(name: str, tmp_path: Path, **kw):
    recipe = load_recipe(name)
    target = cpu_target(recipe)
    lock = read_lock(lock_path(name, target.name))
    return recipe, proof_plan(recipe, target, lock, str(tmp_path / "env"),
                              _fake_mirror(tmp_path / "mirror", recipe, lock), **kw)


def _ids(proof) -> list[str]:
    return [s.id for s in proof.plan.steps]


def _left(proof) -> dict[str, str]:
    return {u.what: u.why for u in proof.left}


def test_build_needs_image_is_checked_and_left_out_of_dumps_that_do_not_use_it() -> None:
    """build_needs_image / build_provides describe a source's build commands, run in the
    recipe's base image; a recipe that uses neither dumps (and so digests) as before."""
    data = load_recipe("megatronapp").model_dump(by_alias=True)
    src = data["sources"][0]
    assert src["build_needs_image"] and src["build_provides"] == ["shm_tensor_new_rdma"]
    no_build = {**data, "sources": [{**src, "build": []}]}
    with pytest.raises(pydantic.ValidationError, match="has none"):
        Recipe.model_validate(no_build)
    no_image = {**data, "environment": {**data["environment"], "kind": "venv", "base_image": None}}
    with pytest.raises(pydantic.ValidationError, match="no base_image"):
        Recipe.model_validate(no_image)
    for name in ("opt-175b-azure", "megatron-deepspeed-slurm"):
        for dumped in load_recipe(name).model_dump(by_alias=True)["sources"]:
            assert "build_needs_image" not in dumped and "build_provides" not in dumped


def test_a_build_that_reads_the_unfetched_data_is_left_out_and_named(tmp_path) -> None:
    """megatron-deepspeed-slurm's build step is the README's preprocessing of the OSCAR sample,
    which the data step fetches into the tree: the proof fetches no data, so it cannot run it."""
    recipe, proof = _proof("megatron-deepspeed-slurm", tmp_path)
    assert "git:megatron-deepspeed" in _ids(proof)
    assert "build:megatron-deepspeed" not in _ids(proof)
    why = _left(proof)["build:megatron-deepspeed"]
    assert "reads the recipe's data" in why
    assert all(d.name in why for d in recipe.data)  # oscar-1gb, gpt2-vocab, gpt2-merges
    assert "data:megatron-deepspeed" in _left(proof)
    # the package the build needs is still installed by the proof (its pip step is kept)
    pip = [r.name for s in proof.plan.pip_installs() for r in s.params.requirements]
    assert "nltk" in pip
    assert proof.unbuilt == {}


def test_a_build_that_needs_the_base_image_is_left_out_with_the_recipes_reason(tmp_path) -> None:
    """megatronapp's build links the NGC image's rdma-core and compiles against its CUDA: the
    recipe says so (build_needs_image), so the proof checks the tree out, leaves the build out,
    and names the module that build would have made."""
    recipe, proof = _proof("megatronapp", tmp_path)
    src = recipe.source("megatronapp")
    assert src.build_needs_image and src.build_provides == ["shm_tensor_new_rdma"]
    assert "git:megatronapp" in _ids(proof)
    assert "build:megatronapp" not in _ids(proof)
    why = _left(proof)["build:megatronapp"]
    assert recipe.environment.base_image in why and "libibverbs.so.1.14.36.0" in why
    assert proof.unbuilt == {"shm_tensor_new_rdma": "which the left-out build:megatronapp makes"}


def test_a_build_without_data_or_image_needs_is_kept(tmp_path) -> None:
    """The rules are the recipe's data, not the build's text: metaseq's Cython build and the
    Megatron-DeepSpeed helpers' make run in the proof as before."""
    _, proof = _proof("opt-175b-azure", tmp_path)
    assert "build:metaseq" in _ids(proof)
    _, proof = _proof("h100-megatron-deepspeed", tmp_path)
    assert any(i.startswith("build:") for i in _ids(proof))
    assert not any(u.what.startswith("build:") for u in proof.left)


def test_a_snapshot_without_non_code_files_is_checked_out_without_them(tmp_path) -> None:
    """metaseq's snapshot lacks two PDFs of its commit: the tree is checked out without them,
    each named; a gap that may be code leaves the source out instead."""
    pdfs = ["projects/OPT/chronicles/OPT175B_Logbook.pdf", "projects/OPT/chronicles/OPT_Baselines_Logbook.pdf"]
    _, proof = _proof("opt-175b-azure", tmp_path, gaps={"metaseq": pdfs})
    assert proof.sparse == {"metaseq": pdfs}
    assert "git:metaseq" in _ids(proof) and "install:metaseq" in _ids(proof)
    assert all(p in _left(proof)["2 file(s) of metaseq"] for p in pdfs)

    _, proof = _proof("opt-175b-azure", tmp_path / "b", gaps={"metaseq": [pdfs[0], "metaseq/models/x.py"]})
    assert proof.sparse == {}
    assert "git:metaseq" not in _ids(proof) and "install:metaseq" not in _ids(proof)
    assert "metaseq/models/x.py" in _left(proof)["source metaseq"]


def _git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.mark.integration
def test_a_mirror_missing_a_blob_gives_a_tree_the_git_step_keeps(tmp_path) -> None:
    """A bare mirror whose snapshot lost one file's blob: ``tree_gaps`` names that file, a
    plain checkout of the commit fails, ``check_out_without`` checks it out without the file,
    and the product's git step (do_git) then finds the tree at the pinned commit and keeps it."""
    work = tmp_path / "work"
    work.mkdir()
    _git("init", "-q", "-b", "main", cwd=work)
    (work / "pkg").mkdir()
    (work / "pkg" / "__init__.py").write_text("X = 1\n")
    (work / "docs").mkdir()
    (work / "docs" / "logbook.pdf").write_bytes(b"%PDF-1.4 not kept in the snapshot\n")
    _git("add", "-A", cwd=work)
    _git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one", cwd=work)
    sha = _git("rev-parse", "HEAD", cwd=work)
    mirror = tmp_path / "mirror" / "someone" / "proj.git"
    subprocess.run(["git", "clone", "-q", "--bare", "--no-local", str(work), str(mirror)], check=True)
    blob = _git("rev-parse", f"{sha}:docs/logbook.pdf", cwd=work)
    _git("repack", "-a", "-d", "-q", cwd=mirror)
    for pack in (mirror / "objects" / "pack").glob("*.pack"):  # unpack all, then drop one blob
        idx = pack.with_suffix(".idx")
        data = pack.read_bytes()
        pack.unlink()
        idx.unlink()
        subprocess.run(["git", "unpack-objects", "-q"], input=data, cwd=mirror, check=True)
    (mirror / "objects" / blob[:2] / blob[2:]).unlink()

    recipe = load_recipe("megatronapp").model_copy(update={"sources": [
        load_recipe("megatronapp").source("megatronapp").model_copy(update={
            "name": "proj", "url": "https://github.com/someone/proj", "sha": sha, "build": [],
            "build_needs_image": None, "build_provides": []})], "patches": [], "entry_scripts": []})
    gaps = tree_gaps(recipe, None, str(tmp_path / "mirror"))
    assert gaps == {"proj": ["docs/logbook.pdf"]}

    plain = tmp_path / "plain"
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(mirror), str(plain)], check=True)
    assert subprocess.run(["git", "checkout", "-q", "--force", sha], cwd=plain, capture_output=True).returncode != 0

    dest = tmp_path / "env" / "src" / "proj"
    check_out_without(str(mirror), sha, str(dest), gaps["proj"])
    assert (dest / "pkg" / "__init__.py").read_text() == "X = 1\n"
    assert not (dest / "docs" / "logbook.pdf").exists()
    do_git({"dest": str(dest), "sha": sha, "ref": "main", "fetch_url": str(mirror)})
    assert _git("rev-parse", "HEAD", cwd=dest) == sha
    assert _git("status", "--porcelain", "--untracked-files=no", cwd=dest) == ""


def test_proofs_recorded_by_two_workers_at_once_are_all_kept(tmp_path) -> None:
    """``write_record`` from several xdist workers of one recording run: every entry stays."""
    import multiprocessing

    from envbuild.testbed.proofrecord import read_record, write_record

    path = tmp_path / "proofs.json"

    def write(worker: int) -> None:
        for i in range(25):
            write_record(f"r{worker}-{i}", {"n": i}, path)

    procs = [multiprocessing.get_context("fork").Process(target=write, args=(w,)) for w in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    assert len(read_record(path)) == 75


def test_a_proofs_inputs_digest_follows_contents_not_where_the_folders_lie(tmp_path, monkeypatch) -> None:
    """Moving the locks' folder (envbuild/lockfiles/ -> lockfiles/) keeps every recorded proof's
    digest; a changed byte of an input, or a lock that becomes another target's, changes it."""
    from envbuild.testbed import proofrecord

    recipe, target = "cpu-reference", "local"
    before = proofrecord.inputs_digest(recipe, target)
    moved = tmp_path / "elsewhere" / "locks"
    (moved / recipe).mkdir(parents=True)
    lock = (proofrecord.LOCKFILES / recipe / f"{target}.lock").read_bytes()
    (moved / recipe / f"{target}.lock").write_bytes(lock)
    monkeypatch.setattr(proofrecord, "LOCKFILES", moved)
    assert proofrecord.inputs_digest(recipe, target) == before
    (moved / recipe / "other.lock").write_bytes(lock)
    assert proofrecord.inputs_digest(recipe, "other") != before
    (moved / recipe / f"{target}.lock").write_bytes(lock + b"\n")
    assert proofrecord.inputs_digest(recipe, target) != before


def test_a_recipes_expected_resources_are_no_input_of_its_proof(tmp_path, monkeypatch) -> None:
    """A proof depends on what the recipe installs: stating its expected resources (or errata)
    keeps the recorded digest; a changed pin changes it."""
    import shutil

    from envbuild.testbed import proofrecord

    recipe, target = "cpu-reference", "local"
    before = proofrecord.inputs_digest(recipe, target)
    folder = tmp_path / "recipes"
    folder.mkdir()
    text = (proofrecord.RECIPES / f"{recipe}.yaml").read_text()
    shutil.copy(proofrecord.RECIPES / f"{recipe}.yaml", folder / f"{recipe}.yaml")
    monkeypatch.setattr(proofrecord, "RECIPES", folder)
    assert proofrecord.inputs_digest(recipe, target) == before
    (folder / f"{recipe}.yaml").write_text(text.replace("minutes: 2.5", "minutes: 3"))
    assert proofrecord.inputs_digest(recipe, target) == before
    assert 'version: "4.70.1"' in text
    (folder / f"{recipe}.yaml").write_text(text.replace('version: "4.70.1"', 'version: "4.67.1"'))
    assert proofrecord.inputs_digest(recipe, target) != before
