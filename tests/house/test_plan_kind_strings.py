"""Outside ``envbuild/plan/`` and ``envbuild/actions/``, the plan is asked questions through its
typed accessors (``Plan.sources()``, ``Plan.env_file()``, ``Plan.pip_installs()``...: uv's
``Plan { cached, remote, reinstalls }``), and a walk over every step tells one kind from another
by its params' type (``isinstance(step.params, ImageParams)``), never by a step's ``kind``
compared with a string.

The check reads every ``tests/**/*.py`` (not ``tests/data/`` and the like) and every
``envbuild/**/*.py`` outside those two packages with ``ast`` and names ``file:line`` for each
comparison (``==``, ``!=``, ``is``, ``in``, ``not in``) of a plan step's ``.kind`` (or
``["kind"]`` / ``.get("kind")``) with a string literal, or with a tuple, list or set of string
literals (also a ``frozenset``/``set``/``tuple`` call of one, or a module-level constant holding
one), and for each ``"x" in [s.kind for s in plan.steps]``, where a literal is a step kind. The
step kinds are ``envbuild.plan.model.StepKind``'s, read from the code.

Other things have a ``kind`` whose words are step kinds too (a bundle file's ``"data"`` and
``"image"``, a draft command's ``"data"``, an experiment's ``"smoke"``), so only a ``kind`` read
on a plan step counts. An expression is a plan step when it is:

- a name bound by a ``for`` or a comprehension over a collection of steps (every name of a
  tuple target: ``for i, s in enumerate(plan.steps)``, ``for s, actions in run_time_steps(ip)``);
- a name assigned a plan step, a step's params, ``next(...)`` of a generator of steps, or
  ``X.step(...)`` (``Plan.step``);
- a parameter or a variable annotated with ``Step`` or a step params model (``GitSourceParams``:
  the models of ``envbuild.plan.params`` with a ``kind`` field), or a parameter named ``step``
  without an annotation;
- an index of a collection of steps (``plan.steps[0]``), or ``.params`` / ``["params"]`` of a
  plan step.

A collection of steps is a ``steps`` or ``*_steps`` attribute, name, string key
(``data["steps"]``) or call (``run_time_steps(ip)``), a name assigned one, a slice of one,
``enumerate``/``reversed``/``sorted``/``list``/``tuple``/``zip`` over one, or a comprehension
whose items are plan steps. Names are scoped per function and per comprehension.
"""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel

from envbuild.inputs import find_lock
from envbuild.plan import params as plan_params
from envbuild.plan.build import PlanOptions
from envbuild.plan.model import Plan, StepKind
from envbuild.plan.params import (ApexBuildParams, BuildParams, DataParams, EnvFileParams, EnvironmentParams,
                                  GitSourceParams, ImageImportParams, ImageParams, ImageSmokeParams,
                                  ImportCheckParams, PatchParams, PipInstallParams, PipToolingParams,
                                  PreflightParams, SmokeParams)
from envbuild.plan.resolve import default_backend, resolve
from envbuild.recipes import load_recipe
from envbuild.targets import load_target
from support.ib_inventory import profile_facts
from support.paths import ROOT

STEP_KINDS = frozenset(typing.get_args(StepKind))
# Step, and the params models that carry a step kind (``kind: Literal["git_source"]``)
STEP_TYPES = frozenset({"Step", "StepParams"} | {
    name for name, obj in vars(plan_params).items()
    if isinstance(obj, type) and issubclass(obj, BaseModel) and "kind" in obj.model_fields})
OUTSIDE = ("envbuild/plan/", "envbuild/actions/")  # the packages that may spell kinds
WRAPPERS = frozenset({"enumerate", "reversed", "sorted", "list", "tuple", "zip", "iter"})
TEST_DATA = ("tests/data/", "tests/fixtures/", "tests/golden/")  # files read by tests, not test code


def scanned_files(root: Path = ROOT) -> list[Path]:
    """``tests/**/*.py`` outside ``TEST_DATA`` and ``envbuild/**/*.py`` outside ``OUTSIDE``."""
    files = [p for p in sorted((root / "tests").rglob("*.py"))
             if not p.relative_to(root).as_posix().startswith(TEST_DATA)]
    files += [p for p in sorted((root / "envbuild").rglob("*.py"))
              if not p.relative_to(root).as_posix().startswith(OUTSIDE)]
    return files


def _strings(node: ast.AST | None) -> frozenset[str] | None:
    """The strings of a literal tuple/list/set (or frozenset/set/tuple call of one), else None."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in {"frozenset", "set", "tuple"} \
            and len(node.args) == 1:
        node = node.args[0]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and node.elts \
            and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
        return frozenset(typing.cast(ast.Constant, e).value for e in node.elts)
    return None


def _is_steps_name(name: str) -> bool:
    return name == "steps" or name.endswith("_steps")


COLLECTIONS = frozenset({"list", "Sequence", "Iterable", "Iterator", "tuple", "set", "frozenset"})


def _annotation(node: ast.AST | None) -> str | None:
    """``"step"`` for an annotation naming ``Step`` or a step params model (``Step | None``,
    ``"GitSourceParams"``), ``"steps"`` for a collection of one (``list[Step]``), else None."""
    if node is None:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            node = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return None
    if isinstance(node, ast.Subscript) and isinstance(node.value, (ast.Name, ast.Attribute)) \
            and (node.value.id if isinstance(node.value, ast.Name) else node.value.attr) in COLLECTIONS:
        return "steps" if _annotation(node.slice) else None
    if isinstance(node, ast.BinOp):  # a union: X | None
        return _annotation(node.left) or _annotation(node.right)
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id in STEP_TYPES or isinstance(sub, ast.Attribute) and sub.attr in STEP_TYPES:
            return "step"
    return None


class _Scan(ast.NodeVisitor):
    """Walks one module; ``found`` holds ``(line, text)`` of each comparison it flags."""

    def __init__(self, tree: ast.Module):
        self.found: list[tuple[int, str]] = []
        # per scope, innermost last: the names that hold a plan step ("step") or steps ("steps")
        self.scopes: list[dict[str, str]] = [{}]
        self.constants: dict[str, frozenset[str]] = {}
        for stmt in tree.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                strings = _strings(stmt.value)
                if strings is not None:
                    self.constants[stmt.targets[0].id] = strings

    # --- what is a step, what is a collection of steps ---------------------------------

    def what(self, node: ast.AST) -> str | None:
        """``"step"``, ``"steps"`` or None: what ``node`` holds."""
        return "step" if self.is_step(node) else "steps" if self.is_steps(node) else None

    def is_step(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Name):
            return self.scopes[-1].get(node.id) == "step"
        if isinstance(node, ast.Attribute) and node.attr == "params":
            return self.is_step(node.value)
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value == "params":
            return self.is_step(node.value)
        if isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Slice):
            return self.is_steps(node.value)
        if isinstance(node, ast.IfExp):
            return self.is_step(node.body) or self.is_step(node.orelse)
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Attribute) and node.func.attr == "step":
                return True
            if isinstance(node.func, ast.Name) and node.func.id == "next" and node.args \
                    and isinstance(node.args[0], ast.GeneratorExp):
                return self._comp_yields_steps(node.args[0])
        return False

    def is_steps(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Name):
            return _is_steps_name(node.id) or self.scopes[-1].get(node.id) == "steps"
        if isinstance(node, ast.Attribute):
            return _is_steps_name(node.attr)
        if isinstance(node, ast.Subscript):
            if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                return _is_steps_name(node.slice.value)
            return isinstance(node.slice, ast.Slice) and self.is_steps(node.value)
        if isinstance(node, ast.IfExp):
            return self.is_steps(node.body) or self.is_steps(node.orelse)
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if _is_steps_name(name):
                return True
            return name in WRAPPERS and any(self.is_steps(a) for a in node.args)
        if isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
            return self._comp_yields_steps(node)
        return False

    def _comp_yields_steps(self, node: ast.ListComp | ast.GeneratorExp | ast.SetComp) -> bool:
        return self._of_items(node, self.is_step)

    def _of_items(self, node: ast.ListComp | ast.GeneratorExp | ast.SetComp, test) -> bool:
        """``test`` of a comprehension's item, in the comprehension's scope."""
        self.scopes.append(dict(self.scopes[-1]))
        try:
            for gen in node.generators:
                self._bind(gen.target, "step" if self.is_steps(gen.iter) else None)
            return test(node.elt)
        finally:
            self.scopes.pop()

    def _bind(self, target: ast.AST, what: str | None) -> None:
        """Bind the names of an assignment's or a loop's target (not those inside a subscript or
        an attribute it assigns)."""
        if isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self._bind(elt, what)
        elif isinstance(target, ast.Starred):
            self._bind(target.value, None)
        elif isinstance(target, ast.Name):
            if what is None:
                self.scopes[-1].pop(target.id, None)
            else:
                self.scopes[-1][target.id] = what

    # --- scopes and bindings ----------------------------------------------------------------

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        self.scopes.append({})
        args = node.args
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
            if arg is None:
                continue
            what = _annotation(arg.annotation) or ("step" if arg.annotation is None and arg.arg == "step" else None)
            if what:
                self.scopes[-1][arg.arg] = what
        self.generic_visit(node)
        self.scopes.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def _comprehension(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp) -> None:
        self.scopes.append(dict(self.scopes[-1]))
        for gen in node.generators:
            self.visit(gen.iter)
            self._bind(gen.target, "step" if self.is_steps(gen.iter) else None)
            for cond in gen.ifs:
                self.visit(cond)
        for part in (node.key, node.value) if isinstance(node, ast.DictComp) else (node.elt,):
            self.visit(part)
        self.scopes.pop()

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = _comprehension

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        self.visit(node.iter)
        self._bind(node.target, "step" if self.is_steps(node.iter) else None)
        for stmt in [*node.body, *node.orelse]:
            self.visit(stmt)

    visit_AsyncFor = visit_For

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        what = self.what(node.value)
        for target in node.targets:
            self._bind(target, what)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
        self._bind(node.target, _annotation(node.annotation) or (self.what(node.value) if node.value else None))

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        self._bind(node.target, self.what(node.value))

    # --- the comparison ---------------------------------------------------------------------

    def step_kind(self, node: ast.AST) -> bool:
        """``<step>.kind``, ``<step>["kind"]`` or ``<step>.get("kind")``."""
        if isinstance(node, ast.Attribute) and node.attr == "kind":
            return self.is_step(node.value)
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value == "kind":
            return self.is_step(node.value)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value == "kind":
            return self.is_step(node.func.value)
        return False

    def kind_literals(self, node: ast.AST, op: ast.cmpop) -> frozenset[str]:
        """The step kinds among the literals ``node`` holds, compared by ``op``."""
        if isinstance(op, (ast.Eq, ast.NotEq, ast.Is, ast.IsNot)):
            strings = (frozenset({node.value}) if isinstance(node, ast.Constant) and isinstance(node.value, str)
                       else None)
        elif isinstance(op, (ast.In, ast.NotIn)):
            strings = (self.constants.get(node.id) if isinstance(node, ast.Name) else _strings(node))
        else:
            strings = None
        return (strings or frozenset()) & STEP_KINDS

    def kinds_of_steps(self, node: ast.AST) -> bool:
        """A comprehension of step kinds: ``[s.kind for s in plan.steps]``."""
        return isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.SetComp)) and self._of_items(node, self.step_kind)

    def visit_Compare(self, node: ast.Compare) -> None:
        operands = [node.left, *node.comparators]
        for left, op, right in zip(operands, node.ops, operands[1:]):
            kinds = (self.kind_literals(right, op) if self.step_kind(left)
                     else self.kind_literals(left, op) if self.step_kind(right) else frozenset())
            if isinstance(op, (ast.In, ast.NotIn)) and isinstance(left, ast.Constant) and self.kinds_of_steps(right):
                kinds = frozenset({left.value}) & STEP_KINDS  # "image_import" in [s.kind for s in plan.steps]
            if kinds:
                self.found.append((node.lineno, ast.unparse(node)))
        self.generic_visit(node)


def kind_string_comparisons(paths: list[Path], root: Path = ROOT) -> list[str]:
    """``file:line: source`` of every comparison of a plan step's kind with a step-kind literal."""
    out = []
    for path in paths:
        tree = ast.parse(path.read_text(), str(path))
        scan = _Scan(tree)
        scan.visit(tree)
        rel = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
        out += [f"{rel}:{line}: {text}" for line, text in scan.found]
    return out


def test_the_plan_is_queried_by_its_accessors_not_by_kind_strings():
    found = kind_string_comparisons(scanned_files())
    assert not found, ("a plan step's kind compared with a string outside envbuild/plan/ and envbuild/actions/; "
                       "ask the Plan (envbuild/plan/model.py: sources(), env_file(), pip_installs()...) or test "
                       "isinstance(step.params, XParams):\n" + "\n".join(found))


SAMPLE = """\
from envbuild.plan.model import Step

PIP = ("pip_install", "pip_tooling")


def flagged(plan, data, step: Step, other):
    a = [s for s in plan.steps if s.kind == "apex_build"]
    b = [s for s in data["steps"] if s["kind"] in ("patch", "data")]
    c = step.params.kind == "env_file"
    d = "image_import" not in [s.kind for s in plan.steps]
    for i, s in enumerate(plan.steps):
        e = s.kind in PIP
    f = plan.steps[0].kind != "preflight"
    for st in plan.steps:
        p = st.params
        g = p.kind == "git_source"
    h = next(s for s in plan.steps if s.params.name == "x").kind == "build"
    j = [t for t, _ in run_time_steps(other) if t.kind == "data"]
    k = [s for s in data["steps"] if s["params"].get("kind") == "pip_install"]


def unflagged_step(step):
    return step.kind == "image"


def not_steps(manifest, experiments, recipe, order, check, plan, kind):
    a = [f for f in manifest.files if f.kind == "data"]
    b = sum(e.kind != "smoke" for e in experiments)
    c = recipe.environment.kind == "container"
    d = [s for s in order.steps if s.kind == "forward"]
    verdict = check(plan)
    e = verdict.kind == "preflight"
    f = [s for s in plan.steps if s.kind == kind]
    g = [s for s in plan.steps if s.kind == "not-a-step-kind"]
    for s in plan.steps:
        s = s.params.image
        h = s.kind == "image"
"""


def test_the_scan_names_kind_strings_on_plan_steps_and_nothing_else(tmp_path):
    """The check itself: each way of reading a step's kind in ``SAMPLE`` is named with its line;
    a ``kind`` of something else (a bundle file's "data", an experiment's "smoke", a check's
    "preflight"), a kind compared with a variable and a word that is no step kind are not."""
    (tmp_path / "m.py").write_text(SAMPLE)
    found = kind_string_comparisons([tmp_path / "m.py"], tmp_path)
    lines = SAMPLE.splitlines()
    named = [lines[int(f.split(":")[1]) - 1].strip().split(" = ")[0] for f in found]
    assert named == list("abcdefghjk") + ["return step.kind == 'image'".replace("'", '"')], found
    assert found[0] == "m.py:7: s.kind == 'apex_build'"


def test_the_step_kinds_are_the_plans_own():
    """The words the scan looks for are ``StepKind``'s, and each is the ``kind`` of one params model."""
    models = {m.model_fields["kind"].default for m in vars(plan_params).values()
              if isinstance(m, type) and issubclass(m, BaseModel) and "kind" in m.model_fields}
    assert STEP_KINDS and STEP_KINDS == models


# --- the accessors answer what a filter on the kind would -----------------------------------

LISTS = {Plan.requirement_installs: (PipToolingParams, PipInstallParams), Plan.pip_installs: (PipInstallParams,),
         Plan.sources: (GitSourceParams,), Plan.patches: (PatchParams,), Plan.builds: (BuildParams,),
         Plan.apex_builds: (ApexBuildParams,), Plan.downloads: (DataParams,)}
ONES = {Plan.environment: EnvironmentParams, Plan.env_file: EnvFileParams, Plan.import_check: ImportCheckParams,
        Plan.smoke: SmokeParams, Plan.image: ImageParams, Plan.image_import: ImageImportParams,
        Plan.image_smoke: ImageSmokeParams}


def _kind(model: type[BaseModel]) -> str:
    return model.model_fields["kind"].default


def _plans() -> list[Plan]:
    """The golden plans, a container node's plan (Slurm with enroot) and the image plan inside it."""
    plans = [Plan.model_validate_json(p.read_text()) for p in sorted((ROOT / "tests" / "golden" / "plans").glob("*.json"))]
    rec, tgt = load_recipe("megatron-deepspeed-slurm"), load_target("slurm")
    facts = profile_facts(tgt).model_copy(update={"container_engines": {"podman": "4.9.3", "enroot": "3.5.0"},
                                                  "home": "/home/u", "host": "n1"})
    node = resolve(rec, tgt, facts, find_lock(rec, tgt), PlanOptions(backend=default_backend(rec, None), host="n1")).plan
    image = node.image()
    assert image is not None
    return [*plans, node, image.params.image.plan]


def test_each_accessor_returns_the_steps_of_its_kind_in_plan_order():
    plans = _plans()
    seen: set[str] = set()
    for plan in plans:
        for accessor, models in LISTS.items():
            kinds = {_kind(m) for m in models}
            assert accessor(plan) == [s for s in plan.steps if s.kind in kinds], (plan.recipe, accessor.__name__)
        for one, model in ONES.items():
            assert one(plan) == next((s for s in plan.steps if s.kind == _kind(model)), None), one.__name__
            seen |= {one.__name__} if one(plan) is not None else set()
        first = plan.steps[0] if plan.steps else None
        assert plan.preflight() == (first if first is not None and first.kind == _kind(PreflightParams) else None)
        assert plan.unverified() == sorted({n for s in plan.requirement_installs() for n in s.params.unverified})
        for source in plan.sources():
            assert plan.source(source.params.name) is source
    assert seen == {one.__name__ for one in ONES}, "each singular accessor found its step in some plan"
    with pytest.raises(KeyError, match="no source 'nothing-of-that-name'"):
        plans[0].source("nothing-of-that-name")
