"""A site's own batch-script templates over envbuild's (envbuild.render.sitetemplates): one
block overridden, the rest byte for byte envbuild's; recipe text printed, never evaluated; the
sandbox; and the refusals naming the file (and line). The Slurm one is submitted to the real
test bed in tests/launch/test_launch_slurm.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from envbuild.cli import main
from envbuild.errors import InputError
from envbuild.launch import LaunchOptions, render_launch
from envbuild.render.sitetemplates import read_site
from envbuild.recipes import load_recipe
from envbuild.targets import load_target
from support.launchcases import CASES, plan_for
from test_launch_render import GOLDEN


def _render(name: str, folder: Path | None = None, **extra) -> str:
    recipe, target, kw = CASES[name]
    rec, tgt = load_recipe(recipe), load_target(target)
    opts = LaunchOptions(**kw, **extra, templates=read_site(folder) if folder else ())
    return render_launch(rec, tgt, plan_for(rec, tgt), opts).text


def _site(tmp_path: Path, name: str, text: str) -> Path:
    folder = tmp_path / "site"
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(text)
    return folder


@pytest.mark.parametrize("case,file,lines", [
    ("megatron-deepspeed-slurm--slurm--slurm-multi-node", "slurm.sbatch.j2",
     ["module load cudatoolkit/12.4", "export NCCL_SOCKET_IFNAME=hsn0"]),
    ("polaris-megatron-deepspeed--polaris--pbs-2nodes", "pbs.qsub.j2",
     ["module use /soft/modulefiles", "export NCCL_SOCKET_IFNAME=hsn0"]),
])
def test_a_site_overrides_one_block_and_keeps_the_rest(tmp_path, case, file, lines) -> None:
    """Blocks written on one line or several each become whole lines, where the template puts
    them (modules right after `set -euo pipefail`, environment before the task); taking those
    lines out gives envbuild's own script, as its golden file has it."""
    folder = _site(tmp_path, file, '{% extends "envbuild/' + file + '" %}\n'
                   "{% block modules %}" + lines[0] + "{% endblock %}\n"
                   "{% block environment %}\n" + lines[1] + "\n{% endblock %}\n")
    text = _render(case, folder)
    golden = next(GOLDEN.glob(case + ".*")).read_text()
    assert text != golden
    assert text.replace(lines[0] + "\n", "", 1).replace(lines[1] + "\n", "", 1) == golden
    assert "set -euo pipefail\n" + lines[0] + "\n" in text
    assert text.index(lines[1]) < text.index("# the task ")


def test_a_site_adds_a_mount_and_an_account_line(tmp_path) -> None:
    """``super()`` keeps envbuild's value: the pyxis mounts of both container sruns (the data
    prepared once, the task) gain the site's, and the account block is the site's."""
    folder = _site(tmp_path, "slurm.sbatch.j2", '{% extends "envbuild/slurm.sbatch.j2" %}'
                   '{% block mounts %}{{ super() }},/lustre:/lustre{% endblock %}'
                   '{% block account %}#SBATCH --account=proj42\n#SBATCH --qos=high{% endblock %}')
    text = _render("megatron-deepspeed-slurm--slurm--slurm-multi-node", folder)
    mounts = [line for line in text.splitlines() if "--container-mounts=" in line]
    assert len(mounts) == 2 and all('--container-mounts="$JOB_DIR",/lustre:/lustre ' in m for m in mounts)
    assert "#SBATCH --account=proj42\n#SBATCH --qos=high\n\nset -euo pipefail\n" in text


def test_recipe_text_is_printed_never_evaluated_as_a_template(tmp_path) -> None:
    """A command holding Jinja syntax reaches the script as written, with a site template
    (which sees it as data) and without."""
    hostile = "echo '{{ 7*7 }}' {% raw %} {# x #}"
    folder = _site(tmp_path, "slurm.sbatch.j2", '{% extends "envbuild/slurm.sbatch.j2" %}')
    for site in (None, folder):
        text = _render("alpa-megatron--slurm--slurm", site, command_override=hostile)
        assert "\n" + hostile + "\n" in text


@pytest.mark.parametrize("source,words", [
    ("{{ ''.__class__.__mro__[1].__subclasses__() }}", "unsafe"),  # the sandbox
    ('{% extends "envbuild/slurm.sbatch.j2" %}{% block modules %}{{ no_such_value }}{% endblock %}',
     "'no_such_value' is undefined"),
    ('{% extends "envbuild/slurm.sbatch.j2" %}\n{% block modules %}\n{% if %}\n{% endblock %}', "slurm.sbatch.j2:3"),
    ('{% extends "envbuild/no-such.j2" %}', "no-such.j2"),
])
def test_a_broken_site_template_is_an_input_error_naming_it(tmp_path, source, words) -> None:
    folder = _site(tmp_path, "slurm.sbatch.j2", source)
    with pytest.raises(InputError) as err:
        _render("alpa-megatron--slurm--slurm", folder)
    assert words in err.value.message and "site template" in err.value.message


def test_a_site_folder_holds_plain_template_files(tmp_path) -> None:
    with pytest.raises(InputError, match="holds none of slurm.sbatch.j2, pbs.qsub.j2, report.html.j2, report.md.j2"):
        read_site(_site(tmp_path, "other.j2", ""))
    (tmp_path / "elsewhere.j2").write_text("{{ 1 }}")
    os.symlink(tmp_path / "elsewhere.j2", tmp_path / "site" / "pbs.qsub.j2")
    with pytest.raises(InputError, match="a link"):
        read_site(tmp_path / "site")
    with pytest.raises(InputError, match="not a folder"):
        read_site(tmp_path / "missing")


def test_cli_templates_renders_with_the_sites_block_and_refuses_a_broken_one(tmp_path, capsys) -> None:
    folder = _site(tmp_path, "slurm.sbatch.j2", '{% extends "envbuild/slurm.sbatch.j2" %}'
                   '{% block modules %}module load site-cuda{% endblock %}')
    out = tmp_path / "job.sbatch"
    args = ["launch", "alpa-megatron", "-t", "slurm", "--scheduler", "slurm", "-o", str(out)]
    assert main([*args, "--templates", str(folder)]) == 0
    assert "set -euo pipefail\nmodule load site-cuda\n" in out.read_text()
    out.unlink()
    (folder / "slurm.sbatch.j2").write_text("{% block x %}")
    assert main([*args, "--templates", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "site template slurm.sbatch.j2" in err and "Traceback" not in err
    assert not out.exists()  # nothing written
