"""The typed requests of the flows mirror the option sets of the layers below them (the price of the
`cli-thin` contract): every field the lower layer has is filled from the request, with the request's
value, and every request field reaches it or the node selection. A field added to one side and not
carried over fails here."""

from __future__ import annotations

import dataclasses

from envbuild.connect.selection import NodeSelection
from envbuild.flows import provision
from envbuild.flows.nodes import NodesRequest
from envbuild.provision.options import ProvisionOptions


def _distinct(cls, skip=()):  # noqa: ANN001
    """A value for each field of the dataclass ``cls`` that is not its default, and differs per field."""
    out = {}
    for i, f in enumerate(dataclasses.fields(cls)):
        if f.name in skip:
            continue
        default = f.default if f.default is not dataclasses.MISSING else None
        if isinstance(default, bool):
            out[f.name] = not default
        elif f.name in ("port", "fanout"):
            out[f.name] = 1000 + i
        elif isinstance(default, tuple) or f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            out[f.name] = (f"{f.name}-value",)
        else:
            out[f.name] = f"{f.name}-value"
    return out


def _same(a, b) -> bool:  # noqa: ANN001
    return list(a) == list(b) if isinstance(a, (list, tuple)) else a == b


def test_every_provision_option_comes_from_the_request() -> None:
    reach = NodesRequest(**_distinct(NodesRequest))
    values = _distinct(provision.ProvisionRequest, skip=("reach",))
    request = provision.ProvisionRequest(reach=reach, **values)
    opts = provision.options(request)
    flat = {**values, **{f.name: getattr(reach, f.name) for f in dataclasses.fields(NodesRequest)}}
    for f in dataclasses.fields(ProvisionOptions):
        assert f.name in flat, f"ProvisionOptions.{f.name} has no field in ProvisionRequest or NodesRequest"
        assert _same(getattr(opts, f.name), flat[f.name]), f"ProvisionOptions.{f.name} is not the request's"
    # what the options do not hold is the node selection's (test below)
    assert set(flat) - {f.name for f in dataclasses.fields(ProvisionOptions)} == {"local", "user", "port"}


def test_the_nodes_request_is_the_selection_field_for_field() -> None:
    assert set(NodeSelection.model_fields) - {f.name for f in dataclasses.fields(NodesRequest)} == {
        "schema_", "port_names"}  # the record's schema and how facts names nodes: not options
    common = _distinct(NodesRequest, skip=("hosts", "inventory", "local"))
    for way in ({"hosts": "node1,node2"}, {"inventory": "inventory.yml"}, {"local": True}):  # one at a time
        reach = NodesRequest(**common, **way)
        selection = reach.selection()
        for f in dataclasses.fields(NodesRequest):
            assert _same(getattr(selection, f.name), getattr(reach, f.name)), f.name
