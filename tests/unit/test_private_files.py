import os
import stat
from pathlib import Path

from tasks.services.private_files import write_private


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_file_is_this_users_alone_whatever_the_umask(tmp_path):
    old = os.umask(0)
    try:
        target = tmp_path / "local-token"
        assert write_private(target, "tok\n")
    finally:
        os.umask(old)
    assert target.read_text() == "tok\n"
    assert _mode(target) == 0o600
    assert os.listdir(target.parent) == ["local-token"]  # no temporary file left behind


def test_the_master_secret_leaves_a_new_data_dir_passable_for_the_sandboxes(tmp_path):
    # The functions' sandbox user (65534) goes through the data dir to quickjs-ng's copy: a
    # data dir made 0700 with the secret refused every function save with a 500.
    from dataclasses import replace

    from tasks.services.keys import master_key
    from tasks.settings import get_settings

    data_dir = tmp_path / "data"
    old = os.umask(0o022)
    try:
        key = master_key(replace(get_settings(), data_dir=data_dir, secret_key=""))
    finally:
        os.umask(old)
    # passable for the sandboxes, not listable by the machine's other users
    assert key and _mode(data_dir) == 0o711
    assert _mode(data_dir / "web-secret-key") == 0o600


def test_a_wider_file_already_there_is_replaced_not_rewritten_in_place(tmp_path):
    target = tmp_path / "services.json"
    target.write_text("old")
    target.chmod(0o644)
    assert write_private(target, "new")
    assert target.read_text() == "new"
    assert _mode(target) == 0o600


def test_a_link_planted_at_the_name_is_replaced_and_its_target_untouched(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    target = tmp_path / "redis.conf"
    target.symlink_to(victim)
    assert write_private(target, "requirepass x\n")
    assert not target.is_symlink()
    assert victim.read_text() == "keep me"
    assert target.read_text() == "requirepass x\n"


def test_without_replace_the_first_writer_wins(tmp_path):
    target = tmp_path / "web-secret-key"
    assert write_private(target, "first", replace=False)
    assert not write_private(target, "second", replace=False)
    assert target.read_text() == "first"
    assert os.listdir(tmp_path) == ["web-secret-key"]
