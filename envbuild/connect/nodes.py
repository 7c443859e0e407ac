"""The nodes envbuild works on, one model for facts, provision and verify.

A ``Node`` is read from ``--hosts`` (``parse_hosts``), from an Ansible inventory of any kind
Ansible reads (INI, YAML, JSON; ``read_inventory`` uses Ansible's own InventoryManager), or is
the controller itself (``local_node``). Every ``ansible_*`` variable of an inventory host is
kept (``ansible_vars``) and goes back to Ansible unchanged through ``connection_vars``; Fabric
reads the same node (``envbuild.connect.ssh``), host keys checked as ssh checks them
(``envbuild.connect.hostkeys``).

Example::

    >>> [(n.name, n.port) for n in parse_hosts("root@127.0.0.2:2201,127.0.0.3")]
    [('127.0.0.2', 2201), ('127.0.0.3', None)]
    >>> connection_vars(parse_hosts("ops@10.0.0.5:2222")[0])["ansible_port"]
    2222
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

from envbuild.errors import InputError
from envbuild.userfile import loads_json, read_text
from envbuild.yamlsrc import load_yaml

DEFAULT_NODE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
KNOWN_HOSTS_ENV = "ENVBUILD_KNOWN_HOSTS"  # known_hosts files (os.pathsep between several)
INSECURE_SSH_ARGS = "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"
HOSTS_HINT = "use --hosts user@host[:port],host2 (IPv6 as [addr]:port)"
_HOST_RE = re.compile(r"^(?:(?P<user>[^@\s-][^@\s]*)@)?(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<host>[A-Za-z0-9_.][A-Za-z0-9_.\-]*))"
                      r"(?::(?P<port>[^:]*))?$")

# host variables that are fields of Node (first name wins, as in Ansible)
_FIELDS = {
    "host": ("ansible_host", "ansible_ssh_host"),
    "user": ("ansible_user", "ansible_ssh_user"),
    "port": ("ansible_port", "ansible_ssh_port"),
    "connection": ("ansible_connection",),
    "python": ("ansible_python_interpreter",),
    "identity_file": ("ansible_ssh_private_key_file", "ansible_private_key_file"),
}
_FIELD_VARS = {v for names in _FIELDS.values() for v in names}
# variables Ansible adds by itself (magic variables), not part of a node's connection
_MAGIC = {"ansible_config_file", "ansible_facts", "ansible_playbook_python", "ansible_version",
          "ansible_check_mode", "ansible_diff_mode", "ansible_forks", "ansible_inventory_sources",
          "ansible_run_tags", "ansible_skip_tags", "ansible_verbosity", "ansible_local"}
_SSH_ARG_VARS = ("ansible_ssh_args", "ansible_ssh_common_args", "ansible_ssh_extra_args")


@dataclass(frozen=True)
class Node:
    """One node: how to reach it and which Python Ansible runs its modules with.

    ``ansible_vars`` holds every other ``ansible_*`` host variable of an inventory (become,
    ssh_common_args with ProxyJump, ...), templated by Ansible, carried verbatim to the
    rendered inventory. ``insecure`` is True when host keys are NOT checked for this node
    (``--insecure``, ``envbuild_insecure: true`` or ``StrictHostKeyChecking=no`` in its ssh
    args): a run records it. ``known_hosts`` are known_hosts files given explicitly
    (``--known-hosts`` / ``$ENVBUILD_KNOWN_HOSTS``); empty means ssh's defaults.
    """

    name: str  # inventory name, also the folder under runs/<id>/nodes/
    host: str = "localhost"
    user: str | None = None
    port: int | None = None
    connection: str = "ssh"  # ssh | local (| paramiko, smart: also over SSH)
    python: str | None = None  # interpreter for Ansible modules on the node
    identity_file: str | None = None
    insecure: bool = False  # host keys not checked (throwaway test nodes only)
    known_hosts: tuple[str, ...] = ()
    ansible_vars: dict = field(default_factory=dict, hash=False, repr=False)

    @property
    def is_local(self) -> bool:
        return self.connection == "local"

    @property
    def node_path(self) -> str:
        return os.environ.get("PATH", DEFAULT_NODE_PATH) if self.is_local else DEFAULT_NODE_PATH

    @property
    def target(self) -> str:
        """user@host for Fabric."""
        return f"{self.user}@{self.host}" if self.user else self.host

    @property
    def address(self) -> str:
        """host or [host]:port, as ssh and known_hosts name it."""
        return f"[{self.host}]:{self.port}" if self.port and self.port != 22 else self.host


def local_node() -> Node:
    """The controller itself, with connection=local and this Python for Ansible modules."""
    return Node(name="local", host="localhost", connection="local", python=sys.executable)


def known_hosts_from_env() -> tuple[str, ...]:
    """Files named by $ENVBUILD_KNOWN_HOSTS (os.pathsep between several), ~ expanded."""
    raw = os.environ.get(KNOWN_HOSTS_ENV, "")
    return tuple(os.path.expanduser(p) for p in raw.split(os.pathsep) if p.strip())


def _known_hosts(files) -> tuple[str, ...]:
    return tuple(os.path.expanduser(str(f)) for f in files) if files else known_hosts_from_env()


def parse_hosts(spec: str, *, user: str | None = None, port: int | None = None,
                identity_file: str | None = None, insecure: bool = False,
                known_hosts: tuple[str, ...] | list[str] | None = None) -> list[Node]:
    """``user@h1,h2:2222,[::1]:2022`` -> nodes; a user given once applies to the later hosts too.

    ``user`` and ``port`` fill what an entry leaves out; a port outside 1..65535 is an
    InputError. ``known_hosts`` defaults to $ENVBUILD_KNOWN_HOSTS.
    """
    kh = _known_hosts(known_hosts)
    if port is not None:
        port = validate_port(port, "--port")
    nodes: list[Node] = []
    for raw in [s.strip() for s in spec.split(",") if s.strip()]:
        m = _HOST_RE.match(raw)
        if not m:
            raise InputError(f"--hosts: cannot read {raw!r}", hint=HOSTS_HINT)
        user = m["user"] or user
        host = m["v6"] or m["host"]
        p = validate_port(m["port"], f"--hosts {raw}") if m["port"] is not None else port
        name = host if p is None or not any(n.host == host for n in nodes) else raw
        nodes.append(Node(name=name, host=host, user=user, port=p, identity_file=identity_file,
                          insecure=insecure, known_hosts=kh))
    if not nodes:
        raise InputError("--hosts is empty", hint=HOSTS_HINT)
    _unique(nodes)
    return nodes


def read_inventory(path: str | os.PathLike, *, user: str | None = None, port: int | None = None,
                   identity_file: str | None = None, insecure: bool = False,
                   known_hosts: tuple[str, ...] | list[str] | None = None, limit: str = "all") -> list[Node]:
    """Nodes of an Ansible inventory (INI, YAML or JSON), read by Ansible itself.

    group_vars/ and host_vars/ beside it count, values are templated as Ansible would
    (``ProxyJump={{ bastion }}`` becomes the bastion). ``user``, ``port`` and ``identity_file``
    fill what the inventory leaves out. A port outside 1..65535 is an InputError naming the
    host and the variable.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"inventory {path} does not exist", hint="pass an Ansible INI, YAML or JSON inventory file")
    _within_limits(path)
    kh = _known_hosts(known_hosts)
    nodes = []
    for name, hv in _ansible_hosts(path, limit):
        def first(key: str):
            return next((hv[v] for v in _FIELDS[key] if hv.get(v) not in (None, "")), None)  # noqa: B023 - used in this iteration

        where = f"{path}: host {name}"
        p = first("port")
        key = first("identity_file")
        nodes.append(Node(
            name=name, host=validate_ssh_name(validate_text(first("host") or name, f"{where}: ansible_host"),
                                              f"{where}: ansible_host"),
            user=validate_ssh_name(validate_text(first("user"), f"{where}: ansible_user"), f"{where}: ansible_user")
            if first("user") is not None else user,
            port=validate_port(p, f"{where}: ansible_port") if p is not None else port,
            connection=str(first("connection") or "ssh"),
            python=str(first("python")) if first("python") is not None else None,
            identity_file=os.path.expanduser(str(key)) if key else identity_file,
            insecure=(insecure or _truthy(hv.get("envbuild_insecure"))
                      or _ssh_option(hv, "stricthostkeychecking") in ("no", "off")),
            known_hosts=kh,
            ansible_vars={k: v for k, v in hv.items() if k.startswith("ansible_") and k not in _FIELD_VARS | _MAGIC},
        ))
    _unique(nodes)
    return nodes


load_inventory = read_inventory  # the name provision.py knows


def _within_limits(path: Path) -> None:
    """Refuse, before Ansible parses it, an inventory envbuild's readers would refuse: too big,
    not UTF-8 text, or nested past ``MAX_DEPTH`` (Ansible's parsers recurse until the
    interpreter's C stack overflows: a segmentation fault, not an error)."""
    text = read_text(path, "inventory", hint="pass an Ansible INI, YAML or JSON inventory file")
    if text.lstrip().startswith("{"):  # a JSON inventory
        loads_json(text, path, "JSON inventory")
        return
    try:
        load_yaml(path, text)
    except InputError as exc:
        if "nested more than" in exc.message or "aliases" in exc.message:
            raise
        # not YAML: an INI inventory, which cannot nest; Ansible reads it


def connection_vars(node: Node) -> dict:
    """Exactly the Ansible host variables of the node's connection (pure).

    The carried ``ansible_vars`` first, then ansible_host/user/port/ssh_private_key_file/
    connection/python_interpreter from the node's fields, and ``ansible_ssh_common_args``
    led by the host-key options envbuild decided (insecure: no checking; explicit known_hosts
    files: ``UserKnownHostsFile``), so that ssh, which keeps the first value of an option,
    checks host keys exactly as Fabric did.
    """
    hv: dict = dict(node.ansible_vars)
    hv["ansible_connection"] = node.connection
    if node.python:
        hv["ansible_python_interpreter"] = node.python
    if node.is_local:
        return hv
    hv["ansible_host"] = node.host
    if node.user:
        hv["ansible_user"] = node.user
    if node.port:
        hv["ansible_port"] = node.port
    if node.identity_file:
        hv["ansible_ssh_private_key_file"] = node.identity_file
    lead = []
    if node.insecure:
        lead.append(INSECURE_SSH_ARGS)
    elif node.known_hosts:
        files = " ".join(f'"{f}"' if any(c.isspace() for c in f) else f for f in node.known_hosts)
        lead.append("-o " + shlex.quote("UserKnownHostsFile=" + files))
    if lead:
        hv["ansible_ssh_common_args"] = " ".join([*lead, str(hv.get("ansible_ssh_common_args") or "")]).strip()
    return hv


def ssh_options(node: Node) -> dict[str, str]:
    """``-o Key=Value`` (and ``-J``) options in the node's ssh args, lower-case keys, the
    first value of each (ssh's rule): what ssh would take from ansible_ssh_*_args."""
    return _ssh_options(node.ansible_vars)


def _ssh_option(hv: dict, key: str) -> str | None:
    value = _ssh_options(hv).get(key)
    return value.lower() if value else None


def _ssh_options(hv: dict) -> dict[str, str]:
    out: dict[str, str] = {}
    for var in _SSH_ARG_VARS:
        try:
            words = shlex.split(str(hv.get(var) or ""))
        except ValueError:
            continue
        for i, w in enumerate(words):
            if w.startswith("-o") and (len(w) > 2 or i + 1 < len(words)):
                opt = w[2:] if len(w) > 2 else words[i + 1]
                key, sep, value = opt.partition("=")
                if not sep:
                    key, _, value = opt.strip().partition(" ")
                out.setdefault(key.strip().lower(), value.strip())
            elif w == "-J" and i + 1 < len(words):
                out.setdefault("proxyjump", words[i + 1])
    return out


def _truthy(value) -> bool:
    return value is True or str(value).strip().lower() in ("1", "true", "yes", "on")


def _ansible_hosts(path: Path, limit: str) -> list[tuple[str, dict]]:
    """(name, templated host variables) of each host, read by Ansible's InventoryManager."""
    os.environ.setdefault("ANSIBLE_INVENTORY_UNPARSED_FAILED", "True")
    os.environ.setdefault("ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED", "True")
    from ansible.errors import AnsibleError
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar
    from ansible.vars.manager import VariableManager

    noise = io.StringIO()
    try:
        with contextlib.redirect_stderr(noise), contextlib.redirect_stdout(noise):
            loader = DataLoader()
            inventory = InventoryManager(loader=loader, sources=[str(path)])
            variables = VariableManager(loader=loader, inventory=inventory)
            found = [(h.name, variables.get_vars(host=h, include_hostvars=False)) for h in inventory.get_hosts(limit)]
    except AnsibleError as exc:
        raise InputError(
            f"{path}: not an Ansible inventory: {str(exc).splitlines()[0]}",
            hint="write `name ansible_host=ADDR ansible_port=PORT ansible_user=USER` lines under a [group] "
                 "(INI), or all: {hosts: {name: {ansible_host: ADDR}}} (YAML/JSON)",
        ) from None
    hosts = []
    for name, hv in found:
        wanted = {k: v for k, v in hv.items() if k.startswith(("ansible_", "envbuild_")) and k not in _MAGIC}
        try:
            with contextlib.redirect_stderr(noise), contextlib.redirect_stdout(noise):
                hosts.append((name, _plain(Templar(loader=loader, variables=hv).template(wanted))))
        except AnsibleError as exc:
            raise InputError(f"{path}: host {name}: {str(exc).splitlines()[0]}",
                             hint="define the variable the template names, or write the value itself") from None
    if not hosts:
        raise InputError(f"{path}: the inventory lists no hosts",
                         hint="add hosts: INI `[group]` lines, or all: {hosts: {node1: {ansible_host: 10.0.0.1}}}")
    return hosts


def _plain(value):
    """Ansible's tagged values as plain Python data (JSON-ready, comparable)."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_plain(v) for v in value]
    return str(value)


def _unique(nodes: list[Node]) -> None:
    names = [n.name for n in nodes]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise InputError(f"host named twice: {', '.join(dup)}", hint="list each node once")


def validate_port(value: object, where: str) -> int:
    """``value`` (an int or a string of digits) as a TCP port 1..65535, else InputError naming ``where``.

    >>> validate_port("2222", "--hosts h:2222")
    2222
    """
    text = str(value).strip() if isinstance(value, (int, str)) and not isinstance(value, bool) else ""
    port = int(text) if text.isascii() and text.isdigit() and len(text) <= 5 else 0
    if not 0 < port < 65536:
        raise InputError(f"{where}: port {value!r} is not a TCP port (1-65535)", hint="ports are 1-65535")
    return port

def validate_ssh_name(value: str, where: str) -> str:
    """A host or user name as ssh takes it: not starting with ``-`` (ssh would read
    ``-oProxyCommand=...`` as an option and run it) and without spaces or control characters."""
    if value.startswith("-") or any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in value):
        raise InputError(f"{where}: {value!r} is not a host or user name (it starts with '-' or holds a space "
                         "or a control character)"[:300], hint="write the plain name, e.g. ansible_host: 10.0.0.1")
    return value


def validate_text(value: object, where: str) -> str:
    """A value that must be one plain value (ansible_host, ansible_user, a host name) as text.

    A list or mapping where one value belongs (``ansible_host: [a, b]``) is an InputError
    naming ``where``, instead of a host literally called "['a', 'b']".

    >>> validate_text(10, "inventory.yaml: host n1: ansible_port")
    '10'
    """
    if isinstance(value, (str, int, float)) and not isinstance(value, bool) and str(value).strip():
        return str(value)
    got = f"a {type(value).__name__}" if not isinstance(value, str) else "empty"
    raise InputError(f"{where}: expected one value (a string), got {got}: {value!r}"[:300],
                     hint="write a single value, e.g. ansible_host: 10.0.0.1")
