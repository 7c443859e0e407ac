"""The one-script gathering: real sh runs the script; sections split back; assembly from captures."""

import shlex

from envbuild.connect.runners import LocalRunner
from envbuild.facts.assemble import all_probes, assemble
from envbuild.facts.probe import Probe, Section
from envbuild.facts.script import build_script, split_sections
from support.paths import FIXTURES

NODES = FIXTURES / "nodes"
H100 = NODES / "h100-ubuntu2404-cuda13"


def run(probes, **kw):
    script = build_script(probes, **kw)
    return split_sections(LocalRunner().run("sh -c " + shlex.quote(script)).stdout)


def test_sections_keep_stdout_stderr_and_status_apart():
    secs = run([
        Probe("a", "printf 'no newline'"),
        Probe("b", "echo out; echo err >&2; exit 3"),
        Probe("c", "exit 127"),
        Probe("d", "printf 'two\\n\\n'"),
        Probe("e", "echo '::envbuild:: fake out'"),  # a marker-like line with the wrong shape
    ])
    assert secs["a"] == Section("no newline", "", 0)
    assert secs["b"] == Section("out\n", "err\n", 3)
    assert secs["c"].not_found and secs["c"].why("tool") == "tool not found"
    assert secs["d"].out == "two\n\n"
    assert secs["b"].why("tool") == "tool exited 3: err"


def test_probe_stdin_is_closed_and_python_is_passed():
    secs = run([Probe("py", 'echo "$__eb_py"'), Probe("stdin", "cat")], python="/opt/x y/python3")
    assert secs["py"].out == "/opt/x y/python3\n"
    assert secs["stdin"].out == "" and secs["stdin"].ok


def test_truncated_output_marks_rc_minus_one():
    script_out = "::envbuild:: a out\nhello\n\n::envbuild:: a err\n\n::envbuild:: a rc 0\n::envbuild:: b out\npartial"
    secs = split_sections(script_out)
    assert secs["a"] == Section("hello\n", "", 0)
    assert secs["b"].rc == -1 and secs["b"].out == "partial"


def test_assemble_h100_from_captured_output():
    sections = {
        "gpu_query": Section((H100 / "nvidia-smi-query.csv").read_text()),
        "gpu_xml": Section((H100 / "nvidia-smi-q.xml").read_text()),
        "gpu_topo": Section("", "", 127),
        "nvcc": Section("CUDA_HOME=\nNVCC=/usr/local/cuda/bin/nvcc\n" + (H100 / "nvcc-version.txt").read_text()),
        "os_release": Section((H100 / "os-release").read_text()),
        "pip_list": Section((H100 / "pip-list.txt").read_text()),
        "python_selected": Section("/opt/torch/.venv/bin/python3\n"),
    }
    f = assemble(sections, "h100")
    assert f.has_gpu and f.archs == ["9.0"] and f.gpus[0].uuid
    assert (f.driver_version, f.driver_cuda, f.nvcc, f.cuda_home) == ("580.159.04", "13.0", "13.0", "/usr/local/cuda")
    assert (f.os_id, f.os_version) == ("ubuntu", "24.04")
    assert f.nccl_version == f.pip_packages["nvidia-nccl-cu13"]
    assert "topology" in f.missing and "gpus" not in f.missing


def test_assemble_nothing_gathered_records_missing_and_never_raises():
    f = assemble({}, "empty")
    assert not f.has_gpu
    assert {"gpus", "nvcc", "glibc", "pythons", "nccl_version", "container_engines"} <= set(f.missing)


def test_all_probe_names_unique_and_script_is_valid_sh():
    probes = all_probes()
    assert len({p.name for p in probes}) == len(probes)
    script = build_script(probes)
    r = LocalRunner().run("sh -n -c " + shlex.quote(script))
    assert r.rc == 0, r.stderr


def test_a_probe_that_prints_without_end_is_cut_and_not_believed():
    """Issue 41: output size bounds the probe as its time does: a probe that prints forever
    (a lying nvidia-smi) is cut at OUTPUT_LIMIT and stopped (SIGPIPE) at once, its section not
    believed (rc OVERSIZE, no output, the reason in err); the probes around it are whole."""
    import subprocess
    import time

    from envbuild.facts.probe import Probe
    from envbuild.facts.script import OUTPUT_LIMIT, OVERSIZE, build_script, split_sections

    script = build_script([Probe("before", "echo one"), Probe("liar", "yes 'GPU 0: NVIDIA H100'"),
                           Probe("after", "echo two; exit 3")])
    t0 = time.monotonic()
    p = subprocess.run(["sh", "-c", script], capture_output=True, timeout=60)
    took = time.monotonic() - t0
    sections = split_sections(p.stdout.decode())
    assert took < 20 and len(p.stdout) < OUTPUT_LIMIT + 10_000
    assert (sections["before"].out, sections["before"].rc) == ("one\n", 0)
    assert sections["liar"].rc == OVERSIZE and sections["liar"].out == "" and not sections["liar"].ok
    assert f"printed more than {OUTPUT_LIMIT} bytes on stdout" in sections["liar"].why("nvidia-smi")
    assert (sections["after"].out, sections["after"].rc) == ("two\n", 3)


def test_a_probe_that_writes_stderr_without_end_is_cut_and_writes_no_growing_file(tmp_path):
    """The same bound on stderr: it passes through `head -c` (a FIFO), so a probe writing
    errors without end is stopped at the cap in seconds, and what lies in the script's
    temporary folder never passes the cap."""
    import os
    import subprocess
    import time

    from envbuild.facts.probe import Probe
    from envbuild.facts.script import OUTPUT_LIMIT, OVERSIZE, build_script, split_sections

    script = build_script([Probe("liar", "yes 'NVIDIA-SMI has failed' >&2"), Probe("after", "echo two")])
    t0 = time.monotonic()
    p = subprocess.run(["sh", "-c", script], capture_output=True, timeout=60, env={**os.environ, "TMPDIR": str(tmp_path)})
    assert time.monotonic() - t0 < 20
    sections = split_sections(p.stdout.decode())
    assert sections["liar"].rc == OVERSIZE and f"printed more than {OUTPUT_LIMIT} bytes on stderr" in sections["liar"].err
    assert (sections["after"].out, sections["after"].rc) == ("two\n", 0)
    assert list(tmp_path.iterdir()) == []  # the temporary folder removed
