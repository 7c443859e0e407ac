"""The run folder, typed: models of what a run directory holds, one writer, one reader.

A run directory (``envbuild.rundir``: ``$ENVBUILD_HOME/runs/<run-id>/``) holds

- ``run.json``: ``RunInfo`` (``run.py``), written only through ``RunWriter`` (``write.py``):
  every update is validated by the model, so a field the record does not know, or a value of
  the wrong type, is refused where it is written; its ``selection`` is the one node selection
  (``envbuild.connect.selection.NodeSelection``), read as ``RunRecord.selection``;
- ``launch.json``: ``LaunchRecord`` (``launch.py``), a run of ``envbuild launch --submit``, its
  ``status`` in the judge's words (PASS, NOT JUDGED, FAIL);
- ``events.jsonl``: one ``Event`` a line (``events.py``), the executor's step events;
- ``recipe.json``: the recipe as run, read through ``RecipeView`` (``run.py``; its ``benchmark``
  the recipe's own ``envbuild.recipes.schema.Benchmark``);
- ``nodes/<host>/``: ``result.json`` (``NodeResult``), ``facts.json`` (``envbuild.facts``'
  ``NodeFacts``), ``preflight.json`` (``envbuild.compat``'s preflight ``Verdict``),
  ``plan.json`` (``envbuild.plan``'s ``Plan``), ``observed.json`` (``envbuild.observe``'s
  ``Observed``) and ``smoke.json`` (``SmokeRecord``, ``smoke.py``; its native section's
  ``verdict`` is the judge's ``Verdict`` (``record/verdict.py``), the one model of a judged benchmark).

``RunRecord.load(path)`` (``load.py``) reads a whole run folder into these models; records
written by older envbuild versions are mapped to the current shapes in one place
(``migrate.py``). A damaged or unknown file is an ``InputError`` naming the file and the field.
"""

from __future__ import annotations

from envbuild.record.launch import LaunchRecord
from envbuild.record.load import NodeRecord, RunRecord, read_run_info
from envbuild.record.node import NodeResult
from envbuild.record.run import RUN_SCHEMA, UNFINISHED, RecipeView, RunInfo
from envbuild.record.smoke import NativeSection, SmokeRecord
from envbuild.record.verdict import Verdict
from envbuild.record.write import RecordError, RunWriter, create_run

__all__ = ["RUN_SCHEMA", "UNFINISHED", "LaunchRecord", "NativeSection", "Verdict", "NodeRecord",
           "NodeResult", "RecipeView", "RecordError", "RunInfo", "RunRecord", "RunWriter", "SmokeRecord",
           "create_run", "read_run_info"]
