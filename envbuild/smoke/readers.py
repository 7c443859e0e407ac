"""A benchmark's log reader, whichever kind the recipe names (``benchmark.parser``).

``reader(bench)`` gives one object the judge asks everything of: the metrics over the window
(``measure``), how the run ended (``completion``), the judged run and how many runs the file
holds (``last_run``), the GPU count and model the run prints (``gpus``), and which rule read
which line (``explain``). Three kinds:

* a built-in reader (``envbuild.smoke.native``, ``completion``, ``logfacts``);
* ``declared``: the rules in the recipe's ``benchmark.log`` (``envbuild.smoke.declared``);
* a plugin: an object an installed package registers under the entry-point group
  ``envbuild.parsers`` (``Plugin`` says what it must offer). envbuild is never edited for it.
"""

from __future__ import annotations

import inspect
from importlib.metadata import entry_points
from typing import Any

from envbuild.errors import InputError
from envbuild.recipes import logspec
from envbuild.recipes.schema import Benchmark
from envbuild.smoke import completion as completion_rules
from envbuild.smoke import declared, logfacts, native
from envbuild.smoke.completion import Completion


class Builtin:
    """One of envbuild's own readers, by name."""

    def __init__(self, name: str):
        self.name = name
        self.fn = native.NATIVE_PARSERS[name]

    def default_warmup(self) -> int | None:
        params = inspect.signature(self.fn).parameters
        return params["warmup"].default if "warmup" in params else 0

    def measure(self, text: str, warmup: int | None) -> dict[str, Any]:
        params = inspect.signature(self.fn).parameters
        opts = {"warmup": warmup} if warmup is not None and "warmup" in params else {}
        return native.parse(self.name, text, **opts)

    def completion(self, text: str, **kw: Any) -> Completion:
        return completion_rules.completion(self.name, text, **kw)

    def last_run(self, text: str) -> tuple[str, int]:
        return native.last_run(self.name, text)

    def printed(self, run: str) -> logfacts.LogGpus | None:
        return logfacts.log_gpus(self.name, run)

    def explain(self, text: str) -> list[dict[str, Any]]:
        """The judged run's lines the built-in reader reads (its metric and start lines; the
        completion rules are named in the verdict's sources)."""
        run, _ = self.last_run(text)
        rows = _BUILTIN_LINES.get(self.name, ())
        hits = []
        for number, line in enumerate(run.splitlines(), start=1):
            cut = line[:logspec.MAX_LINE]
            for rule, rx in rows:
                if rx.search(cut):
                    hits.append({"line": number, "rule": f"{self.name}.{rule}", "read": "matched", "text": cut[:200]})
        return hits


_MEGATRON = (("arguments", native.MEGATRON_START_RE), ("iteration", native.ITER_RE))
_BUILTIN_LINES = {
    "megatron-pretrain": _MEGATRON,
    "megatron-deepspeed": _MEGATRON + (("deepspeed-timer", native.DS_TIMER_RE),),
    "megatronapp": _MEGATRON + (("trace", native.TRACE_RE),),
    "opt-baselines": (("config", native.METASEQ_START_RE), ("progress", native.METASEQ_RE)),
    "alpa-benchmark": (("launch", native.ALPA_START_RE), ("result", native.ALPA_PRINTED_RE)),
    "envbuild-smoke": (("record", native.SMOKE_RECORD_RE),),
}


class Declared:
    """The rules of the recipe's ``benchmark.log``."""

    name = logspec.DECLARED

    def __init__(self, spec: logspec.LogSpec):
        self.spec = spec

    def default_warmup(self) -> int | None:
        return 1

    def measure(self, text: str, warmup: int | None) -> dict[str, Any]:
        return declared.measure(self.spec, native.strip_task_labels(text), warmup)

    def completion(self, text: str, **kw: Any) -> Completion:
        return declared.completion(self.spec, native.strip_task_labels(text), **kw)

    def last_run(self, text: str) -> tuple[str, int]:
        return declared.last_run(self.spec, native.strip_task_labels(text))

    def printed(self, run: str) -> logfacts.LogGpus | None:
        count, model, line = declared.gpus(self.spec, run)
        if count is None or self.spec.gpus is None:
            return None
        return logfacts.LogGpus(count=count, model=model, line=line or "", said=line or "",
                                source=self.spec.gpus.source)

    def explain(self, text: str) -> list[dict[str, Any]]:
        return [h.to_dict() for h in declared.explain(self.spec, native.strip_task_labels(text))]


class Plugin:
    """A reader an installed package registers under ``envbuild.parsers``: an object (or module)
    with ``parse(text, *, warmup) -> dict`` of metrics (``values`` and ``window`` as the built-in
    readers give them, where it can) and ``completion(text, *, planned) -> (state, detail)``
    (state one of complete, stopped, diverged, error); optionally ``split_runs(text) -> [text]``
    and ``gpus(text) -> int | None``."""

    def __init__(self, name: str, obj: Any):
        missing = [m for m in ("parse", "completion") if not callable(getattr(obj, m, None))]
        if missing:
            raise InputError(f"the parser plugin {name!r} has no {' or '.join(missing)}()",
                             hint=f"a reader registered under {logspec.ENTRY_POINTS} offers parse(text, *, warmup) "
                                  "and completion(text, *, planned)")
        self.name, self.obj = name, obj

    def default_warmup(self) -> int | None:
        return 1

    def last_run(self, text: str) -> tuple[str, int]:
        split = getattr(self.obj, "split_runs", None)
        runs = list(split(native.strip_task_labels(text))) if callable(split) else [native.strip_task_labels(text)]
        return (runs[-1] if runs else ""), max(len(runs), 1)

    def measure(self, text: str, warmup: int | None) -> dict[str, Any]:
        run, runs = self.last_run(text)
        out = dict(self.obj.parse(run, warmup=1 if warmup is None else warmup))
        out["runs"] = runs
        return native.with_aliases(out)

    def completion(self, text: str, *, planned: int | None = None, rc: int | None = None,
                   job_state: str | None = None) -> Completion:
        run, runs = self.last_run(text)
        state, detail = self.obj.completion(run, planned=planned)
        if state not in ("complete", "stopped", "diverged", "error"):
            state, detail = "stopped", f"the plugin {self.name!r} answered {state!r}, not a known state"
        got = Completion(state, str(detail), planned, None, [f"plugin {self.name} ({logspec.ENTRY_POINTS})"], runs)
        if state != "diverged":
            if errors := completion_rules._errors(run):
                return Completion("error", "the output shows " + ", ".join(errors), planned, None, got.sources, runs)
            if why := completion_rules._scheduler(run, job_state, rc):
                return Completion("stopped", why, planned, None, got.sources, runs)
        return got

    def printed(self, run: str) -> logfacts.LogGpus | None:
        fn = getattr(self.obj, "gpus", None)
        count = fn(run) if callable(fn) else None
        if not isinstance(count, int) or count < 1:
            return None
        return logfacts.LogGpus(count=count, model=None, line="", said=f"{count} GPU(s)",
                                source=f"plugin {self.name}")

    def explain(self, text: str) -> list[dict[str, Any]]:
        return []


def _plugin(name: str) -> Plugin | None:
    found = [ep for ep in entry_points(group=logspec.ENTRY_POINTS) if ep.name == name]
    if not found:
        return None
    try:
        return Plugin(name, found[0].load())
    except InputError:
        raise
    except Exception as exc:  # a third party's import failed: say so, never a traceback
        raise InputError(f"the parser plugin {name!r} ({found[0].value}) could not be loaded: "
                         f"{type(exc).__name__}: {exc}", hint="reinstall the package that registers it") from None


def reader(bench: Benchmark) -> Builtin | Declared | Plugin:
    """The reader ``bench`` names (InputError, with the close names, for one that is unknown)."""
    if bench.parser == logspec.DECLARED and bench.log is not None:
        return Declared(bench.log)
    if bench.parser in native.NATIVE_PARSERS:
        return Builtin(bench.parser)
    plugin = _plugin(bench.parser)
    if plugin is None:
        raise InputError(logspec.unknown(bench.parser) or f"unknown parser {bench.parser!r}",
                         hint="envbuild show RECIPE names its benchmark's parser")
    return plugin
