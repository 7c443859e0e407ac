"""Which nodes a command works on, and how each is reached: one selection for facts, provision,
verify and launch.

A ``NodeSelection`` is what the user gave: ``--hosts``, ``--inventory`` or ``--local`` (at most
one), the SSH key (``-i``), the known_hosts files and ``--insecure``. ``nodes()`` turns it into
``Node`` models (``envbuild.connect.nodes``): the key fills every host that names none (an
inventory's own ``ansible_ssh_private_key_file`` wins), the known_hosts files are those given,
else ``$ENVBUILD_KNOWN_HOSTS``, else ssh's own, and host keys are checked unless ``insecure``
(``envbuild.connect.hostkeys``).

A ``NodeSelection`` is also what a run records (pydantic: run.json's ``selection``,
``envbuild.record.run.RunInfo``): a provision run records ``record()`` (the node source, the
key's path and the known_hosts paths, made absolute; never a key's contents), so that
``verify`` and ``launch --submit`` of that run reach the nodes the same way. The run record
validates it where run.json is read, and maps a run written before it was recorded once
(``envbuild.record.migrate.selection``). Example::

    >>> sel = NodeSelection(hosts="ops@10.0.0.5:2222", identity_file="/keys/id", known_hosts=("/kh",))
    >>> [(n.name, n.port, n.identity_file, n.known_hosts) for n in sel.nodes()]
    [('10.0.0.5', 2222, '/keys/id', ('/kh',))]
    >>> NodeSelection.model_validate(sel.record().model_dump(mode="json", by_alias=True)) == sel
    True
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from envbuild.connect.nodes import (Node, known_hosts_from_env, local_node, parse_hosts,
                                    read_inventory)
from envbuild.errors import InputError

SELECTION_SCHEMA = "envbuild.selection/1"


class NodeSelection(BaseModel):
    """How the nodes of one command are chosen and reached (see the module docstring).

    ``hosts`` is ``[user@]host[:port],...`` (``local``: the controller itself); ``inventory``
    an Ansible inventory file; ``local`` the controller. ``user`` and ``port`` fill what a
    ``--hosts`` entry leaves out; ``port_names`` names a node on another port than 22
    ``host:port`` (``envbuild facts``) instead of ``host`` (how facts names its nodes, never
    recorded). A field of another type, or one it does not hold, is refused (run.json names it).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, defer_build=True)

    schema_: str | None = Field(SELECTION_SCHEMA, alias="schema")
    hosts: str | None = None
    inventory: str | None = None
    local: bool = False
    identity_file: str | None = None
    known_hosts: tuple[str, ...] = ()
    insecure: bool = False
    user: str | None = None
    port: int | None = None
    port_names: bool = Field(False, exclude=True)

    @field_validator("inventory", "identity_file", mode="before")
    @classmethod
    def _path_text(cls, v: Any) -> Any:
        return os.fspath(v) if isinstance(v, os.PathLike) else v

    @field_validator("known_hosts", mode="before")
    @classmethod
    def _paths_text(cls, v: Any) -> Any:
        if v is None:
            return ()
        return [os.fspath(k) if isinstance(k, os.PathLike) else k for k in v] if isinstance(v, (list, tuple)) else v

    def model_post_init(self, context: Any, /) -> None:
        given = [flag for flag, on in (("--hosts", self.hosts), ("--inventory", self.inventory),
                                       ("--local", self.local)) if on]
        if len(given) > 1:
            raise InputError(f"give only one of --hosts, --inventory, --local (got {' and '.join(given)})",
                             hint="pick how to reach the nodes")

    @property
    def given(self) -> bool:
        """True when the selection names its nodes (hosts, inventory or local)."""
        return bool(self.hosts or self.inventory or self.local)

    @property
    def is_controller(self) -> bool:
        """True when the only node is this machine (``--local`` or ``--hosts local``)."""
        return self.local or (self.hosts or "").strip() == "local"

    def nodes(self, *, default_local: bool = False, needs: str = "nodes") -> list[Node]:
        """The nodes; with none given, the controller when ``default_local`` (a local target),
        else an InputError saying ``needs``."""
        if self.is_controller or (not self.given and default_local):
            return [local_node()]
        how: dict[str, Any] = dict(user=self.user, port=self.port, insecure=self.insecure,
                                   known_hosts=self.known_hosts or None)
        if self.hosts:
            found = parse_hosts(self.hosts, identity_file=self.identity_file, **how)
            if self.port_names:
                found = [replace(n, name=label(n)) for n in found]
            return found
        if self.inventory:
            return read_inventory(self.inventory, identity_file=self.identity_file, **how)
        raise InputError(f"no nodes given: {needs}",
                         hint="pass --hosts user@h1,h2, --inventory FILE or --local")

    def over(self, recorded: NodeSelection | None) -> NodeSelection:
        """This selection where it says something, ``recorded`` (a run's) where it does not:
        the run's nodes unless hosts, an inventory or --local are given, and the run's key
        and known_hosts files unless others are given."""
        if recorded is None:
            return self
        source = self if self.given else recorded
        return recorded.model_copy(update=dict(
            hosts=source.hosts, inventory=source.inventory, local=source.local, user=source.user, port=source.port,
            identity_file=self.identity_file or recorded.identity_file,
            known_hosts=self.known_hosts or recorded.known_hosts, insecure=self.insecure or recorded.insecure))

    def record(self) -> NodeSelection:
        """What repeating this selection needs, for run.json: paths made absolute, the
        known_hosts files in effect ($ENVBUILD_KNOWN_HOSTS included); no key contents."""
        known = self.known_hosts or known_hosts_from_env()
        return NodeSelection(hosts=self.hosts, inventory=_absolute(self.inventory), local=self.local,
                             identity_file=_absolute(self.identity_file),
                             known_hosts=tuple(a for k in known if (a := _absolute(k))), insecure=self.insecure,
                             user=self.user, port=self.port)


def label(node: Node) -> str:
    """``host`` or ``host:port`` (port other than 22)."""
    return node.host if node.port in (None, 22) else f"{node.host}:{node.port}"


def _absolute(path: str | None) -> str | None:
    return os.path.abspath(os.path.expanduser(path)) if path else None
