"""The one timer of the benchmark scripts (``from _timing import median_time``): wall time, or
process CPU time with ``clock=time.process_time``."""
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
