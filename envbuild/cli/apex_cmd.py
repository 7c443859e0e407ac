"""``envbuild apex-patch``: decide and (with --apply) relax Apex's CUDA check in a checkout."""

from __future__ import annotations

import click

from envbuild.cli import cli
from envbuild.cli.output import console, emit_json


@cli.command("apex-patch")
@click.argument("source_dir", type=click.Path(file_okay=False))
@click.option("--nvcc", required=True, help="CUDA of the node's nvcc, e.g. 11.4 ('none' if absent).")
@click.option("--torch-cuda", required=True, help="torch.version.cuda of the wheel, e.g. 11.3.")
@click.option("--cpp-ext-only", is_flag=True, help="Only --cpp_ext is built (no CUDA check).")
@click.option("--apply", is_flag=True, help="Write setup.py (atomically); default is a dry run.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def apex_patch(source_dir: str, nvcc: str, torch_cuda: str, cpp_ext_only: bool,
               apply: bool, as_json: bool) -> None:
    """Relax Apex's exact CUDA-vs-torch check to the major version where that is safe.

    \b
    Prints the decision (unchanged, patched or refused), the reason and the diff.
    Exit 0 unchanged/patched, 1 refused, 2 bad input (no setup.py, not Apex).
    Example: envbuild apex-patch ./apex --nvcc 11.4 --torch-cuda 11.3 --apply
    """
    from envbuild.flows.apex import ApexRequest
    from envbuild.flows.apex import apex_patch as decide

    res = decide(ApexRequest(source_dir=source_dir, nvcc=nvcc, torch_cuda=torch_cuda, cuda_ext=not cpp_ext_only,
                             apply=apply))
    report = res.report
    if as_json:
        emit_json(res.to_dict())
    else:
        console.print(f"decision: {report.decision}")
        console.print(f"reason: {report.reason}", markup=False)
        if report.fix:
            console.print(f"fix: {report.fix}", markup=False)
        if report.diff:
            console.print(report.diff.rstrip("\n"), markup=False)
        if report.decision == "patched":
            state = "written" if report.applied else (
                "already patched" if report.status == "already-applied" else "dry run (use --apply)")
            console.print(f"setup.py: {state}")
    code = res.exit_code
    if code:  # envbuild.cli.main drops click's return code under standalone_mode=False
        raise SystemExit(code)
