"""pip.conf settings uv does not read (envbuild.facts.pipconf): the probe reports the keys a
node's pip config files set (never their values) and the variables that stand in for them;
``--installer auto`` picks pip where a fetch setting lives only in a file, and says which."""

from __future__ import annotations

import os
import subprocess

from envbuild.facts import pipconf
from envbuild.facts.model import NodeFacts
from envbuild.facts.model import UvBinary
from envbuild.facts.script import build_script, split_sections
from envbuild.plan.installer import choose_installer

UV = UvBinary(version="0.13.9", sha256="0" * 64, os="linux", arch="x86_64", libc="glibc", glibc_min="2.17")


def _probe(env: dict[str, str]) -> tuple[dict[str, list[str]], list[str]]:
    out = subprocess.run(["sh", "-c", build_script(pipconf.PROBES)], capture_output=True, text=True,
                         env=env, timeout=30).stdout
    return pipconf.parse_pip_config(split_sections(out)["pip_config"].out)


def test_the_probe_reads_keys_never_values(tmp_path) -> None:
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nindex-url = https://alice:s3cret@mirror.example/simple\n"
                    "timeout: 60\n\n[install]\n  trusted-host = mirror.example\n")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home"), "PIP_CONFIG_FILE": str(conf)}
    files, set_vars = _probe(env)
    # this file's keys (the machine's own /etc/pip.conf, if any, is listed beside it)
    assert files[str(conf)] == ["global.index-url", "global.timeout", "install.trusted-host"]
    assert set_vars == []
    out = subprocess.run(["sh", "-c", build_script(pipconf.PROBES)], capture_output=True, text=True, env=env).stdout
    assert "s3cret" not in out and "mirror.example" not in out
    files, set_vars = _probe({**env, "PIP_INDEX_URL": "https://mirror.example/simple"})
    assert set_vars == ["PIP_INDEX_URL"]
    assert pipconf.unseen_by_uv({str(conf): files[str(conf)]}, set_vars) == [f"{conf}: install.trusted-host"]


def test_auto_picks_pip_where_a_fetch_setting_is_only_in_a_file() -> None:
    node = NodeFacts(host="n1", arch="x86_64", glibc="2.36",
                     pip_config={"/etc/pip.conf": ["global.cert", "global.index-url"]})
    installer, why = choose_installer("auto", UV, node, "venv", "3.11")
    assert installer == "pip"
    assert "/etc/pip.conf: global.cert; /etc/pip.conf: global.index-url" in why and "--installer uv" in why
    # the same settings given in the environment too (as on this CI machine for its cert): uv
    covered = node.model_copy(update={"pip_config_env": ["PIP_CERT", "PIP_INDEX_URL"]})
    assert choose_installer("auto", UV, covered, "venv", "3.11")[0] == "uv"
    # asked for, uv stays (the reason is in the plan); find-links and timeouts do not decide
    assert choose_installer("uv", UV, node, "venv", "3.11")[0] == "uv"
    other = NodeFacts(host="n1", arch="x86_64", glibc="2.36",
                      pip_config={"/root/.config/pip/pip.conf": ["global.find-links", "global.timeout"]})
    assert choose_installer("auto", UV, other, "venv", "3.11")[0] == "uv"
