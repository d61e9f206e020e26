"""The timers of the benchmark scripts (``from _timing import median_time, Parts``): wall time,
or process CPU time with ``clock=time.process_time``."""
import statistics
import time


def median_time(fn, repeat, *, warmup=False, clock=time.perf_counter):
    """Median wall time in seconds of ``repeat`` calls of ``fn`` (after one untimed call if
    ``warmup``); ``clock=time.process_time`` gives the process CPU time instead."""
    if warmup:
        fn()
    times = []
    for _ in range(repeat):
        t0 = clock()
        fn()
        times.append(clock() - t0)
    return statistics.median(times)


class Parts:
    """Seconds spent inside wrapped callables, by part: ``parts.wrap(owner, "name", "part")``
    replaces ``owner.name`` by a timed copy; ``parts.seconds`` sums ``clock`` per part
    (``time.perf_counter`` wall, ``time.thread_time`` CPU of the calling thread)."""

    def __init__(self, clock=time.perf_counter):
        self.clock = clock
        self.seconds = {}

    def wrap(self, owner, name, part):
        fn = getattr(owner, name)

        def timed(*args, **kwargs):
            t = self.clock()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[part] = self.seconds.get(part, 0.0) + self.clock() - t
        setattr(owner, name, timed)
