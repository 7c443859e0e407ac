"""A staged folder (a fleet's pushed wheels, a bundle's node/ folder) travels to each node as
one tar (``envbuild.fsio.write_tar``), named by the step's params (``BundleParams.archive``)."""

from __future__ import annotations

import tarfile

import pytest

from envbuild.fsio import sha256_file, write_tar
from envbuild.plan.model import Step
from envbuild.plan import params as P
from envbuild.plan.params import BundleParams, StagedFile
from envbuild.render.ansible import TEXT_ASSETS as TEXT_GROUPS, batches
from envbuild.shipped import ASSET_GROUPS


def tree(tmp_path):
    root = tmp_path / "node"
    (root / "wheels").mkdir(parents=True)
    (root / "git" / "apex.git" / "refs" / "heads").mkdir(parents=True)  # empty, as git leaves it
    (root / "wheels" / "six-1.16.0-py2.py3-none-any.whl").write_bytes(b"wheel")
    (root / "git" / "apex.git" / "HEAD").write_text("ref: refs/heads/master\n")
    (root / "stray.txt").write_text("not declared")
    return root, ["wheels/six-1.16.0-py2.py3-none-any.whl", "git/apex.git/HEAD"]


def test_the_archive_holds_the_declared_files_and_every_folder_nothing_else(tmp_path):
    root, names = tree(tmp_path)
    tar = write_tar(root, names, tmp_path / "node.tar")
    with tarfile.open(tar) as t:
        members = {m.name: m for m in t.getmembers()}
    assert set(members) == {*names, "wheels", "git", "git/apex.git", "git/apex.git/refs",
                            "git/apex.git/refs/heads"}
    assert {(m.uid, m.gid, m.uname, m.mtime) for m in members.values()} == {(0, 0, "", 0)}
    assert not list(tmp_path.glob(".node.tar.*"))  # no temporary file left beside it


def test_the_same_files_give_the_same_bytes_and_a_matching_archive_is_kept(tmp_path):
    root, names = tree(tmp_path)
    first = sha256_file(write_tar(root, names, tmp_path / "a.tar"))
    (root / "wheels" / "six-1.16.0-py2.py3-none-any.whl").touch()  # a new mtime only
    assert sha256_file(write_tar(root, names, tmp_path / "b.tar")) == first
    kept = (tmp_path / "a.tar").stat().st_mtime_ns
    write_tar(root, names, tmp_path / "a.tar")
    assert (tmp_path / "a.tar").stat().st_mtime_ns == kept


def _planted(tmp_path, root, names, add):
    """An archive at ``tmp_path/p.tar`` with every member of the right one (so only what
    ``add(tar)`` puts in differs from it)."""
    clean = write_tar(root, names, tmp_path / "right.tar")
    with tarfile.open(clean) as src, tarfile.open(tmp_path / "p.tar", "w") as tar:
        for m in src.getmembers():
            tar.addfile(m, src.extractfile(m) if m.isfile() else None)
        add(tar)
    return tmp_path / "p.tar"


def _link(tar, name, target, kind=tarfile.SYMTYPE):
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    tar.addfile(info)


@pytest.mark.parametrize("add", [
    lambda tar: _link(tar, "wheels/evil", "/etc/passwd"),  # a link out of the folder
    lambda tar: tar.addfile(tarfile.TarInfo("../climb")),  # a name that climbs out
    lambda tar: tar.addfile(tarfile.TarInfo("extra.whl")),  # a member nobody declared
], ids=["symlink", "climbing-name", "undeclared"])
def test_an_existing_archive_with_anything_else_is_made_again(tmp_path, add):
    root, names = tree(tmp_path)
    planted = _planted(tmp_path, root, names, add)
    assert sha256_file(planted) != sha256_file(tmp_path / "right.tar")
    write_tar(root, names, planted)
    assert sha256_file(planted) == sha256_file(write_tar(root, names, tmp_path / "clean.tar"))


def test_an_existing_archive_with_another_size_is_made_again(tmp_path):
    root, names = tree(tmp_path)
    write_tar(root, names, tmp_path / "a.tar")
    (root / "wheels" / "six-1.16.0-py2.py3-none-any.whl").write_bytes(b"another wheel")
    write_tar(root, names, tmp_path / "a.tar")
    with tarfile.open(tmp_path / "a.tar") as t:
        assert t.getmember("wheels/six-1.16.0-py2.py3-none-any.whl").size == len(b"another wheel")


@pytest.mark.parametrize("name", ["../outside", "/etc/passwd"])
def test_a_name_outside_the_folder_is_refused(tmp_path, name):
    root, names = tree(tmp_path)
    with pytest.raises(ValueError):
        write_tar(root, [*names, name], tmp_path / "x.tar")
    assert not (tmp_path / "x.tar").exists()


def _step(archive: str) -> Step:
    params = BundleParams(digest="d" * 64, src="/home/u/.envbuild/fleet/abc", archive=archive,
                          dir="/opt/env/.envbuild/fleet",
                          files=[StagedFile(name="wheels/six-1.16.0-py2.py3-none-any.whl", sha256="0" * 64, size=5)])
    return Step(id="wheels", title="wheels", params=params, reason="test")


def test_a_staged_folder_with_an_archive_is_one_unpack_task():
    [batch] = [b for b in batches(_step("/home/u/.envbuild/fleet/abc.tar"), "/opt/env") if b["type"] != "node"]
    assert batch == {"type": "stage", "archive": "/home/u/.envbuild/fleet/abc.tar",
                     "dest": "/opt/env/.envbuild/fleet/"}


def test_a_staged_folder_without_an_archive_is_copied_file_by_file():
    [batch] = [b for b in batches(_step(""), "/opt/env") if b["type"] != "node"]
    assert batch["type"] == "copy" and batch["src"] == "/home/u/.envbuild/fleet/abc/"


def test_envbuilds_python_files_are_text_batches_and_other_files_puts():
    """The smoke scripts and the node package's tools (Python: UTF-8, never starting with ``{``
    or ``[``, which ansible-core before 2.19 would read back from the lookup as data) are written
    by a text batch; uv's binary and any other file are put (``envbuild_put``)."""
    from envbuild.render.ansible import is_text_asset

    assert is_text_asset("smoke/gpt.py") and is_text_asset("node/fetch_data.py")
    assert not is_text_asset("smoke/references.json") and not is_text_asset("uv/uv")
    prefix = "/opt/env"
    smoke_dir = f"{prefix}/.envbuild/smoke"
    smoke = Step(id="smoke", title="s", params=P.SmokeParams(
        kinds=["gpt"], dir=smoke_dir, env_file=f"{prefix}/.envbuild/env.sh",
        runs=[P.SmokeRun(name="gpt", script="gpt.py", argv=["python", "gpt.py"], cwd=smoke_dir)]))
    [text] = [b for b in batches(smoke, prefix) if b["type"] in ("text", "put", "copy")]
    assert text["type"] == "text" and text["src"].endswith("/smoke/gpt.py") and text["dest"] == f"{smoke_dir}/gpt.py"
    uv = Step(id="uv", title="uv", params=P.UvToolParams(dest=f"{prefix}/.envbuild/bin/uv", version="0.9.0",
                                                          sha256="0" * 64))
    assert [b["type"] for b in batches(uv, prefix)][-1] == "put"
    for group in TEXT_GROUPS:  # every Python file a text batch may carry reads back as text
        for path in ASSET_GROUPS[group].glob("*.py"):
            assert path.read_text(encoding="utf-8").lstrip()[:1] not in ("{", "["), path


def test_a_copy_finds_its_folder_made_by_the_node_batch_before_it():
    """Copies and unpacks have no folder task: the node batch before them makes the folder (once
    per step), or a node batch of its own does when the step starts with one."""
    from envbuild.render.ansible import _folder_first

    out: list[dict] = []
    made: set[str] = set()
    _folder_first(out, "/opt/env/.envbuild/assets", made)  # the step starts with a copy
    assert out == [{"type": "node", "actions": [{"op": "mkdir", "path": "/opt/env/.envbuild/assets"}]}]
    out.append({"type": "copy", "src": "a", "dest": "/opt/env/.envbuild/assets/a", "mode": "0644"})
    _folder_first(out, "/opt/env/.envbuild/assets/", made)  # a second copy there: nothing more
    assert len(out) == 2
    out.append({"type": "node", "actions": [{"op": "run", "argv": ["true"]}]})
    _folder_first(out, "/opt/env/other", made)  # after a node batch: its last action
    assert out[-1]["actions"][-1] == {"op": "mkdir", "path": "/opt/env/other"} and len(out) == 3


def test_every_batch_type_has_its_task_file():
    """The role includes each batch type's file from a fixed table: every type the renderer
    writes (and the role's own record batch) names a file that exists."""
    import yaml

    from envbuild.execute.ansible import COLLECTION, PLAYBOOKS
    role = PLAYBOOKS / COLLECTION / "roles" / "provision"
    table = yaml.safe_load((role / "vars" / "main.yml").read_text())["provision_batch_tasks"]
    assert set(table) == {"node", "copy", "put", "text", "stage", "wheel", "tree_restore", "tree_save", "capture",
                          "record"}
    for kind, name in table.items():
        assert (role / "tasks" / name).is_file(), (kind, name)
    forms = yaml.safe_load((role / "vars" / "main.yml").read_text())["provision_step_tasks"]
    assert set(forms) == {"node", "batches"} and all((role / "tasks" / n).is_file() for n in forms.values())


def test_a_step_that_is_one_node_batch_is_one_task():
    """``form: node`` exactly when the step's batches are one node batch (which records the
    step): the role runs it as one task named for the step; every other step is announced and
    its batches included one by one (``form: batches``)."""
    from envbuild.render.ansible import step_vars

    prefix = "/opt/env"
    env_file = Step(id="env-file", title="e", params=P.EnvFileParams(path=f"{prefix}/.envbuild/env.sh", vars={}))
    one = step_vars(env_file, prefix)
    assert one["form"] == "node" and [b["type"] for b in one["batches"]] == ["node"]
    assert one["batches"][0]["record"] is True
    uv = Step(id="uv", title="uv", params=P.UvToolParams(dest=f"{prefix}/.envbuild/bin/uv", version="0.9.0",
                                                          sha256="0" * 64))
    more = step_vars(uv, prefix)
    assert more["form"] == "batches" and [b["type"] for b in more["batches"]][-1] == "put"


def test_ansible_moves_files_over_a_reused_uncompressed_ssh_connection(tmp_path):
    """ansible-core's default ssh_args carry -C: zlib over wheels and bundles that do not
    compress doubled the time of a 220 MB stage over loopback. envbuild's ssh args keep the
    connection reuse (ControlMaster, ControlPersist, the control path in the run folder) and
    drop -C; the ssh client parses them (``ssh -G`` prints the configuration they give)."""
    import shlex
    import subprocess

    from envbuild.execute.ansible import ansible_env

    env = ansible_env(tmp_path, insecure=False)
    args = shlex.split(env["ANSIBLE_SSH_ARGS"])
    assert "-C" not in args and "-oCompression=yes" not in args
    assert {"ControlMaster=auto", "ControlPersist=60s"} <= set(args) and env["ANSIBLE_SSH_CONTROL_PATH_DIR"]
    # what the ssh client (.ci/apt-packages.txt) makes of them: compression off, master reused
    got = subprocess.run(["ssh", "-G", *args, "node.invalid"], capture_output=True, text=True, check=True).stdout
    conf = dict(line.split(" ", 1) for line in got.splitlines() if " " in line)
    assert conf["compression"] == "no" and conf["controlmaster"] == "auto" and conf["controlpersist"] == "60"


def test_a_staged_steps_digest_is_the_same_from_any_controller():
    """Where the controller keeps the files (its $ENVBUILD_HOME) is not part of the step's
    digest: a node's markers written by one controller hold for another (a shared prefix, two
    users); what the node gets (names, sha256s, its folder) is."""
    a = _step("/home/u/.envbuild/fleet/abc.tar")
    b = Step(id="wheels", title="wheels", reason="test",
             params=a.params.model_copy(update={"src": "/home/v/.envbuild/fleet/abc", "archive": ""}))
    assert a.digest == b.digest
    other = a.params.model_copy(update={"files": [StagedFile(name="wheels/x-1-py3-none-any.whl", sha256="1" * 64, size=5)]})
    assert Step(id="wheels", title="wheels", reason="test", params=other).digest != a.digest
    moved = a.params.model_copy(update={"dir": "/opt/other/.envbuild/fleet"})
    assert Step(id="wheels", title="wheels", reason="test", params=moved).digest != a.digest
