"""A private Gaussian mixture fitted from disk: in memory vs memory-mapped vs streamed.

Writes an n x d float64 ``.npy`` file (default 10^7 x 10, 800 MB) to ``--dir``, then fits
``DPGaussianMixture(K, epsilon=1, data_norm=..., max_iter=J)`` on it three ways, each in a
fresh subprocess so that peak resident memory (``VmHWM`` of ``/proc/self/status``) is its own:

* ``memory``: ``np.load(path)`` — the whole array in RAM;
* ``memmap``: ``np.load(path, mmap_mode="r")`` — pages read by the OS (the page cache they
  occupy is counted in RSS while mapped, but it is reclaimable);
* ``stream``: ``dpem_fast.io.NpyBlocks(path, block_rows=...)`` — plain reads into one block
  buffer; the engine regroups blocks into superblocks of about 64 MiB.

It prints rows per second of EM work (n * J / fit time; a fit reads the file J + 1 times:
one validation pass, one pass per iteration), the peak RSS next to the size of X, and
checks that the three fits are bit-identical (same seed, same superblocks).

    python bench/bench_out_of_core.py [--n 10000000] [--d 10] [--K 5] [--max-iter 3]
                                      [--threads N] [--dir DIR] [--keep]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

_CHILD = r"""
import json, sys, time
import numpy as np
from dpem_fast import DPGaussianMixture
from dpem_fast.io import NpyBlocks
mode, path, K, J, threads, block_rows = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), \
    (None if sys.argv[5] == "None" else int(sys.argv[5])), int(sys.argv[6])
def hwm_kib():   # this process's own peak RSS (VmHWM starts afresh at exec, unlike ru_maxrss)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
base = hwm_kib()
t0 = time.perf_counter()
X = {"memory": lambda: np.load(path), "memmap": lambda: np.load(path, mmap_mode="r"),
     "stream": lambda: NpyBlocks(path, block_rows=block_rows)}[mode]()
g = DPGaussianMixture(K, epsilon=1.0, delta=1e-5, max_iter=J, data_norm=8.0, random_state=7,
                      n_threads=threads).fit(X)
t = time.perf_counter() - t0
peak = hwm_kib()
print(json.dumps({"seconds": t, "peak_kib": peak, "base_kib": base,
                  "means": g.means_.tolist(), "weights": g.weights_.tolist()}))
"""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000_000)
    ap.add_argument("--d", type=int, default=10)
    ap.add_argument("--K", type=int, default=5)
    ap.add_argument("--max-iter", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--block-rows", type=int, default=65536)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args(argv)

    path = os.path.join(args.dir, f"dpem_ooc_{args.n}x{args.d}.npy")
    if not os.path.exists(path):
        rng = np.random.default_rng(0)
        X = np.lib.format.open_memmap(path, mode="w+", dtype=np.float64, shape=(args.n, args.d))
        centres = rng.normal(scale=3.0, size=(args.K, args.d))
        for r0 in range(0, args.n, 1_000_000):
            m = min(1_000_000, args.n - r0)
            X[r0:r0 + m] = centres[rng.integers(args.K, size=m)] + rng.normal(size=(m, args.d))
        X.flush()
        del X
    size_mib = args.n * args.d * 8 / 2**20
    print(f"X: {args.n:,} x {args.d} float64 = {size_mib:,.0f} MiB on disk ({path}); K = {args.K}, "
          f"J = {args.max_iter} iterations, threads = {args.threads or 'all'}, NpyBlocks block_rows = "
          f"{args.block_rows:,}\n")
    results = {}
    for mode in ("memory", "memmap", "stream"):
        out = subprocess.run([sys.executable, "-c", _CHILD, mode, path, str(args.K), str(args.max_iter),
                              str(args.threads), str(args.block_rows)],
                             capture_output=True, text=True, check=False)
        if out.returncode:
            print(f"{mode}: failed\n{out.stderr}")
            continue
        results[mode] = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"{'source':<8} {'fit s':>8} {'rows/s (EM work)':>18} {'peak RSS MiB':>13} {'net of start':>13} {'x size(X)':>10}")
    for mode, r in results.items():
        peak, net = r["peak_kib"] / 1024, (r["peak_kib"] - r["base_kib"]) / 1024
        print(f"{mode:<8} {r['seconds']:8.2f} {args.n * args.max_iter / r['seconds']:18,.0f} {peak:13,.0f} "
              f"{net:13,.0f} {net / size_mib:10.3f}")
    if len(results) == 3:
        same = all(results[m]["means"] == results["memory"]["means"] for m in results)
        print(f"\nfits bit-identical across the three sources: {same}")
    if not args.keep:
        os.remove(path)


if __name__ == "__main__":
    main()
