"""What a from-source install spends its time on: a clean meson build of the core, timed.

Configures the project in a temporary directory (release build, as pip does), builds it with
``ninja -j JOBS`` and prints the wall time, the CPU time of the build, and the compile steps
that took longest (from ninja's own log), grouped as Cython (``.pyx`` → C) and C compiler.

    python bench/build_time.py [--jobs 2] [--top 8]

Needs ``meson``, ``ninja`` and Cython on the path (``pip install meson ninja Cython``).
The numbers are the issue-39 "install time" benchmark line: the README quotes the time of the
whole first set-up command, which adds dependency installation to the build measured here.
"""
import argparse
import os
import pathlib
import resource
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _steps(build_dir):
    """(seconds, output) of every step in ninja's log, longest first."""
    rows = []
    for line in (build_dir / ".ninja_log").read_text().splitlines():
        if line.startswith("#"):
            continue
        start, end, _, out, _ = line.split("\t")
        rows.append(((int(end) - int(start)) / 1e3, out))
    return sorted(rows, reverse=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=os.cpu_count())
    ap.add_argument("--top", type=int, default=8)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        build = pathlib.Path(tmp) / "build"
        subprocess.run(["meson", "setup", str(build), "-Dbuildtype=release"], cwd=ROOT,
                       check=True, stdout=subprocess.DEVNULL)
        cpu0, t0 = _children_cpu(), time.perf_counter()
        subprocess.run(["ninja", "-C", str(build), f"-j{args.jobs}"], check=True,
                       stdout=subprocess.DEVNULL)
        wall, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
        steps = _steps(build)
    cython = sum(s for s, o in steps if o.endswith(".c") and ".pyx" in o)
    compile_ = sum(s for s, o in steps if o.endswith(".o"))
    modules = sum(1 for _, o in steps if o.endswith(".so"))
    print(f"{modules} extension modules, ninja -j{args.jobs}: wall {wall:.1f} s, "
          f"CPU {cpu:.1f} s; step time: Cython {cython:.1f} s, C compiler {compile_:.1f} s")
    for s, o in steps[:args.top]:
        print(f"  {s:7.1f} s  {o.split('/')[-1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
