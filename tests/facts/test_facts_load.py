"""load_facts accepts envbuild facts files (object or list) and rejects everything else."""

import json

import pytest

from envbuild.errors import InputError
from envbuild.facts.load import dump_facts, load_facts
from envbuild.facts.model import NodeFacts
from support.paths import FIXTURES

H100 = FIXTURES / "nodes" / "h100-ubuntu2404-cuda13"


def test_roundtrip_one_and_many(tmp_path):
    a, b = NodeFacts(host="a", glibc="2.39"), NodeFacts(host="b")
    one = tmp_path / "one.json"
    one.write_text(dump_facts([a], as_list=False))
    assert load_facts(one) == [a]
    many = tmp_path / "many.json"
    many.write_text(dump_facts([a, b], as_list=True))
    assert [f.host for f in load_facts(many)] == ["a", "b"]


@pytest.mark.parametrize(
    "content,needle",
    [
        ((H100 / "nvidia-smi-q.xml").read_text(), "XML"),
        ((H100 / "nvidia-smi.txt").read_text(), "invalid JSON"),
        (json.dumps({"gpus": []}), "without a 'schema' field"),
        (json.dumps({"schema": "other.tool/3", "host": "x"}), "'other.tool/3'"),
        (json.dumps({"schema": "envbuild.facts/1"}), "host"),
        (json.dumps({"schema": "envbuild.facts/1", "host": "x", "gpus": "none"}), "gpus"),
        ("[]", "empty"),
        (json.dumps([1]), "[0]"),
    ],
)
def test_foreign_or_broken_files_are_rejected(tmp_path, content, needle):
    path = tmp_path / "facts.json"
    path.write_text(content)
    with pytest.raises(InputError) as err:
        load_facts(path)
    assert str(path) in str(err.value) and needle in str(err.value)
    assert "envbuild.facts/1" in str(err.value) or "invalid facts" in str(err.value)
    assert err.value.hint == "produce it with envbuild facts --json -o FILE"


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="cannot read"):
        load_facts(tmp_path / "absent.json")
