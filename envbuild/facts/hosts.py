"""Which nodes to gather: ``--hosts`` lists and Ansible inventories, as ``HostSpec`` records.

>>> [h.label for h in parse_hosts("root@10.0.0.1,10.0.0.2:2222")]
['10.0.0.1', '10.0.0.2:2222']
"""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

from envbuild.errors import InputError
from envbuild.facts.runners import HostSpec

_ENTRY = re.compile(r"^(?:(?P<user>[^@\s]+)@)?(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<host>[^:@\s\[\]]+))(?::(?P<port>\d+))?$")


def parse_hosts(
    text: str, *, user: str | None = None, port: int = 22, identity: str | None = None
) -> list[HostSpec]:
    """Parse ``[user@]host[:port],...`` (IPv6 as ``[addr]:port``).

    A user given on one entry also applies to the entries after it that name none
    ("root@h1,h2" logs in as root on both); ``user``/``port`` are the defaults.
    """
    specs = []
    for raw in [e.strip() for e in text.split(",")]:
        if not raw:
            continue
        m = _ENTRY.match(raw)
        if not m:
            raise InputError(
                f"--hosts: cannot read {raw!r}", hint="write hosts as user@host[:port],host2[:port]"
            )
        user = m.group("user") or user
        p = int(m.group("port")) if m.group("port") else port
        if not 0 < p < 65536:
            raise InputError(f"--hosts: port {p} of {raw!r} is out of range", hint="ports are 1-65535")
        specs.append(HostSpec(host=m.group("v6") or m.group("host"), port=p, user=user, identity=identity))
    if not specs:
        raise InputError("--hosts: no host given", hint="e.g. --hosts root@10.0.0.1,10.0.0.2:2222")
    return specs


def read_inventory(
    path: str | os.PathLike, *, identity: str | None = None, port: int = 22, limit: str = "all"
) -> list[HostSpec]:
    """Hosts of an Ansible inventory (INI or YAML), read with Ansible's own InventoryManager.

    Honours ``ansible_host``, ``ansible_port``, ``ansible_user`` and
    ``ansible_ssh_private_key_file``; ``identity`` and ``port`` fill what the inventory omits.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"inventory {path} does not exist", hint="pass an Ansible INI or YAML inventory file")
    os.environ.setdefault("ANSIBLE_INVENTORY_UNPARSED_FAILED", "True")
    os.environ.setdefault("ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED", "True")
    from ansible.errors import AnsibleError
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.vars.manager import VariableManager

    noise = io.StringIO()
    try:
        with contextlib.redirect_stderr(noise), contextlib.redirect_stdout(noise):
            loader = DataLoader()
            inventory = InventoryManager(loader=loader, sources=[str(path)])
            variables = VariableManager(loader=loader, inventory=inventory)
            hosts = [(h.name, variables.get_vars(host=h)) for h in inventory.get_hosts(limit)]
    except AnsibleError as exc:
        raise InputError(
            f"{path}: not an Ansible inventory: {str(exc).splitlines()[0]}",
            hint="write `name ansible_host=ADDR ansible_port=PORT ansible_user=USER` lines under a [group]",
        ) from exc
    if not hosts:
        raise InputError(f"{path}: the inventory lists no hosts", hint="add hosts under a [group] section")

    def s(value) -> str | None:
        return None if value is None else str(value)

    specs = []
    for name, v in hosts:
        key = s(v.get("ansible_ssh_private_key_file") or v.get("ansible_private_key_file")) or identity
        specs.append(
            HostSpec(
                host=s(v.get("ansible_host")) or name,
                port=int(v.get("ansible_port") or v.get("ansible_ssh_port") or port),
                user=s(v.get("ansible_user") or v.get("ansible_ssh_user")),
                identity=os.path.expanduser(key) if key else None,
                name=name,
            )
        )
    return specs
