"""SSH host keys for Fabric connections, checked as ssh (and therefore Ansible) checks them.

Which files and which rule (``host_key_check``, pure):

- files: the node's explicit known_hosts (``--known-hosts`` / ``$ENVBUILD_KNOWN_HOSTS``), else
  ``UserKnownHostsFile`` from its ansible ssh args, else ``~/.ssh/known_hosts``; plus
  ``GlobalKnownHostsFile``, else ``/etc/ssh/ssh_known_hosts``.
- rule: ``strict`` (unknown and changed keys refused), ``accept-new`` (from
  ``StrictHostKeyChecking=accept-new``: unknown accepted with a warning, changed refused) or
  ``off`` (``node.insecure``: nothing checked, a warning on stderr once per node).

A refused key is a ``HostKeyRefused`` (an ``EnvironmentProblem``, exit 3) naming the node, the
host as known_hosts writes it, the fingerprints and the files, with the ``ssh-keyscan`` /
``--insecure`` hint.
"""

from __future__ import annotations

import base64
import hashlib
import os
import sys
import threading
from dataclasses import dataclass

from envbuild.connect.nodes import Node, ssh_options
from envbuild.errors import EnvironmentProblem

USER_KNOWN_HOSTS = ("~/.ssh/known_hosts",)
GLOBAL_KNOWN_HOSTS = ("/etc/ssh/ssh_known_hosts",)
_warned: set[str] = set()
_warn_lock = threading.Lock()


class HostKeyRefused(EnvironmentProblem):
    """The node's SSH host key is unknown or changed: envbuild did not connect."""


@dataclass(frozen=True)
class HostKeyCheck:
    """How one node's host key is checked: ``mode`` strict | accept-new | off, and the
    known_hosts files consulted (in order; missing ones are skipped)."""

    mode: str
    files: tuple[str, ...] = ()

    @property
    def checked(self) -> bool:
        return self.mode != "off"


def host_key_check(node: Node) -> HostKeyCheck:
    """The check ssh would make for ``node`` (see the module docstring). Pure."""
    if node.insecure:
        return HostKeyCheck("off")
    opts = ssh_options(node)
    strict = (opts.get("stricthostkeychecking") or "yes").lower()
    mode = "off" if strict in ("no", "off") else "accept-new" if strict == "accept-new" else "strict"
    user = node.known_hosts or _split(opts.get("userknownhostsfile")) or USER_KNOWN_HOSTS
    glob = _split(opts.get("globalknownhostsfile")) or GLOBAL_KNOWN_HOSTS
    files = [os.path.expanduser(f) for f in (*user, *glob) if f != "/dev/null"]
    return HostKeyCheck(mode, tuple(dict.fromkeys(files)))


def apply(client, node: Node, check: HostKeyCheck | None = None) -> HostKeyCheck:
    """Load the known_hosts files into a paramiko ``client`` and set the policy for keys
    that are not there. A changed key is refused by paramiko itself (``BadHostKeyException``,
    turned into ``HostKeyRefused`` by ``refused``)."""
    import paramiko

    check = check or host_key_check(node)
    if not check.checked:
        warn_insecure(node)
        client.set_missing_host_key_policy(paramiko.AutoAddPolicy())  # kept in memory only
        return check
    for path in check.files:
        if os.path.isfile(path):
            try:
                client.load_system_host_keys(path)
            except Exception as exc:  # noqa: BLE001 - unreadable or malformed file
                raise EnvironmentProblem(f"{node.name}: cannot read known_hosts file {path}: {exc}",
                                         hint="fix or remove the malformed line (ssh-keygen -l -f FILE lists it)") from None
    client.set_missing_host_key_policy(_Missing(node, check))
    return check


def refused(node: Node, exc, check: HostKeyCheck | None = None, port: int | None = None) -> HostKeyRefused:
    """A changed host key (paramiko's ``BadHostKeyException``) as a clear error."""
    check = check or host_key_check(node)
    lookup = _lookup(exc.hostname, port or node.port)
    where = _file_with(lookup, check.files) or " or ".join(check.files)
    return HostKeyRefused(
        f"{node.name}: the SSH host key of {lookup} CHANGED: {where} has {fingerprint(exc.expected_key)} "
        f"but the node offers {fingerprint(exc.key)} ({exc.key.get_name()}); not connecting "
        "(the node was reinstalled, or something is in the middle)",
        hint=f"if the node really was reinstalled: ssh-keygen -R '{lookup}' -f {where}; then "
             f"{keyscan(lookup)} >> {where} after checking the fingerprint; "
             "--insecure skips the check (throwaway test nodes only)",
    )


def fingerprint(key) -> str:
    """OpenSSH's ``SHA256:...`` fingerprint of a paramiko key."""
    return "SHA256:" + base64.b64encode(hashlib.sha256(key.asbytes()).digest()).decode().rstrip("=")


def keyscan(lookup: str) -> str:
    """The ssh-keyscan command for ``host`` or ``[host]:port``."""
    if lookup.startswith("["):
        host, _, port = lookup[1:].rpartition("]:")
        return f"ssh-keyscan -p {port} {host}"
    return f"ssh-keyscan {lookup}"


def warn_insecure(node: Node) -> None:
    """Say on stderr, once per node and process, that its host key is not checked."""
    key = f"{node.name} {node.address}"
    with _warn_lock:
        if key in _warned:
            return
        _warned.add(key)
    sys.stderr.write(f"warning: {node.name} ({node.address}): SSH host key NOT checked (--insecure or "
                     "StrictHostKeyChecking=no): anyone on the path can pose as this node; "
                     "throwaway test nodes only\n")
    sys.stderr.flush()


class _Missing:
    """paramiko policy for a key in no known_hosts file: refuse (strict) or accept-new."""

    def __init__(self, node: Node, check: HostKeyCheck):
        self.node, self.check = node, check

    def missing_host_key(self, client, hostname: str, key) -> None:
        fp = fingerprint(key)
        if self.check.mode == "accept-new":
            sys.stderr.write(f"warning: {self.node.name}: accepting the new SSH host key {fp} of {hostname} "
                             "(StrictHostKeyChecking=accept-new); it is not written anywhere\n")
            return
        searched = ", ".join(f if os.path.isfile(f) else f"{f} (missing)" for f in self.check.files) or "no file"
        raise HostKeyRefused(
            f"{self.node.name}: the SSH host key of {hostname} is unknown: {fp} ({key.get_name()}) is in none "
            f"of {searched}; envbuild checks host keys as ssh and Ansible do",
            hint=f"if {fp} is the node's key: {keyscan(hostname)} >> ~/.ssh/known_hosts (or pass "
                 "--known-hosts FILE / set ENVBUILD_KNOWN_HOSTS); --insecure skips the check "
                 "(throwaway test nodes only)",
        )


def _split(value: str | None) -> tuple[str, ...]:
    """Files of a UserKnownHostsFile value (several, blank-separated, "quoted" with blanks)."""
    import shlex

    try:
        return tuple(shlex.split(value)) if value else ()
    except ValueError:
        return tuple((value or "").split())


def _lookup(host: str, port: int | None) -> str:
    return f"[{host}]:{port}" if port and port != 22 else host


def _file_with(lookup: str, files: tuple[str, ...]) -> str | None:
    import paramiko

    for path in files:
        if os.path.isfile(path):
            try:
                if paramiko.HostKeys(path).lookup(lookup):
                    return path
            except Exception:  # noqa: BLE001 - already reported by apply when unreadable
                continue
    return None


def known_keys(node: Node) -> list[str]:
    """``TYPE BASE64`` of each host key the files ``host_key_check`` names hold for ``node`` (as
    ssh looks it up: ``[host]:port`` off port 22); [] when its host key is not checked."""
    import paramiko

    check = host_key_check(node)
    if not check.checked:
        return []
    lookup = _lookup(node.host, node.port)
    found: dict[str, str] = {}
    for path in check.files:
        if os.path.isfile(path):
            try:
                entry = paramiko.HostKeys(path).lookup(lookup)
            except Exception:  # noqa: BLE001 - an unreadable file is refused when connecting
                continue
            for kind in (entry or {}):
                found.setdefault(kind, entry[kind].get_base64())
    return [f"{k} {v}" for k, v in sorted(found.items())]
