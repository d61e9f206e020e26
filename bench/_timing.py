"""The one wall-clock timer of the benchmark scripts (``from _timing import median_time``)."""
import statistics
import time


def median_time(fn, repeat, *, warmup=False):
    """Median wall time in seconds of ``repeat`` calls of ``fn`` (after one untimed call if
    ``warmup``)."""
    if warmup:
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)
