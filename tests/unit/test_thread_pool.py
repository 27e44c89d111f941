"""The application threads' pool (`corral.apps.wsgi.runner.ThreadPool`): real threads, real
blocking. No job waits while a thread is parked, whether jobs come one at a time (`submit`)
or as a loop turn's batch (`add`, then one `wake`); a busy pool runs every job once; shutdown
ends its threads."""

from __future__ import annotations

import threading
import time

from corral.apps.wsgi.runner import ThreadPool


def blocking_jobs(count: int) -> tuple[list, threading.Event, list[threading.Event]]:
    release = threading.Event()
    started = [threading.Event() for _ in range(count)]

    def job(index: int):
        def run() -> None:
            started[index].set()
            release.wait(10)

        return run

    return [job(i) for i in range(count)], release, started


def test_jobs_submitted_one_by_one_each_get_a_thread_while_others_block() -> None:
    pool = ThreadPool(4, "test-pool")
    jobs, release, started = blocking_jobs(4)
    try:
        for job in jobs:
            pool.submit(job)
        assert all(event.wait(2) for event in started)
    finally:
        release.set()
        pool.shutdown()


def test_a_batch_woken_once_spreads_over_the_parked_threads() -> None:
    pool = ThreadPool(4, "test-pool")
    jobs, release, started = blocking_jobs(8)
    try:
        for job in jobs:
            pool.add(job)
        pool.wake()
        # four threads, each blocked in a job: the first four run at once, the rest wait
        assert all(event.wait(2) for event in started[:4])
        time.sleep(0.2)
        assert not any(event.is_set() for event in started[4:])
        release.set()  # the four finish: the four waiting jobs run
        assert all(event.wait(2) for event in started[4:])
    finally:
        release.set()
        pool.shutdown()


def test_a_blocked_job_does_not_hold_up_the_ones_queued_behind_it() -> None:
    # one thread is busy in a job that blocks; jobs that come later go to the other threads,
    # even when the busy one was the last to look for work
    pool = ThreadPool(2, "test-pool")
    jobs, release, started = blocking_jobs(1)
    done = threading.Event()
    try:
        pool.submit(jobs[0])
        assert started[0].wait(2)
        pool.add(done.set)
        pool.wake()
        assert done.wait(2)
    finally:
        release.set()
        pool.shutdown()


def test_every_job_of_a_long_burst_runs_once() -> None:
    pool = ThreadPool(4, "test-pool")
    ran: list[int] = []
    finished = threading.Event()
    total = 20_000

    def job(index: int):
        def run() -> None:
            ran.append(index)
            if len(ran) == total:
                finished.set()

        return run

    try:
        for index in range(total):
            if index % 100 == 0:
                pool.wake()
            pool.add(job(index))
        pool.wake()
        assert finished.wait(20)
        assert sorted(ran) == list(range(total))
    finally:
        pool.shutdown()


def test_shutdown_ends_the_threads() -> None:
    pool = ThreadPool(3, "test-pool-end")
    pool.submit(lambda: None)
    pool.shutdown()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if not [t for t in threading.enumerate() if t.name.startswith("test-pool-end")]:
            break
        time.sleep(0.01)
    assert not [t for t in threading.enumerate() if t.name.startswith("test-pool-end")]
