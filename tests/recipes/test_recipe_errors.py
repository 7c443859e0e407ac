"""Bad recipe input through the real CLI: one located `error:` line, a `hint:` line, exit 2."""

import re
import subprocess
from pathlib import Path

import pytest
from support.clirun import envbuild as run_envbuild
from support.paths import DATA, ROOT

BAD = DATA / "bad_recipes"


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return run_envbuild(*args, cwd=ROOT)


def error_lines(proc: subprocess.CompletedProcess) -> tuple[str, str]:
    """The single error line and the single hint line; asserts the common contract."""
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("error: ")]
    hints = [ln for ln in lines if ln.startswith("hint: ")]
    assert len(errors) == 1 and len(hints) == 1, proc.stderr
    assert len(lines) == 2, proc.stderr
    return errors[0], hints[0]


def line_of(path: Path, needle: str) -> int:
    """1-based line of the first line containing ``needle`` (the line the error must name)."""
    for n, text in enumerate(path.read_text().splitlines(), 1):
        if needle in text:
            return n
    raise AssertionError(f"{needle!r} not in {path}")


@pytest.mark.parametrize("command", ["show", "recipes"])
def test_yaml_syntax_error_names_file_and_line(command):
    path = BAD / "syntax_error.yaml"
    err, hint = error_lines(run_cli(command, str(path)))
    m = re.match(r"error: (\S+):(\d+): YAML syntax error", err)
    assert m, err
    assert Path(m.group(1)).name == path.name
    # the unclosed '[' on line 5 is reported where the parser gives up, the next line
    assert int(m.group(2)) == line_of(path, "python:")
    assert "quot" in hint or "indent" in hint


def test_unknown_field_names_file_line_and_field():
    path = BAD / "unknown_field.yaml"
    err, hint = error_lines(run_cli("show", str(path)))
    assert err == f"error: {path}:{line_of(path, 'indx:')}: packages[0].indx: unknown field"
    assert "did you mean 'index'?" in hint


def test_misspelt_required_field_names_the_misspelling_and_the_fix():
    path = BAD / "misspelt_version.yaml"
    err, hint = error_lines(run_cli("show", str(path)))
    assert f"misspelt_version.yaml:{line_of(path, 'verison:')}: packages[0].verison: unknown field" in err
    assert "did you mean 'version'?" in hint


def test_git_source_without_sha_is_refused():
    path = BAD / "missing_sha.yaml"
    err, hint = error_lines(run_cli("show", str(path)))
    assert f"missing_sha.yaml:{line_of(path, '- name: megatron')}: sources[0]" in err
    assert "'sha'" in err and "unverified" in err
    assert hint


def test_abbreviated_sha_is_refused_at_its_line():
    path = BAD / "short_sha.yaml"
    err, _ = error_lines(run_cli("show", str(path)))
    assert f"short_sha.yaml:{line_of(path, 'sha: c28bbd20')}: sources[0].sha" in err
    assert "40-hex" in err


def test_package_without_why_is_refused():
    path = BAD / "missing_why.yaml"
    err, hint = error_lines(run_cli("show", str(path)))
    assert f"missing_why.yaml:{line_of(path, '- name: einops')}: packages[1].why: required field is missing" in err
    assert "reason" in hint


def test_unknown_recipe_name_suggests_close_names():
    err, hint = error_lines(run_cli("show", "alpa-megatorn"))
    assert "unknown recipe 'alpa-megatorn'" in err
    assert "did you mean 'alpa-megatron'?" in hint
    assert "cpu-reference" in hint  # the known names are listed


def test_missing_recipe_file_is_input_error():
    err, hint = error_lines(run_cli("show", "no/such/recipe.yaml"))
    assert "does not exist" in err and "path" in hint


@pytest.mark.parametrize("path", [BAD / "target_as_recipe.yaml",
                                  ROOT / "envbuild" / "targets" / "data" / "azure-nd96.yaml"])
def test_target_file_given_as_recipe(path):
    err, hint = error_lines(run_cli("show", str(path)))
    assert re.search(rf"{re.escape(path.name)}:\d+: this is a target profile \(.*gpus.*\), not a recipe", err), err
    assert "--target" in hint


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf"])
def test_a_threshold_that_is_not_a_finite_number_is_refused_naming_its_line(tmp_path, value):
    import yaml

    from envbuild.recipes import load_recipe

    data = load_recipe("opt-175b-azure").model_dump(mode="json", by_alias=True)
    data["benchmark"]["threshold"] = 1.0
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(data).replace("threshold: 1.0", f"threshold: {value}"))
    error, _hint = error_lines(run_cli("show", str(path)))
    assert f"{path}:{line_of(path, 'threshold: ' + value)}: benchmark.threshold" in error
    assert "finite number" in error


@pytest.mark.parametrize("url", ["--upload-pack=touch /tmp/envbuild-pwned", "-oProxyCommand=sh", "ext::sh -c id"])
def test_a_git_url_git_would_read_as_an_option_or_a_helper_is_refused(tmp_path, url):
    import yaml

    from envbuild.recipes import load_recipe

    data = load_recipe("alpa-megatron").model_dump(mode="json", by_alias=True)
    data["sources"][0]["url"] = url
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(data))
    error, _hint = error_lines(run_cli("show", str(path)))
    assert "sources[0].url" in error and "url must be" in error and str(path) in error
    assert not Path("/tmp/envbuild-pwned").exists()
