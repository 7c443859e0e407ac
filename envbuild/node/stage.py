"""Where a node's copy of a fleet's archive came from (``provision --fanout``), and why.

The role's task file ``stage_tree.yml`` tries to take the copy from the node's holder (the node
above it in the tree, ``envbuild/provision/stagetree.py``) and registers what each try found;
``where_from`` reads those registered results and says, as a typed record, where the copy
this node holds now came from: ``kept`` (its checked copy of an earlier run), ``holder`` (its
holder sent it, and its sha256 matched) or ``controller`` (the role then copies it from the
controller), with the reason. Pure: it reads its arguments and nothing else. Ansible's
``envbuild_stage`` module returns it as the result field ``stage``, which envbuild's event
tracker reads (``envbuild.execute.events``); ``describe`` is the text run.json's ``fleet_from``
shows.

Standard library only, the package's floor (see ``__init__.py``).
"""
import base64
import binascii
from collections import namedtuple

#: ``source``: "kept", "holder" or "controller"; ``holder``: the node above this one in the
#: tree ("" for none: the root, or a node its holder may not serve); ``why``: why the copy did
#: not come from the holder ("" when it did)
Stage = namedtuple("Stage", ["source", "holder", "why"])
SOURCES = ("kept", "holder", "controller")

KEPT_WHY = "its checked copy of an earlier run"
WHY_LENGTH = 300  # a reason's length, as Jinja's ``truncate(300)`` kept it (5 characters of leeway)
NONE_SERVED = "none"  # what a holder's <keep>.ok says when it has no checked copy (tasks/main.yml)
#: ``where_from``'s arguments: the options of Ansible's ``envbuild_stage`` module
WHERE_FROM_ARGS = ("sha256", "holder", "holder_in_play", "why_controller", "kept", "waited", "served", "sent",
                   "held")


def truncate(text, length=WHY_LENGTH, leeway=5, end="..."):
    """``text`` shortened at a word's end to ``length`` characters, ``end`` included, once it is
    longer than ``length + leeway``: Jinja's ``truncate`` filter with its default policy.

    >>> truncate("one two three", length=9, leeway=0)
    'one...'
    """
    if len(text) <= length + leeway:
        return text
    return text[:length - len(end)].rsplit(" ", 1)[0] + end


def _text(result, key):
    """A registered result's text field, stripped; "" when absent (a skipped task has none)."""
    value = (result or {}).get(key)
    return value.strip() if isinstance(value, str) else ""


def _checksum(stat_result):
    """The sha256 of a registered ``stat`` result ("" for no file, or a skipped task)."""
    stat = (stat_result or {}).get("stat")
    value = stat.get("checksum") if isinstance(stat, dict) else None
    return value if isinstance(value, str) else ""


def _served(slurp_result):
    """What a registered ``slurp`` of the holder's <keep>.ok read, decoded and stripped; None
    when it read nothing (skipped, failed, out of reach)."""
    content = (slurp_result or {}).get("content")
    if not isinstance(content, str):
        return None
    try:
        return base64.b64decode(content, validate=True).decode("utf-8", "replace").strip()
    except (binascii.Error, ValueError):
        return None


def _missing(sha256, holder_in_play, waited, served):
    """Why no copy came when no task said why (no scp stderr, no message)."""
    if "state" in (waited or {}):  # only a wait that saw the holder's copy settle returns a state
        said = _served(served)
        if said == NONE_SERVED:
            return "it has no checked copy to give"
        if said and said != sha256:
            return "it served another sha256 (%s)" % said
        return "no copy with the sha256 came from it"
    if not holder_in_play:
        return "not in the play"
    return "its copy did not come"


def where_from(sha256, holder="", holder_in_play=False, why_controller="", kept=None, waited=None,
               served=None, sent=None, held=None):
    """Where this node's copy of the archive (sha256 ``sha256``) came from, as a ``Stage``.

    ``holder``, ``holder_in_play`` and ``why_controller`` (why the tree gives this node no
    holder to take it from; "" when it has one) come from the node's ``provision_stage``;
    ``kept``, ``waited``, ``served``, ``sent`` and ``held`` are the registered results of the
    role's tasks (a ``stat`` of the kept copy before, the ``wait_for`` of the holder's
    <keep>.ok, its ``slurp``, the holder's ``scp``, a ``stat`` of the copy after), each ``{}``
    or a skipped task's result when it did not run. The first that holds:

    1. the kept copy has the sha256: ``kept``;
    2. the holder's scp exited 0 and the copy held now has the sha256: ``holder``;
    3. ``controller``, ``why``: ``why_controller``, else "<holder>: " and the first of the
       scp's stderr, the wait's message (a timeout, the holder out of reach), the slurp's
       message, else what was missing (the holder settled with no copy, another sha256 or none
       came; the holder is not in the play; its copy did not come), cut to ``WHY_LENGTH``.

    >>> where_from("ab", holder="n1", kept={"stat": {"exists": True, "checksum": "ab"}})
    Stage(source='kept', holder='n1', why='its checked copy of an earlier run')
    """
    if not isinstance(sha256, str) or not sha256:
        raise ValueError("sha256: the archive's sha256 is needed, got %r" % (sha256,))
    holder = holder or ""
    if _checksum(kept) == sha256:
        return Stage("kept", holder, KEPT_WHY)
    if holder and (sent or {}).get("rc") == 0 and _checksum(held) == sha256:
        return Stage("holder", holder, "")
    if why_controller:
        return Stage("controller", holder, why_controller)
    reason = (_text(sent, "stderr") or _text(waited, "msg") or _text(served, "msg")
              or _missing(sha256, holder_in_play, waited, served))
    return Stage("controller", holder, "%s: %s" % (holder, truncate(reason)))


def describe(stage):
    """The text run.json's ``fleet_from`` shows: the holder's name, ``kept (why)`` or
    ``controller (why)``. ``stage``: a ``Stage`` or its fields as a dict (a module's result).

    >>> describe({"source": "holder", "holder": "n1", "why": ""})
    'n1'
    """
    fields = stage._asdict() if isinstance(stage, Stage) else dict(stage)
    if fields.get("source") not in SOURCES:
        raise ValueError("stage: source %r is none of %s" % (fields.get("source"), ", ".join(SOURCES)))
    if fields["source"] == "holder":
        return str(fields.get("holder") or "")
    return "%s (%s)" % (fields["source"], fields.get("why") or "")
