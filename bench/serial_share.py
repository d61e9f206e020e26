"""Where one private EM iteration's time goes: the parallel kernel against everything serial.

Issue 14's many-core goal (90 % of a 16-core machine's ceiling) is lost to work that does not
run on every core: Python between kernel calls, the M-step, the noise, the sum of the
kernel's per-block partials, and blocks too few or too uneven to feed every thread.  This
script measures, for the issue's shapes, one private ``DPGaussianMixture`` iteration
(declared bounds, the default ``"gdp"`` accountant):

* ``kernel cpu``: CPU seconds inside the fused E-step calls (``_estep.estep_stats``) and the
  block-order sums of their partials (``_contract.sum_blocks``, parallel over entries), at
  ``n_threads=1``;
* ``serial cpu``: CPU seconds of the rest of the iteration at ``n_threads=1`` — what Amdahl's
  law charges at every thread count (CPU time, so a busy machine inflates it less than wall
  time);
* ``blocks``: the kernel's parallel units per call (``_estep.block_count``) for the
  engine's superblocks, and the wall speedup at ``--threads`` (2 on this machine).

``model share`` is Amdahl's prediction for a ``C``-times ceiling (``--ceiling``, 11.0 for the
issue's 16-core Xeon): ``T1 / (serial + kernel / min(C, balance)) / C`` where ``balance`` is
the block schedule's best case (blocks / ceil(blocks / threads) per call).  It is a model, not
a 16-core measurement; run this script on the many-core machine for the real figure::

    python bench/serial_share.py [--threads 2] [--scale 0.25]

``--scale`` shrinks n (memory: the largest shape holds 16e6 x 2 float64, 256 MB).
Per-iteration figures are differences of fits with 2 and 12 iterations (initialisation and
validation cancel); each is the best of ``--repeat`` runs.

``--serial`` (issue 26) prints instead the serial time of one iteration and its parts, at
small n, d <= 10 and K <= 5 (``SERIAL_SHAPES``), one thread, CPU time of the fitting thread
(``time.thread_time``: a busy machine inflates it less than wall time), per iteration from
fits of 2 and 102 iterations: ``release`` (``ReleaseLayer.release``: the iteration's noise
and its bookkeeping), of which ``keys`` (the releases' sub-key derivation), ``M-step``
(``_update``: the M-step and the precision Cholesky factors), ``E-face`` (the E-step's Python
face around the kernel calls: parameter checks, log normalizers, buffers, the mirror) and
``loop`` (the engine's loop and tail averaging, and the timers' own cost); ``serial`` is
their sum (every CPU second of the iteration outside the kernel calls).  These parts come from
an instrumented fit: about twenty clock reads per iteration (``time.thread_time``, ~0.6 us each
here) and the Python wrappers around the timed calls land in ``serial``, ``E-face`` and ``loop``,
which they inflate by some 20-30 us.  ``clean`` is the serial part without them: the iteration
of an uninstrumented fit (same 2 and 102 iterations, best of ``--repeat``) minus the kernel CPU
of the instrumented one (the cost of its clock reads inside the timed calls subtracted); ``it``
is that uninstrumented iteration.  Target: serial (clean) <= 0.1 ms::

    python bench/serial_share.py --serial [--repeat 5] [--threads 2]

With ``--threads T > 1`` two wall-clock columns follow: ``it@T``, an uninstrumented iteration's
wall time at T threads, and ``serial wall``, that less the kernel calls' wall time at T threads
(an instrumented fit's): what a T-thread machine waits on outside the kernels.  Since issue 41
the full-covariance M-step runs its components over the threads too (the same bits), so this is
below the one-thread CPU figure; a shared machine's wall clock is noisier than its CPU clock.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
import warnings

import numpy as np

from dpem_fast import DPGaussianMixture
from dpem_fast._dpcore import _contract, _estep
from dpem_fast._engine import _release
from dpem_fast._kernels import gmm as _stats

from _timing import Parts

ISSUE_SHAPES = [(4_000_000, 10, 5), (16_000_000, 2, 5), (1_000_000, 2, 5), (200_000, 50, 10)]
#: small n, d <= 10, K <= 5: where the serial part is what a many-core machine waits on
SERIAL_SHAPES = [(2_000, 10, 5), (2_000, 5, 5), (2_000, 2, 5), (2_000, 10, 3), (2_000, 2, 2)]


class _Counting:
    """A module whose parallel entry points (``estep_stats``, ``sum_blocks``) are timed."""

    def __init__(self, module, clock, cpu_clock=time.process_time):
        self._module, self._clock, self._cpu = module, clock, cpu_clock

    def __getattr__(self, name):
        fn = getattr(self._module, name)
        if name not in ("estep_stats", "sum_blocks"):
            return fn

        def timed(*args, **kwargs):
            c, w = self._cpu(), time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self._clock.cpu += self._cpu() - c
                self._clock.wall += time.perf_counter() - w
                self._clock.calls += 1
        return timed


class _Clock:
    cpu = wall = 0.0
    calls = 0


def serial_parts(X, K, repeat, parts, counter):
    """{part: ms per iteration} from fits of 2 and 102 iterations (best of ``repeat``, by
    total CPU time), one thread."""
    best = {}
    for J in (2, 102):
        runs = []
        for _ in range(repeat):
            parts.seconds.clear()
            counter.calls = 0
            cpu, _, kcpu, _ = _fit_times(X, K, J, 1, counter, clock=time.thread_time)
            runs.append(dict(parts.seconds, total=cpu, kernel=kcpu, calls=counter.calls))
        best[J] = min(runs, key=lambda r: r["total"])
    keys = set(best[2]) | set(best[102])
    return {k: (1e3 if k != "calls" else 1) * (best[102].get(k, 0.0) - best[2].get(k, 0.0)) / 100 for k in keys}


def clean_iteration(X, K, repeat):
    """ms of CPU per iteration of an uninstrumented fit (fits of 2 and 102 iterations, best of
    ``repeat``), one thread."""
    best = [min(_fit_times(X, K, J, 1, _Clock(), clock=time.thread_time)[0] for _ in range(repeat))
            for J in (2, 102)]
    return 1e3 * (best[1] - best[0]) / 100


def _clock_pair(clock=time.thread_time, n=2000):
    """Seconds between two back-to-back reads of ``clock`` (what a timed call adds to its time)."""
    t0 = clock()
    for _ in range(n):
        clock()
    return (clock() - t0) / n


def wall_iteration(X, K, threads, repeat, counter):
    """(iteration, kernel) wall ms per iteration at ``threads`` threads, from fits of 2 and 102
    iterations (each the fastest of ``repeat``)."""
    best = [min((_fit_times(X, K, J, threads, counter) for _ in range(repeat)), key=lambda r: r[1])
            for J in (2, 102)]
    return 1e3 * (best[1][1] - best[0][1]) / 100, 1e3 * (best[1][3] - best[0][3]) / 100


def print_serial(repeat, threads=1):
    """The ``--serial`` table (module docstring)."""
    clean, wall_it = {}, {}
    for n, d, K in SERIAL_SHAPES:          # before any wrapper is installed
        X = np.random.default_rng(0).uniform(-1.0, 1.0, size=(n, d))
        _fit_times(X, K, 1, 1, _Clock())
        clean[n, d, K] = clean_iteration(X, K, repeat)
        if threads > 1:
            wall_it[n, d, K] = wall_iteration(X, K, threads, repeat, _Clock())[0]
    pair = _clock_pair()
    counter = _Clock()
    _stats._estep, _stats._contract = _Counting(_estep, counter, time.thread_time), \
        _Counting(_contract, counter, time.thread_time)
    parts = Parts(time.thread_time)
    parts.wrap(_release.ReleaseLayer, "release", "release")
    parts.wrap(_release.KeyDeriver, "derive", "keys")
    parts.wrap(DPGaussianMixture, "_update", "mstep")
    from dpem_fast.mixture import _dp_gmm
    parts.wrap(_dp_gmm, "compute_stats", "estep")
    print("# serial part of one private GMM iteration (full covariances, declared box), 1 thread, "
          "CPU ms per iteration; target serial (clean) <= 0.1 ms; left of '|' an instrumented fit "
          "(its timers inflate serial), right of it an uninstrumented one (module docstring)")
    wall_head = f" | {f'it@{threads}':>7} {'serial wall':>11}" if threads > 1 else ""
    print(f"{'shape (n, d, K)':>18} {'iteration':>9} {'kernel':>7} {'serial':>7} {'release':>8} {'(keys)':>7} "
          f"{'M-step':>7} {'E-face':>7} {'loop':>7} | {'it':>6} {'clean':>6}{wall_head}")
    for n, d, K in SERIAL_SHAPES:
        X = np.random.default_rng(0).uniform(-1.0, 1.0, size=(n, d))
        _fit_times(X, K, 1, 1, counter)
        p = serial_parts(X, K, repeat, parts, counter)
        serial = p["total"] - p["kernel"]
        face = p.get("estep", 0.0) - p["kernel"]
        loop = serial - p.get("release", 0.0) - p.get("mstep", 0.0) - face
        kernel = p["kernel"] - 1e3 * pair * p["calls"]      # the timed calls' own clock reads out
        it = clean[n, d, K]
        wall = ""
        if threads > 1:         # the uninstrumented wall iteration less the kernel calls' wall
            wall = f" | {wall_it[n, d, K]:7.3f} {wall_it[n, d, K] - wall_iteration(X, K, threads, repeat, counter)[1]:11.3f}"
        print(f"{str((n, d, K)):>18} {p['total']:9.3f} {p['kernel']:7.3f} {serial:7.3f} {p.get('release', 0):8.3f} "
              f"{p.get('keys', 0):7.3f} {p.get('mstep', 0):7.3f} {face:7.3f} {loop:7.3f} | {it:6.3f} "
              f"{it - kernel:6.3f}{wall}", flush=True)


def _fit_times(X, K, J, threads, counter, clock=time.process_time):
    d = X.shape[1]
    model = DPGaussianMixture(K, epsilon=1.0, delta=1e-5, bounds=(np.full(d, -1.0), np.full(d, 1.0)),
                              max_iter=J, random_state=0, n_threads=threads)
    counter.cpu = counter.wall = 0.0
    c, w = clock(), time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")        # small fits warn that noise dominates: not timed
        model.fit(X)
    return clock() - c, time.perf_counter() - w, counter.cpu, counter.wall


def per_iteration(X, K, threads, repeat, counter):
    """(cpu, wall, kernel cpu, kernel wall) of one iteration: (fit(12) - fit(2)) / 10."""
    best = []
    for J in (2, 12):
        runs = [_fit_times(X, K, J, threads, counter) for _ in range(repeat)]
        best.append(min(runs, key=lambda r: r[1]))
    return [(b - a) / 10 for a, b in zip(*best)]


def block_layout(n, d, K):
    """Block counts of the kernel calls of one pass (one per superblock)."""
    rows = _contract.superblock_rows(d)
    return [_estep.block_count(min(rows, n - s), d, K) for s in range(0, n, rows)]


def balance(blocks, threads):
    """Best-case speedup of a dynamic schedule of equal blocks over ``threads`` threads."""
    return sum(blocks) / sum(math.ceil(b / threads) for b in blocks)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    p.add_argument("--scale", type=float, default=1.0, help="multiply every n by this")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--ceiling", type=float, default=11.0,
                   help="the machine's measured throughput ceiling at 16 threads (issue 14: 11.0)")
    p.add_argument("--serial", action="store_true", help="the serial part of an iteration at small n (issue 26)")
    args = p.parse_args(argv)
    if args.serial:
        print_serial(args.repeat, args.threads)
        return
    counter = _Clock()
    _stats._estep, _stats._contract = _Counting(_estep, counter), _Counting(_contract, counter)
    print(f"# serial share of one private GMM iteration; threads 1 and {args.threads}; "
          f"Amdahl model for a {args.ceiling}x ceiling at 16 threads")
    print(f"{'shape (n, d, K)':>22} {'1-thr ms':>9} {'kernel cpu':>10} {'serial cpu':>10} {'serial %':>8} "
          f"{'blocks/call':>12} {f'{args.threads}-thr ms':>9} {'speedup':>7} {'model share@16':>14}")
    for n, d, K in ISSUE_SHAPES:
        n = max(1000, int(n * args.scale))
        X = np.random.default_rng(0).uniform(-1.0, 1.0, size=(n, d))
        _fit_times(X, K, 1, 1, counter)                      # warm up (page faults, imports)
        cpu1, wall1, kcpu, _ = per_iteration(X, K, 1, args.repeat, counter)
        _, wallT, _, _ = per_iteration(X, K, args.threads, args.repeat, counter)
        serial = max(cpu1 - kcpu, 0.0)
        blocks = block_layout(n, d, K)
        par16 = min(args.ceiling, balance(blocks, 16))
        model = cpu1 / (serial + kcpu / par16) / args.ceiling
        shown = f"{blocks[0]}x{len(blocks)}" if len(set(blocks)) == 1 else "+".join(map(str, blocks))
        print(f"{str((n, d, K)):>22} {wall1 * 1e3:9.1f} {kcpu * 1e3:10.1f} {serial * 1e3:10.2f} "
              f"{100 * serial / cpu1:7.2f}% {shown:>12} {wallT * 1e3:9.1f} {wall1 / wallT:6.2f}x "
              f"{100 * model:13.0f}%")
        sys.stdout.flush()
        del X


if __name__ == "__main__":
    main()
