"""The facts flow: what is really on the nodes, gathered by one shell command per node.

``facts(FactsRequest(...)) -> FactsOutcome``: the nodes chosen by one ``NodeSelection``
(``envbuild.connect.selection``: ``hosts`` or ``inventory`` with the SSH key, user, port and
known_hosts files; none, ``local`` or a ``local`` host: this machine), their facts gathered in
parallel (``envbuild.facts.gather``; an unreachable host, or one whose host key is unknown or
changed, yields its error instead), the JSON text made (one object for one host asked, a list
otherwise) and written to ``output`` when given. The caller shows the facts, then ends with
``failure()``: the hosts that could not be gathered (EnvironmentProblem, exit 3).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from envbuild.errors import EnvironmentProblem, InputError
from envbuild.facts.model import NodeFacts
from envbuild.flows.nodes import NodesRequest


@dataclass(frozen=True)
class FactsRequest:
    """How to reach the nodes (``reach``: ``local``, ``hosts`` ``[user@]host[:port],...`` or
    ``inventory``; the SSH key, ``user`` and ``port`` the defaults, ``known_hosts`` files,
    ``insecure``), ``python`` the interpreter whose packages and torch NCCL to record,
    ``connect_timeout`` in seconds, ``output`` the file to write the JSON to."""

    reach: NodesRequest = NodesRequest()
    python: str | None = None
    connect_timeout: int = 10
    output: str | None = None


@dataclass(frozen=True)
class FactsOutcome:
    """The facts gathered (in the order asked), the hosts' errors, how many hosts were asked
    and whether the JSON is a list; ``text`` the JSON (None when no host was gathered),
    ``columns`` and ``rows`` the summary table (``envbuild.facts.summary``)."""

    facts: list[NodeFacts]
    errors: list[EnvironmentProblem]
    asked: int
    as_list: bool
    text: str | None = None
    columns: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)

    def failure(self) -> EnvironmentProblem | None:
        """The error the command ends with once the facts are shown: a single host's own, or
        how many hosts failed with the last one's message and hint."""
        if len(self.errors) == 1:
            return self.errors[0]
        if not self.errors:
            return None
        last = self.errors[-1]
        return EnvironmentProblem(f"{len(self.errors)} of {self.asked} hosts could not be gathered; last: {last}",
                                  hint=last.hint)


def facts(request: FactsRequest) -> FactsOutcome:
    """Gather, and with ``output`` write (see the module docstring). InputError for more than one
    of local, hosts and inventory, or a bad host list, inventory or key."""
    from envbuild.facts.gather import gather_hosts, gather_local
    from envbuild.facts.load import dump_facts
    from envbuild.facts.summary import COLUMNS, summary_row
    from envbuild.fsio import write_atomic

    reach = request.reach
    if sum(bool(x) for x in (reach.local, reach.hosts, reach.inventory)) > 1:
        # facts' own message (NodeSelection refuses the same in the words of the other commands;
        # this one is older and its tests and docs quote it)
        raise InputError("choose one of --local, --hosts, --inventory", hint="envbuild facts --help")
    selection = reach.selection(port_names=True)
    if selection.given and not selection.is_controller:
        specs = selection.nodes()
        results = gather_hosts(specs, python=request.python, connect_timeout=request.connect_timeout)
        asked, as_list = len(specs), len(specs) > 1
    else:
        results = [gather_local(python=request.python)]
        asked, as_list = 1, False
    found = [r for r in results if isinstance(r, NodeFacts)]
    errors = [r for r in results if isinstance(r, EnvironmentProblem)]
    text = dump_facts(found, as_list=as_list) if found else None
    if text is not None and request.output:
        write_atomic(request.output, text)
    return FactsOutcome(facts=found, errors=errors, asked=asked, as_list=as_list, text=text, columns=list(COLUMNS),
                        rows=[summary_row(f) for f in found])
