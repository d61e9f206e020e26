"""Rows from disk: in memory vs memory-mapped vs streamed, one pass and a private fit.

Writes an n x d float64 ``.npy`` file (default 10^7 x 10, 763 MiB) to ``--dir`` with plain
writes, then reads it three ways, each in a fresh subprocess so that its peak resident memory
is its own:

* ``memory``: ``np.load(path)``, the whole array in RAM;
* ``memmap``: ``np.load(path, mmap_mode="r")``, pages read by the OS (the page cache they
  occupy is counted in RSS while mapped, but the OS can reclaim it);
* ``stream``: ``dpem_fast.io.NpyBlocks(path, block_rows=...)``, plain reads into one block
  buffer, regrouped by ``as_row_source`` into superblocks of ``superblock_rows(d)`` rows.

Two measurements per source:

* ``pass``: one full pass over ``as_row_source(X, superblock_rows(d)).superblocks()`` with
  ``superblock.sum(axis=0)`` standing in for the E-step (time includes ``np.load``);
* ``fit`` (skip with ``--no-fit``): ``DPGaussianMixture(K, epsilon=1, data_norm=10,
  max_iter=J).fit(X)``; rows/s per iteration is n * J / fit time (a fit reads the rows J + 1
  times: one validation pass and one pass per iteration).  A fit that fails is reported with
  its error, and the other measurements still run.

Peak RSS is ``VmHWM`` from ``/proc/self/status``, which starts afresh at exec.
``ru_maxrss`` is printed beside it, but it is misleading here: Linux carries it across
``fork`` + ``exec``, so a child reports at least the parent's peak.  ``--cold`` evicts the
file from the page cache (``posix_fadvise(DONTNEED)``, this file only) before each child, so
that every source reads from the disk; without it, all three read a page-cached file.
The script checks that the three sources give bit-identical pass sums and fits, and deletes
the file at the end (``--keep`` keeps it, and a kept file of the same shape is reused).

    python bench/bench_out_of_core.py [--n 10000000] [--d 10] [--K 5] [--max-iter 3]
        [--threads N] [--block-rows 65536] [--dir DIR] [--keep] [--cold] [--no-fit]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

SOURCES = ("memory", "memmap", "stream")

_CHILD = r"""
import json, resource, sys, time
import numpy as np
from dpem_fast._dpcore._contract import superblock_rows
from dpem_fast.io import NpyBlocks, as_row_source

a = json.loads(sys.argv[1])

def hwm_kib():   # this process's own peak RSS (VmHWM starts afresh at exec, unlike ru_maxrss)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])

base = hwm_kib()
out = {}
t0 = time.perf_counter()
X = {"memory": lambda: np.load(a["path"]), "memmap": lambda: np.load(a["path"], mmap_mode="r"),
     "stream": lambda: NpyBlocks(a["path"], block_rows=a["block_rows"])}[a["source"]]()
if a["task"] == "pass":
    total = np.zeros(a["d"])
    for block in as_row_source(X, superblock_rows(a["d"])).superblocks():
        total += block.sum(axis=0)                      # stand-in for the E-step
    out["result"] = total.tolist()
else:
    from dpem_fast import DPGaussianMixture
    try:
        g = DPGaussianMixture(a["K"], epsilon=1.0, data_norm=a["data_norm"], max_iter=a["J"],
                              random_state=7, n_threads=a["threads"]).fit(X)
        out["result"] = [g.weights_.tolist(), g.means_.tolist()]
    except Exception as exc:                            # until a source is accepted: say why
        out["error"] = f"{type(exc).__name__}: {exc}"
out.update(seconds=time.perf_counter() - t0, peak_kib=hwm_kib(), base_kib=base,
           ru_maxrss_kib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
print(json.dumps(out))
"""


def _write(path, n, d, K, seed=0):
    """An n x d float64 .npy file of K Gaussian clusters, written in chunks with plain writes."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=3.0, size=(K, d))
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(
            f, {"descr": np.lib.format.dtype_to_descr(np.dtype(np.float64)), "fortran_order": False,
                "shape": (n, d)})
        for r0 in range(0, n, 1_000_000):
            m = min(1_000_000, n - r0)
            (centres[rng.integers(K, size=m)] + rng.normal(size=(m, d))).tofile(f)
        f.flush()
        os.fsync(f.fileno())


def _evict(path):
    """Drop this file's pages from the page cache (clean pages only: the file was fsync-ed)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def _run(task, source, args, path):
    if args.cold:
        _evict(path)
    spec = {"task": task, "source": source, "path": path, "d": args.d, "K": args.K, "J": args.max_iter,
            "threads": args.threads, "block_rows": args.block_rows, "data_norm": args.data_norm}
    out = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(spec)], capture_output=True, text=True,
                         check=False)
    if out.returncode:
        return {"error": f"exit {out.returncode}: {out.stderr.strip().splitlines()[-1:]}"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def _table(title, results, rows_done, size_mib):
    print(title)
    print(f"  {'source':<7} {'s':>7} {'rows/s':>12} {'peak RSS MiB':>13} {'net of start':>13} "
          f"{'x size(X)':>10} {'ru_maxrss MiB':>14}")
    for source, r in results.items():
        if "error" in r:
            print(f"  {source:<7} failed: {r['error']}")
            continue
        peak, net = r["peak_kib"] / 1024, (r["peak_kib"] - r["base_kib"]) / 1024
        print(f"  {source:<7} {r['seconds']:7.2f} {rows_done / r['seconds']:12.4g} {peak:13,.0f} {net:13,.0f} "
              f"{net / size_mib:10.3f} {r['ru_maxrss_kib'] / 1024:14,.0f}")
    ok = [r["result"] for r in results.values() if "result" in r]
    if len(ok) == len(results) > 1:
        print(f"  bit-identical across the sources: {all(x == ok[0] for x in ok)}")
    print()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000_000)
    ap.add_argument("--d", type=int, default=10)
    ap.add_argument("--K", type=int, default=5)
    ap.add_argument("--max-iter", type=int, default=3)
    ap.add_argument("--data-norm", type=float, default=10.0)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--block-rows", type=int, default=65536)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--keep", action="store_true", help="keep the .npy file (and reuse it next time)")
    ap.add_argument("--cold", action="store_true", help="evict the file from the page cache before each read")
    ap.add_argument("--no-fit", dest="fit", action="store_false", help="measure the single pass only")
    args = ap.parse_args(argv)

    from dpem_fast._dpcore._contract import superblock_rows

    path = os.path.join(args.dir, f"dpem_ooc_{args.n}x{args.d}.npy")
    reused = os.path.exists(path) and np.load(path, mmap_mode="r").shape == (args.n, args.d)
    if not reused:
        _write(path, args.n, args.d, args.K)
    try:
        size_mib = os.path.getsize(path) / 2**20
        print(f"X: {args.n:,} x {args.d} float64, {size_mib:,.0f} MiB on disk ({path}{', reused' if reused else ''}); "
              f"{'cold (evicted before each read)' if args.cold else 'page-cached'}; superblock_rows = "
              f"{superblock_rows(args.d):,}; NpyBlocks block_rows = {args.block_rows:,}\n")
        passes = {s: _run("pass", s, args, path) for s in SOURCES}
        _table("One pass: read + superblock.sum(axis=0) (time includes np.load)", passes, args.n, size_mib)
        if args.fit:
            fits = {s: _run("fit", s, args, path) for s in SOURCES}
            _table(f"DPGaussianMixture({args.K}, epsilon=1, data_norm={args.data_norm:g}, max_iter={args.max_iter})"
                   f".fit, threads = {args.threads or 'all'}: rows/s per iteration = n * J / fit time",
                   fits, args.n * args.max_iter, size_mib)
    finally:
        if not args.keep:
            os.remove(path)


if __name__ == "__main__":
    main()
