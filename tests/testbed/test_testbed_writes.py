"""The parser of strace's record of created files (envbuild.testbed.writes), on lines captured
from a real traced ``envbuild provision`` (tests/data/strace/provision-sample.txt): calls split
by strace count with the result of their second half, reads and unnamed files do not count."""

from __future__ import annotations


from envbuild.testbed.writes import created, outside
from support.paths import DATA

SAMPLE = DATA / "strace" / "provision-sample.txt"
T = "/tmp/pytest-of-root/pytest-4/test_installed_wheel_provision0"


def test_created_paths_of_a_real_trace():
    got = created(SAMPLE.read_text())
    assert got == {f"{T}/home", f"{T}/home/runs",
                   f"{T}/home/runs/20261123-221953-cpu-reference-local/run.json",
                   f"{T}/prefix/lib64"}
    assert T not in got  # its mkdir was split by strace and then failed: EEXIST
    assert "/tmp" not in got  # O_TMPFILE: an unnamed file, gone when closed


def test_a_dirfd_relative_path_is_made_absolute_and_failed_calls_do_not_count():
    text = ('5 openat(7</srv/dir>, "f.txt", O_WRONLY|O_CREAT|O_CLOEXEC, 0644) = 3</srv/dir/f.txt>\n'
            '5 openat(7</srv/dir>, "g.txt", O_RDONLY|O_CLOEXEC) = 3</srv/dir/g.txt>\n'
            '6 mkdir("/srv/new", 0777) = -1 EACCES (Permission denied)\n'
            '6 renameat2(AT_FDCWD</x>, "/srv/a.tmp", 9</srv/out>, "a", RENAME_NOREPLACE) = 0\n')
    assert created(text) == {"/srv/dir/f.txt", "/srv/out/a"}


def test_outside_keeps_what_still_exists_beyond_the_allowed_folders(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a").write_text("")
    (tmp_path / "out").write_text("")
    paths = {str(tmp_path / "in" / "a"), str(tmp_path / "out"), str(tmp_path / "gone"), str(tmp_path / "in")}
    assert outside(paths, [tmp_path / "in"]) == [str(tmp_path / "out")]
    (tmp_path / "inner").write_text("")  # "in" is a folder, not a string prefix
    assert outside({str(tmp_path / "inner")}, [tmp_path / "in"]) == [str(tmp_path / "inner")]
