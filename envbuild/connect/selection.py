"""Which nodes a command works on, and how each is reached: one selection for facts, provision,
verify and launch.

A ``NodeSelection`` is what the user gave: ``--hosts``, ``--inventory`` or ``--local`` (at most
one), the SSH key (``-i``), the known_hosts files and ``--insecure``. ``nodes()`` turns it into
``Node`` models (``envbuild.connect.nodes``): the key fills every host that names none (an
inventory's own ``ansible_ssh_private_key_file`` wins), the known_hosts files are those given,
else ``$ENVBUILD_KNOWN_HOSTS``, else ssh's own, and host keys are checked unless ``insecure``
(``envbuild.connect.hostkeys``).

A provision run records its selection (``record()``: the node source, the key's path and the
known_hosts paths, made absolute; never a key's contents) in ``run.json`` as ``selection``, so
that ``verify`` and ``launch --submit`` of that run reach the nodes the same way
(``for_run``). Example::

    >>> sel = NodeSelection(hosts="ops@10.0.0.5:2222", identity_file="/keys/id", known_hosts=("/kh",))
    >>> [(n.name, n.port, n.identity_file, n.known_hosts) for n in sel.nodes()]
    [('10.0.0.5', 2222, '/keys/id', ('/kh',))]
    >>> NodeSelection.from_record(sel.record()) == sel
    True
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any

from envbuild.connect.nodes import (Node, known_hosts_from_env, local_node, parse_hosts,
                                    read_inventory)
from envbuild.errors import InputError

SELECTION_SCHEMA = "envbuild.selection/1"


@dataclass(frozen=True)
class NodeSelection:
    """How the nodes of one command are chosen and reached (see the module docstring).

    ``hosts`` is ``[user@]host[:port],...`` (``local``: the controller itself); ``inventory``
    an Ansible inventory file; ``local`` the controller. ``user`` and ``port`` fill what a
    ``--hosts`` entry leaves out; ``port_names`` names a node on another port than 22
    ``host:port`` (``envbuild facts``) instead of ``host``.
    """

    hosts: str | None = None
    inventory: str | None = None
    local: bool = False
    identity_file: str | None = None
    known_hosts: tuple[str, ...] = ()
    insecure: bool = False
    user: str | None = None
    port: int | None = None
    port_names: bool = False

    def __post_init__(self) -> None:
        given = [flag for flag, on in (("--hosts", self.hosts), ("--inventory", self.inventory),
                                       ("--local", self.local)) if on]
        if len(given) > 1:
            raise InputError(f"give only one of --hosts, --inventory, --local (got {' and '.join(given)})",
                             hint="pick how to reach the nodes")
        object.__setattr__(self, "known_hosts", tuple(self.known_hosts or ()))

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
        return replace(recorded, hosts=source.hosts, inventory=source.inventory, local=source.local,
                       user=source.user, port=source.port,
                       identity_file=self.identity_file or recorded.identity_file,
                       known_hosts=self.known_hosts or recorded.known_hosts,
                       insecure=self.insecure or recorded.insecure)

    def record(self) -> dict[str, Any]:
        """What repeating this selection needs, for run.json: paths made absolute, the
        known_hosts files in effect ($ENVBUILD_KNOWN_HOSTS included); no key contents."""
        known = self.known_hosts or known_hosts_from_env()
        return {"schema": SELECTION_SCHEMA, "hosts": self.hosts,
                "inventory": _absolute(self.inventory), "local": self.local,
                "identity_file": _absolute(self.identity_file),
                "known_hosts": [_absolute(k) for k in known], "insecure": self.insecure,
                "user": self.user, "port": self.port}

    @classmethod
    def from_record(cls, data: dict) -> NodeSelection:
        """A selection written by ``record``; InputError naming the field when it is not one."""
        if not isinstance(data, dict):
            raise InputError(f"run.json: selection: expected an object, got {type(data).__name__}",
                             hint="the run directory is damaged; rerun `envbuild provision`")
        known = data.get("known_hosts") or []
        checks = (("hosts", (str, type(None))), ("inventory", (str, type(None))), ("local", bool),
                  ("identity_file", (str, type(None))), ("insecure", bool), ("user", (str, type(None))),
                  ("port", (int, type(None))))
        for key, kind in checks:
            if key in data and not isinstance(data[key], kind):
                raise InputError(f"run.json: selection.{key}: unexpected {type(data[key]).__name__} {data[key]!r}",
                                 hint="the run directory is damaged; rerun `envbuild provision`")
        if not isinstance(known, list) or not all(isinstance(k, str) for k in known):
            raise InputError("run.json: selection.known_hosts: expected a list of file names",
                             hint="the run directory is damaged; rerun `envbuild provision`")
        return cls(hosts=data.get("hosts"), inventory=data.get("inventory"), local=bool(data.get("local")),
                   identity_file=data.get("identity_file"), known_hosts=tuple(known),
                   insecure=bool(data.get("insecure")), user=data.get("user"), port=data.get("port"))

    @classmethod
    def for_run(cls, run: dict) -> NodeSelection | None:
        """The selection a run's ``run.json`` (a dict) recorded: its ``selection``; for a run
        written before it was recorded, its options (hosts, inventory, identity_file,
        known_hosts, insecure), else its hosts. None when the run names no node."""
        if isinstance(run.get("selection"), dict):
            return cls.from_record(run["selection"])
        opts: dict = run["options"] if isinstance(run.get("options"), dict) else {}
        hosts = opts.get("hosts") if isinstance(opts.get("hosts"), str) else None
        inventory = opts.get("inventory") if isinstance(opts.get("inventory"), str) else None
        recorded = [h for h in run.get("hosts") or [] if isinstance(h, str)]
        if not hosts and not inventory:
            if recorded == ["local"]:
                return cls(local=True)
            hosts = ",".join(recorded) or None
        if not hosts and not inventory:
            return None
        key = opts.get("identity_file") if isinstance(opts.get("identity_file"), str) else None
        known = [k for k in opts.get("known_hosts") or [] if isinstance(k, str)]
        return cls(hosts=hosts, inventory=inventory, identity_file=key, known_hosts=tuple(known),
                   insecure=opts.get("insecure") is True)


def label(node: Node) -> str:
    """``host`` or ``host:port`` (port other than 22)."""
    return node.host if node.port in (None, 22) else f"{node.host}:{node.port}"


def _absolute(path: str | None) -> str | None:
    return os.path.abspath(os.path.expanduser(path)) if path else None
