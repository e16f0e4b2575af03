"""Which workers take wake-ups without broker acks (solo ones only) and which claim ahead
(threads ones only): tasks.worker names the pool by alias or by class alike."""

from celery.concurrency import get_implementation

from tasks.worker import _pool_name


def test_a_solo_pool_is_recognised_by_alias_and_by_class():
    assert _pool_name("solo") == "solo"
    assert _pool_name(get_implementation("solo")) == "solo"


def test_pools_that_hold_prefetched_wakeups_are_not_solo():
    for pool in ("prefork", "threads"):
        assert _pool_name(pool) != "solo"
        assert _pool_name(get_implementation(pool)) != "solo"
    assert _pool_name(None) != "solo"


def test_only_a_thread_pool_is_one_whose_wakeups_wait_in_its_own_process():
    threads = {"threads", "thread"}
    assert _pool_name("threads") in threads
    assert _pool_name(get_implementation("threads")) in threads
    for pool in ("prefork", "solo"):
        assert _pool_name(pool) not in threads
        assert _pool_name(get_implementation(pool)) not in threads
