"""Pure fact parsers on output captured from real nodes and on documented edge cases."""

from pathlib import Path

import pytest

from envbuild.facts import conda, containers, cuda, gpu, host, ib, nccl, osinfo, python
from support.paths import FIXTURES

NODES = FIXTURES / "nodes"
H100 = NODES / "h100-ubuntu2404-cuda13"
CPU = NODES / "debian12-cpu"
EDGE = NODES / "edge-cases"


def read(path: Path) -> str:
    return path.read_text()


def test_gpu_query_reads_columns_by_header_name():
    text = read(H100 / "nvidia-smi-query.csv")
    (g,) = gpu.parse_gpu_query(text)
    assert g.name == "NVIDIA H100 80GB HBM3"
    assert g.compute_capability == "9.0" and g.sm == "sm_90"
    assert g.memory_mib == 81559
    assert g.pci_bus_id == "00000000:00:06.0"
    assert g.index == 0 and g.uuid is None  # the capture has no index/uuid columns
    assert gpu.parse_query_driver(text) == "580.159.04"


def test_gpu_query_column_order_does_not_matter():
    text = read(H100 / "nvidia-smi-query.csv").splitlines()
    cols = [c.strip() for c in text[0].split(",")]
    rows = [[c.strip() for c in line.split(",")] for line in text[1:]]
    order = list(reversed(range(len(cols))))
    shuffled = "\n".join(", ".join(r[i] for i in order) for r in [cols, *rows])
    assert gpu.parse_gpu_query(shuffled) == gpu.parse_gpu_query("\n".join(text))


@pytest.mark.parametrize("case", ["nvidia-smi-no-driver.txt", "nvidia-smi-no-devices.txt"])
def test_gpu_query_without_gpu_is_empty_not_error(case):
    text = read(EDGE / case)
    assert gpu.parse_gpu_query(text) == []
    assert gpu.no_gpu_reason(text) == text.strip().splitlines()[0]
    assert gpu.parse_nvidia_smi_xml(text).gpus == []
    assert gpu.parse_topology(text) is None


def test_gpu_query_old_driver_falls_back_to_name_table():
    gpus = gpu.parse_gpu_query(read(EDGE / "nvidia-smi-query-old-driver.csv"))
    assert [g.index for g in gpus] == [0, 1]
    assert {g.compute_capability for g in gpus} == {"7.0"}
    assert gpus[1].uuid.endswith("555555555555")


def test_nvidia_smi_xml_driver_cuda_and_gpu():
    x = gpu.parse_nvidia_smi_xml(read(H100 / "nvidia-smi-q.xml"))
    assert (x.driver_version, x.cuda_version) == ("580.159.04", "13.0")
    assert len(x.gpus) == 1 and x.gpus[0]["uuid"].startswith("GPU-")
    assert x.gpus[0]["memory_mib"] == 81559


def test_merge_fills_uuid_from_xml():
    gpus = gpu.parse_gpu_query(read(H100 / "nvidia-smi-query.csv"))
    merged = gpu.merge_xml(gpus, gpu.parse_nvidia_smi_xml(read(H100 / "nvidia-smi-q.xml")))
    assert merged[0].uuid == gpu.parse_nvidia_smi_xml(read(H100 / "nvidia-smi-q.xml")).gpus[0]["uuid"]


def test_nvcc_version_and_probe():
    text = read(H100 / "nvcc-version.txt")
    assert cuda.parse_nvcc_version(text) == "13.0"
    p = cuda.parse_nvcc_probe("CUDA_HOME=\nNVCC=/usr/local/cuda-13.0/bin/nvcc\n" + text)
    assert (p.path, p.version, p.cuda_home) == ("/usr/local/cuda-13.0/bin/nvcc", "13.0", "/usr/local/cuda-13.0")
    p = cuda.parse_nvcc_probe("CUDA_HOME=/opt/cuda\nNVCC=/usr/bin/nvcc\n" + text)
    assert p.cuda_home == "/opt/cuda"
    assert cuda.parse_nvcc_version("sh: nvcc: not found") is None


@pytest.mark.parametrize(
    "node,expected",
    [(H100, ("ubuntu", "24.04", "Ubuntu 24.04.3 LTS")), (CPU, ("debian", "12", "Debian GNU/Linux 12 (bookworm)"))],
)
def test_os_release(node, expected):
    rel = osinfo.parse_os_release(read(node / "os-release"))
    assert (rel["ID"], rel["VERSION_ID"], rel["PRETTY_NAME"]) == expected


def test_glibc_from_ldd_getconf_and_musl():
    assert osinfo.parse_glibc(read(CPU / "ldd-version.txt")) == "2.36"
    assert osinfo.parse_glibc("glibc 2.39\n") == "2.39"
    assert osinfo.parse_glibc(read(EDGE / "ldd-musl.txt")) is None
    assert osinfo.parse_glibc("") is None


def test_host_parsers_on_real_capture():
    assert host.parse_meminfo_gib(read(CPU / "meminfo.txt")) == round(
        int(read(CPU / "meminfo.txt").split()[1]) / 1024**2, 1
    )
    model = host.parse_cpu_model(read(CPU / "cpuinfo-model.txt"))
    assert model and model in read(CPU / "cpuinfo-model.txt")
    assert (host.parse_cpu_model("Model name:                              Intel(R) Xeon(R) Processor")
            == "Intel(R) Xeon(R) Processor")
    assert host.parse_nproc("16\n") == 16 and host.parse_nproc("nproc: not found") is None


def test_pip_list_text_table_ignores_trailing_lines():
    text = read(H100 / "pip-list.txt")
    pkgs = python.parse_pip_list(text)
    table_rows = [ln for ln in text.splitlines()[2:] if len(ln.split()) == 2 and ln.split()[1][0].isdigit()]
    assert len(pkgs) == len(table_rows)
    assert pkgs["torch"] == "2.11.0" and pkgs["nvidia-nccl-cu13"] == "2.28.9"
    assert pkgs["pyyaml"] == "6.0.3"  # canonical names
    assert not any("/" in k for k in pkgs)
    assert nccl.nccl_from_pip(pkgs) == "2.28.9"


def test_pip_list_json_with_editable():
    pkgs = python.parse_pip_list(read(EDGE / "pip-list.json"))
    assert pkgs == {"megatron-core": "0.9.0", "nvidia-nccl-cu13": "2.28.9", "pyyaml": "6.0.3", "torch": "2.11.0"}
    assert python.parse_pip_list("megatron-core 0.9.0 /src/Megatron-LM\n") == {"megatron-core": "0.9.0"}


def test_pip_list_versions_read_as_pip_prints_them():
    """The facts' importlib.metadata list gives versions as written in the metadata; pip prints
    them normalized: the parser gives pip's form either way (a version that does not parse stays)."""
    listed = '[{"name": "a", "version": "1.0.0-RC1"}, {"name": "b", "version": "v2.0"}, {"name": "c", "version": "23.08"},' \
             ' {"name": "d", "version": "2.11.0+cu130"}, {"name": "e", "version": "not a version"}]'
    assert python.parse_pip_list(listed) == {"a": "1.0.0rc1", "b": "2.0", "c": "23.8", "d": "2.11.0+cu130",
                                             "e": "not a version"}


def test_pythons_dedup_by_version_and_prefix():
    text = "/usr/bin/python3\t3.11.2\t/usr\n/usr/bin/python3.11\t3.11.2\t/usr\n/opt/v/bin/python3\t3.11.2\t/opt/v\nbroken\n"
    got = python.parse_pythons(text)
    assert [p.path for p in got] == ["/usr/bin/python3", "/opt/v/bin/python3"]


def test_conda_and_modules():
    assert conda.parse_conda("conda /opt/conda/bin/conda\nmicromamba /usr/bin/micromamba\n") == [
        "/opt/conda/bin/conda", "/usr/bin/micromamba"]
    mods = conda.parse_module_avail(read(EDGE / "module-avail-lmod.txt"))
    assert "cudatoolkit/11.8" in mods and "nccl/2.18.3" in mods
    assert not any(m.endswith(":") for m in mods)


@pytest.mark.parametrize("case", ["ibstat.txt", "sys-infiniband.txt"])
def test_infiniband_both_formats(case):
    devs = ib.parse_infiniband(read(EDGE / case))
    assert [d.name for d in devs] == ["mlx5_0:1", "mlx5_1:1"]
    assert [d.state for d in devs] == ["ACTIVE", "DOWN"]
    assert devs[0].rate.startswith("200 Gb/sec")


def test_nccl_sources():
    assert nccl.parse_nccl(read(EDGE / "nccl-probe.txt")) == "2.18.5"
    assert nccl.parse_nccl("lib /usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5\n") == "2.21.5"
    assert nccl.parse_nccl("torch (2, 28, 9)\n" + read(EDGE / "nccl-probe.txt")) == "2.28.9"
    assert nccl.parse_torch_nccl("21805") == "2.18.5"
    assert nccl.parse_torch_nccl("2708") == "2.7.8"
    assert nccl.parse_nccl("") is None


def test_container_engines():
    docker = read(CPU / "docker-version.txt")
    assert containers.parse_engine_version(docker) == docker.split()[2].rstrip(",")
    got = containers.parse_containers("@@ podman\npodman version 4.3.1\n@@ apptainer\napptainer version 1.3.4\n"
                                      "@@ enroot\n3.5.0\n")
    assert got == {"podman": "4.3.1", "apptainer": "1.3.4", "enroot": "3.5.0"}
    assert containers.parse_containers("") == {}


def test_a_listing_of_more_gpus_than_a_node_holds_is_not_believed():
    """A lying nvidia-smi (issue 41): 100,000 GPUs become none, with the reason in the facts'
    missing list; a field longer than any real one drops its row."""
    from envbuild.facts import gpu
    from envbuild.facts.assemble import assemble
    from envbuild.facts.probe import Section

    head = "index, name, driver_version, memory.total [MiB], compute_cap\n"
    many = head + "".join(f"{i}, NVIDIA H100 80GB HBM3, 550.1, 81559 MiB, 9.0\n" for i in range(100_000))
    facts = assemble({"gpu_query": Section(out=many, err="", rc=0)}, "n1")
    assert facts.gpus == [] and "listed 100000 GPUs, more than a node holds (64)" in facts.missing["gpus"]
    eight = head + "".join(f"{i}, NVIDIA H100 80GB HBM3, 550.1, 81559 MiB, 9.0\n" for i in range(8))
    assert len(gpu.parse_gpu_query(eight)) == 8
    long = head + f"0, NVIDIA {'H' * 5000}, 550.1, 81559 MiB, 9.0\n1, NVIDIA H100 80GB HBM3, 550.1, 81559 MiB, 9.0\n"
    assert [g.index for g in gpu.parse_gpu_query(long)] == [1]
