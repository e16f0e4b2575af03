"""Which workers take wake-ups without broker acks: solo ones only (tasks.worker)."""

from celery.concurrency import get_implementation

from tasks.worker import _is_solo


def test_a_solo_pool_is_recognised_by_alias_and_by_class():
    assert _is_solo("solo")
    assert _is_solo(get_implementation("solo"))


def test_pools_that_hold_prefetched_wakeups_keep_their_acks():
    for pool in ("prefork", "threads"):
        assert not _is_solo(pool)
        assert not _is_solo(get_implementation(pool))
    assert not _is_solo(None)
