"""One atomic write for every file resflow writes outside the store's records: a reader or a crash never sees a
half-written file, create-if-absent has one winner, and no module writes a file any other way."""

import re
from pathlib import Path

import pytest

from resflow._atomic import atomic_write

ROOT = Path(__file__).resolve().parents[1]


def test_text_bytes_and_writer_functions(tmp_path):
    assert atomic_write(tmp_path / "a.txt", "text").read_text() == "text"
    assert atomic_write(tmp_path / "b.bin", b"\x00\x01").read_bytes() == b"\x00\x01"
    assert atomic_write(tmp_path / "c.txt", lambda p: p.write_text("via a writer")).read_text() == "via a writer"
    assert atomic_write(tmp_path / "a.txt", "replaced").read_text() == "replaced"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.bin", "c.txt"]  # no temporary left


def test_create_if_absent_never_replaces(tmp_path):
    atomic_write(tmp_path / "marker", "first", overwrite=False)
    with pytest.raises(FileExistsError):
        atomic_write(tmp_path / "marker", "second", overwrite=False)
    assert (tmp_path / "marker").read_text() == "first" and len(list(tmp_path.iterdir())) == 1


def test_a_writer_that_fails_leaves_the_old_file_and_no_temporary(tmp_path):
    target = atomic_write(tmp_path / "run.json", '{"old": 1}')

    def crash(path):
        path.write_text('{"new": ')  # half written, then the writer dies
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError, match="killed"):
        atomic_write(target, crash)
    assert target.read_text() == '{"old": 1}' and [p.name for p in tmp_path.iterdir()] == ["run.json"]


def test_no_module_writes_a_file_another_way():
    """Files are written through atomic_write only (records: the store's own rename of a directory); in-memory
    buffers (a figure's PNG for Jupyter) are not files."""
    direct = re.compile(r"\.write_text\(|\.write_bytes\(|os\.replace\(|\.to_netcdf\((?!tmp)|\.savefig\((?!tmp|buffer)"
                        r"|torch\.save\((?!.*tmp)")
    offenders = [f"{path.relative_to(ROOT)}:{n}" for folder in ("resflow", "theory", "sims")
                 for path in (ROOT / folder).rglob("*.py") if path.name != "_atomic.py"
                 for n, line in enumerate(path.read_text().splitlines(), 1) if direct.search(line)]
    assert offenders == [], offenders
