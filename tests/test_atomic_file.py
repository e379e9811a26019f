"""Writing a file atomically: the whole new text or the old file, and nothing left beside it."""

from __future__ import annotations

from pathlib import Path

from rk_agent.atomic_file import write_atomic


def test_a_write_replaces_the_file_and_leaves_nothing_beside_it(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "run.json"
    assert write_atomic(target, "one") == target  # the folder is made
    assert write_atomic(target, "twö") == target
    assert target.read_text(encoding="utf-8") == "twö"
    assert [p.name for p in target.parent.iterdir()] == ["run.json"]


def test_a_reader_holding_the_old_file_keeps_reading_it_whole(tmp_path: Path) -> None:
    target = tmp_path / "run.json"
    write_atomic(target, "old text")
    with target.open(encoding="utf-8") as reader:
        write_atomic(target, "new")
        assert reader.read() == "old text"  # the rename swapped files; the old one is intact
    assert target.read_text(encoding="utf-8") == "new"
