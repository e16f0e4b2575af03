"""What a handler may call an artifact: names fit for a download, kinds and types fit for a
header; storage keys made from ids and digests only."""

from __future__ import annotations

import uuid

import pytest

from tasks.services.artifact_store import checked, storage_key
from tasks.services.artifacts import InvalidArtifact, _validated, safe_name


@pytest.mark.parametrize(("given", "kept"), [
    ("report.pdf", "report.pdf"),
    ("../../etc/passwd", "passwd"),  # only the last path component
    ("C:\\Users\\x\\deck.pptx", "deck.pptx"),  # Windows separators too
    ("a\r\nSet-Cookie: x.txt", "a__Set-Cookie: x.txt"),  # no header splitting
    ('say "hi".txt', "say _hi_.txt"),  # no quote to end a quoted filename early
    ("tab\there\x00.txt", "tab_here_.txt"),
    ("Résumé.txt", "Résumé.txt"),  # non-ASCII stays (sent as filename*)
    ("  .hidden  ", "hidden"),  # no dot file, no surrounding blanks
    ("x" * 300, "x" * 200),
])
def test_a_name_becomes_a_safe_file_name(given: str, kept: str) -> None:
    assert safe_name(given) == kept


@pytest.mark.parametrize("name", ["", "../", " . ", "a/"])
def test_a_name_with_no_file_name_in_it_is_refused(name: str) -> None:
    with pytest.raises(InvalidArtifact):
        safe_name(name)


@pytest.mark.parametrize(("kind", "content_type", "reason"), [
    ("Report", "text/plain", "kinds are lowercase"),
    ("report", "text/html\r\nX: y", "a header smuggled in the type"),
    ("report", "html", "no subtype"),
    ("report", "text/plain; boundary=x", "only a charset parameter"),
])
def test_kinds_and_content_types_are_checked(kind: str, content_type: str, reason: str) -> None:
    with pytest.raises(InvalidArtifact):
        _validated(kind, "x.txt", content_type, b"")


def test_a_content_type_is_normalised() -> None:
    assert _validated("report", "x", " Text/Plain;charset=UTF-8 ", b"")[2] == \
        "text/plain;charset=utf-8"


def test_data_must_be_bytes() -> None:
    with pytest.raises(InvalidArtifact):
        _validated("report", "x", "text/plain", "text")  # type: ignore[arg-type]


def test_storage_keys_are_made_of_an_id_and_a_digest_only() -> None:
    pid, digest = uuid.uuid4(), "ab" + "0" * 62
    assert storage_key(pid, digest) == f"{pid}/ab/{digest}"
    for bad in (f"{pid}/../{digest}", f"{pid}/ab/{digest}/..", "/etc/passwd",
                f"{pid}/cd/{digest}".upper()):
        with pytest.raises(ValueError):
            checked(bad)
    with pytest.raises(ValueError):
        storage_key(pid, "not-a-digest")
