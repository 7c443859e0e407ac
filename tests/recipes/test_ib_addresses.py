"""MegatronApp's InfiniBand addresses, found when the pods start (deviation hard-coded-ib-addresses).

- The recipe's ib-addresses patch, applied to the published declaration, is compiled with g++
  into a real program together with the published uses (``ips[rank] != ips[next_rank]``,
  ``ips[next_rank].c_str()``), then run: it reads MEGATRONAPP_IB_ADDRESSES when it loads, an
  unset variable means one pod, and a rank without an address stops the process.
- ``envbuild/node/ib_addresses.py`` runs for real: two "nodes" (processes) exchange their
  addresses over TCP on this machine, and a node finds its own address from a /sys tree laid
  out as the kernel lays it out (RoCE and IPoIB), whose interface is this machine's loopback.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from envbuild.node import ib_addresses
from envbuild.node.textpatch import apply_text_patch
from envbuild.recipes import load_recipe
from test_recipe_patches import RDMA_CPP

SCRIPT = Path(ib_addresses.__file__)
pytestmark = pytest.mark.process

PUBLISHED_USES = '''
#include <cstdio>
int main(int argc, char **argv) {
  int rank = std::atoi(argv[1]), next_rank = std::atoi(argv[2]);
  // as init_forward_rdma() uses them at the pinned commit
  std::printf("%s %s %d\\n", ips[rank].c_str(), ips[next_rank].c_str(), ips[rank] != ips[next_rank]);
  return 0;
}
'''


@pytest.fixture(scope="module")
def patched_program(tmp_path_factory) -> Path:
    gxx = shutil.which("g++")
    assert gxx, "g++ is needed (build-essential, .ci/apt-packages.txt)"
    patch = next(p for p in load_recipe("megatronapp").patches if p.id == "ib-addresses")
    status, text = apply_text_patch(RDMA_CPP, patch.kind, patch.old, patch.new, patch.count)
    assert status == "applied" and '"192.168.0.' not in text
    assert apply_text_patch(text, patch.kind, patch.old, patch.new, patch.count)[0] == "already-applied"
    folder = tmp_path_factory.mktemp("ibcpp")
    (folder / "rdma.cpp").write_text(text + PUBLISHED_USES)
    subprocess.run([gxx, "-std=c++17", "-O0", "-o", str(folder / "rdma"), str(folder / "rdma.cpp")],
                   check=True, capture_output=True, text=True)
    return folder / "rdma"


def _run(program: Path, env_value: str | None, rank: int, next_rank: int):
    env = {k: v for k, v in os.environ.items() if k != "MEGATRONAPP_IB_ADDRESSES"}
    if env_value is not None:
        env["MEGATRONAPP_IB_ADDRESSES"] = env_value
    return subprocess.run([str(program), str(rank), str(next_rank)], env=env, capture_output=True, text=True)


def test_patched_extension_reads_the_addresses_when_it_loads(patched_program) -> None:
    two_pods = ",".join(["10.0.0.2"] * 4 + ["10.0.0.7"] * 4)
    # rank 3 -> 4 crosses pods (RDMA), 1 -> 2 stays in the pod
    assert _run(patched_program, two_pods, 3, 4).stdout == "10.0.0.2 10.0.0.7 1\n"
    assert _run(patched_program, two_pods, 1, 2).stdout == "10.0.0.2 10.0.0.2 0\n"
    # unset: one pod, no rank connects to another over InfiniBand
    assert _run(patched_program, None, 0, 3).stdout == "127.0.0.1 127.0.0.1 0\n"
    # a rank the list does not cover stops the process, naming the variable
    p = _run(patched_program, ",".join(["10.0.0.2"] * 4), 3, 4)
    assert p.returncode != 0 and "MEGATRONAPP_IB_ADDRESSES has 4 addresses, none for rank 4" in p.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _sys_tree(root: Path, kind: str, netdev: str = "lo", state: str = "4: ACTIVE") -> Path:
    """/sys/class/infiniband/mlx5_0 with one port: RoCE names its interface in gid_attrs/ndevs/0,
    IPoIB lists it under device/net/."""
    port = root / "class" / "infiniband" / "mlx5_0" / "ports" / "1"
    port.mkdir(parents=True)
    (port / "state").write_text(state + "\n")
    if kind == "roce":
        (port / "gid_attrs" / "ndevs").mkdir(parents=True)
        (port / "gid_attrs" / "ndevs" / "0").write_text(netdev + "\n")
    else:
        (root / "class" / "infiniband" / "mlx5_0" / "device" / "net" / netdev).mkdir(parents=True)
    return root


def _node(rank: int, nnodes: int, port: int, sys_root: Path, per_node: int = 4) -> subprocess.Popen:
    env = {"PATH": os.environ["PATH"], "ENVBUILD_NNODES": str(nnodes), "ENVBUILD_NODE_RANK": str(rank),
           "ENVBUILD_MASTER_ADDR": "127.0.0.1"}
    return subprocess.Popen([sys.executable, str(SCRIPT), "--per-node", str(per_node), "--port", str(port),
                             "--timeout", "60", "--sys", str(sys_root)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_two_nodes_exchange_their_addresses_in_rank_order(tmp_path) -> None:
    port = _free_port()
    sys_root = _sys_tree(tmp_path / "sys", "roce")
    worker = _node(1, 2, port, sys_root)  # the worker starts first and waits for node 0
    time.sleep(1.5)
    master = _node(0, 2, port, sys_root)
    outs = [p.communicate(timeout=90) for p in (master, worker)]
    assert [p.returncode for p in (master, worker)] == [0, 0], outs
    # both nodes print the same list: node 0's address for ranks 0-3, node 1's for 4-7
    assert outs[0][0] == outs[1][0] == ",".join(["127.0.0.1"] * 8) + "\n"


def test_a_peer_that_sends_no_address_fails_the_exchange(tmp_path) -> None:
    port = _free_port()
    master = _node(0, 2, port, _sys_tree(tmp_path / "sys", "roce"))
    deadline = time.time() + 30
    while True:
        try:
            conn = socket.create_connection(("127.0.0.1", port), timeout=5)
            break
        except OSError:
            assert time.time() < deadline
            time.sleep(0.2)
    conn.sendall(b"1 10.0.0.1; id\n")
    conn.close()
    out, err = master.communicate(timeout=60)
    assert master.returncode == 1 and out == "" and "IPv4" in err


def test_own_address_is_the_first_active_port_interface(tmp_path) -> None:
    for kind in ("roce", "ipoib"):
        root = _sys_tree(tmp_path / kind, kind)
        assert ib_addresses.port_interfaces(str(root)) == [("mlx5_0:1", "lo")]
        assert ib_addresses.own_address(str(root)) == "127.0.0.1"  # the loopback's address, by ioctl
    down = _sys_tree(tmp_path / "down", "roce", state="1: DOWN")
    assert ib_addresses.own_address(str(down)) is None


def test_a_node_of_several_without_an_address_stops(tmp_path) -> None:
    down = _sys_tree(tmp_path / "down", "roce", state="1: DOWN")
    p = _node(1, 2, _free_port(), down)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 1 and out == "" and "no IPv4 address on an active InfiniBand/RoCE port" in err
    # one node alone needs none: its ranks never connect over InfiniBand
    p = _node(0, 1, _free_port(), down, per_node=2)
    assert p.communicate(timeout=60)[0] == "127.0.0.1,127.0.0.1\n" and p.returncode == 0


def _fleet_tree(root: Path, devices: list[tuple[str, list[str], str, str]]) -> Path:
    """A /sys of several devices: (device, port states, "roce"/"ipoib", interface stem)."""
    for dev, states, kind, stem in devices:
        for i, state in enumerate(states, start=1):
            port = root / "class" / "infiniband" / dev / "ports" / str(i)
            port.mkdir(parents=True)
            (port / "state").write_text(state + "\n")
            (port / "rate").write_text("400 Gb/sec (4X NDR)\n")
            if kind == "roce":
                (port / "gid_attrs" / "ndevs").mkdir(parents=True)
                (port / "gid_attrs" / "ndevs" / "0").write_text(f"{stem}{i}\n")
            else:
                (root / "class" / "infiniband" / dev / "device" / "net" / f"{stem}{i}").mkdir(parents=True)
    return root


@pytest.mark.parametrize("devices", [
    # an H100 node's twelve HCAs: mlx5_10 sorts before mlx5_2 in both places, the first down
    [(f"mlx5_{n}", ["1: DOWN" if n == 0 else "4: ACTIVE"], "ipoib", f"ib{n}_") for n in range(12)],
    # RoCE with its second port the only active one, next to an IPoIB device
    [("mlx5_0", ["1: DOWN", "4: ACTIVE"], "roce", "eth"), ("mlx5_1", ["4: ACTIVE"], "ipoib", "ib")],
    [("mlx5_0", ["1: DOWN"], "roce", "eth")],  # no active port: no address either way
], ids=["twelve-ipoib", "roce-second-port", "all-down"])
def test_the_pods_rule_and_the_facts_rule_pick_the_same_address(tmp_path, devices) -> None:
    """The address a pod finds at start (node/ib_addresses.py, reading /sys) is the one the
    node's facts name (facts/ib.py, parsing the probe's output): the probe's own commands run
    here over the same tree, /sys rewritten to it, every interface given an address."""
    from envbuild.facts.ib import PROBES, ib_address, parse_sys_infiniband

    root = _fleet_tree(tmp_path / "sys", devices)
    script = PROBES[0].command.replace("/sys/", f"{root}/").replace("ip -o -4 addr show", "true")
    text = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True).stdout
    text = text.replace(f"{root}/", "/sys/")
    active = ib_addresses.port_interfaces(str(root))
    every = sorted({line.rsplit("/", 1)[-1] for line in text.splitlines() if "/device/net/" in line}
                   | {line.rsplit(":", 1)[-1] for line in text.splitlines() if "/ndevs/0:" in line})
    address = {netdev: f"10.1.{i}.7" for i, netdev in enumerate(every)}
    ip_lines = "".join(f"{i + 2}: {n}    inet {a}/16 brd 10.1.255.255 scope global {n}\n"
                       for i, (n, a) in enumerate(address.items()))
    facts = ib_address(parse_sys_infiniband(text + ip_lines))
    pod = ib_addresses.own_address(str(root), address_of=address.get)
    assert pod == facts
    assert (pod is None) == (not active)
