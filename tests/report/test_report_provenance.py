"""Issue 41: a report carries its provenance from outside it. `envbuild report -o FILE
--sign-key KEY` writes FILE.intoto.jsonl (an in-toto statement of SLSA provenance naming the
report's sha256, the run's records it was made from, the run and its verdict, signed with an
Ed25519 key made by ssh-keygen); `envbuild attest FILE --trusted-key KEY.pub` checks it offline
and refuses a changed report, another key's signature and a bundle's statement."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from envbuild.bundle import provenance as P
from envbuild.cli import main
from support.paths import DATA

SAMPLE = DATA / "runs" / "20261122-073000-alpa-megatron-h100-ubuntu2404"


def _key(path: Path) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "t", "-f", str(path)], check=True)
    return path


def test_a_signed_report_is_attested_and_a_changed_one_refused(tmp_path, capsys) -> None:
    key, other = _key(tmp_path / "maker"), _key(tmp_path / "other")
    run = tmp_path / "run"
    shutil.copytree(SAMPLE, run)
    out = tmp_path / "report.html"
    assert main(["report", str(run), "-o", str(out), "--sign-key", str(key)]) == 1  # the sample's verdict: FAIL
    envelope = Path(str(out) + ".intoto.jsonl")
    assert envelope.is_file()
    capsys.readouterr()
    assert main(["attest", str(out), "--trusted-key", f"{key}.pub", "--json"]) == 0
    stmt = json.loads(capsys.readouterr().out)
    params = stmt["predicate"]["buildDefinition"]["externalParameters"]
    assert stmt["predicate"]["buildDefinition"]["buildType"] == P.REPORT_BUILD_TYPE
    assert (params["recipe"], params["verdict"], params["run"]) == ("alpa-megatron", "FAIL", SAMPLE.name)
    inputs = {d["name"] for d in stmt["predicate"]["buildDefinition"]["resolvedDependencies"]}
    assert "run:run.json" in inputs and any(n.startswith("run:nodes/") for n in inputs)
    # another key's signature, a changed report: refused, exit 1, saying why
    assert main(["attest", str(out), "--trusted-key", f"{other}.pub"]) == 1
    assert "not by a trusted key" in capsys.readouterr().err
    out.write_text(out.read_text().replace("FAIL", "PASS"))
    assert main(["attest", str(out), "--trusted-key", f"{key}.pub"]) == 1
    err = capsys.readouterr().err
    assert "not the signed statement's" in err and "do not trust this report" in err


def test_a_bundles_statement_does_not_attest_a_report(tmp_path, capsys) -> None:
    """A statement signed by the trusted key for the very same bytes, but of a bundle: refused
    as the provenance of a report."""
    key = _key(tmp_path / "maker")
    out = tmp_path / "report.md"
    out.write_text("# a report\n")
    from envbuild.fsio import sha256_file

    stmt = P.statement(out.name, sha256_file(out), recipe="r", target="t", lock_digest="", inputs={}, git=[],
                       envbuild_version="0", envbuild_commit=None, started="s", finished="f")
    P.write_envelope(out, P.sign(stmt, key))
    assert main(["attest", str(out), "--trusted-key", f"{key}.pub"]) == 1
    assert "not an in-toto statement of SLSA provenance of a report" in capsys.readouterr().err
    assert main(["attest", str(out), "--trusted-key", f"{key}.pub", "--kind", "bundle"]) == 0


def test_sign_key_needs_an_output_file(tmp_path, capsys) -> None:
    key = _key(tmp_path / "maker")
    assert main(["report", str(SAMPLE), "--sign-key", str(key)]) == 2
    assert "give -o FILE" in capsys.readouterr().err
    assert main(["report", str(SAMPLE), "-o", str(tmp_path / "r.md"), "--sign-key", f"{key}.pub"]) == 2
    assert "not an Ed25519 private key" in capsys.readouterr().err and not (tmp_path / "r.md").exists()


def test_a_signed_statements_control_bytes_are_shown_escaped(tmp_path, capsys) -> None:
    """The statement is the signer's text: a trusted signer's recipe name with an escape
    sequence (OSC 52 sets the clipboard) reaches the terminal escaped, not as bytes."""
    key = _key(tmp_path / "maker")
    out = tmp_path / "report.md"
    out.write_text("# a report\n")
    from envbuild.fsio import sha256_file

    stmt = P.statement(out.name, sha256_file(out), recipe="r\x1b]52;c;cm0gLXJmIH4=\x07", target="t\x9b2J",
                       lock_digest="", inputs={}, git=[], envbuild_version="0", envbuild_commit=None,
                       started="s", finished="f", build_type=P.REPORT_BUILD_TYPE)
    P.write_envelope(out, P.sign(stmt, key))
    assert main(["attest", str(out), "--trusted-key", f"{key}.pub"]) == 0
    shown = capsys.readouterr().out
    assert "\x1b" not in shown and "\x07" not in shown and "\x9b" not in shown
    assert "recipe r\\x1b]52;c;cm0gLXJmIH4=\\x07" in shown and "target t\\x9b2J" in shown


def test_a_report_signed_for_a_short_while_expires(tmp_path, capsys) -> None:
    """Issue 54: --valid-days sets how long the statement holds; attest refuses it after (exit 1),
    and shows when it expires before. --valid-days without --sign-key is bad input (exit 2)."""
    key = _key(tmp_path / "maker")
    out = tmp_path / "report.md"
    assert main(["report", str(SAMPLE), "-o", str(out), "--sign-key", str(key), "--valid-days", "1"]) == 1
    capsys.readouterr()
    assert main(["attest", str(out), "--trusted-key", f"{key}.pub", "--kind", "report"]) == 0
    shown = capsys.readouterr().out
    stmt = P.verify(out, P.envelope_path(out), [Path(f"{key}.pub")], kind="report")
    meta = stmt["predicate"]["runDetails"]["metadata"]
    assert f"expires {meta[P.EXPIRES]}" in shown and meta[P.EXPIRES] == P.valid_until(meta["finishedOn"], 1)
    assert main(["report", str(SAMPLE), "-o", str(out), "--sign-key", str(key), "--valid-days", "0.00001"]) == 1
    capsys.readouterr()
    import time

    time.sleep(1.5)  # 0.00001 days is 0.864 s after it was made
    assert main(["attest", str(out), "--trusted-key", f"{key}.pub"]) == 1
    err = capsys.readouterr().err
    assert "report.md: the signed statement expired at" in err and "do not trust this report" in err
    assert main(["report", str(SAMPLE), "-o", str(tmp_path / "r.md"), "--valid-days", "3"]) == 2
    assert "--valid-days" in capsys.readouterr().err and not (tmp_path / "r.md").exists()


def test_a_report_written_again_without_a_key_removes_the_signature_of_the_one_it_replaced(tmp_path, capsys) -> None:
    """A signature beside a report names that report's sha256; a report written again at that
    path without --sign-key removes it and says so (as bundle and pack do), so nothing beside the
    new report claims a provenance it does not have."""
    key = _key(tmp_path / "maker")
    run = tmp_path / "run"
    shutil.copytree(SAMPLE, run)
    out = tmp_path / "report.md"
    assert main(["report", str(run), "-o", str(out), "--sign-key", str(key)]) == 1
    envelope = Path(str(out) + ".intoto.jsonl")
    assert envelope.is_file()
    capsys.readouterr()
    assert main(["report", str(run), "-o", str(out)]) == 1
    assert not envelope.exists() and out.is_file()
    assert f"removed {envelope}: the provenance of the report this one replaced" in capsys.readouterr().err


def test_an_appendix_written_over_a_signed_report_removes_its_signature_and_sign_key_is_refused_there(tmp_path, capsys):
    """The appendix is written unsigned (envbuild makes no statement of it): a signature beside
    its file, left by a signed report, is removed; --sign-key with --appendix is refused (exit 2)
    before anything is written, not ignored."""
    key = _key(tmp_path / "maker")
    run = tmp_path / "run"
    shutil.copytree(SAMPLE, run)
    out = tmp_path / "report.md"
    assert main(["report", str(run), "-o", str(out), "--sign-key", str(key)]) == 1
    envelope = Path(str(out) + ".intoto.jsonl")
    before = out.read_text()
    capsys.readouterr()
    assert main(["report", str(run), "--appendix", "-o", str(out), "--sign-key", str(key)]) == 2
    assert "--sign-key signs the report of a run folder, not --appendix" in capsys.readouterr().err
    assert out.read_text() == before and envelope.is_file()
    main(["report", str(run), "--appendix", "-o", str(out)])
    assert not envelope.exists() and out.read_text() != before
