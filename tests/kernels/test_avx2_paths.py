"""The AVX2 + FMA paths of the float64 E-step kernels give the x86-64-v3 clones' bits.

On a CPU whose target_clones resolver picks the x86-64-v3 clone (AVX2, no AVX-512), the
kernels run hand-written AVX2 code instead (``dpc_simd.h``: ``dpe_avx2_path``).  Every
kernel test then exercises the AVX2 path against the numpy twins; this one compiles
``avx2_paths.c`` from the kernels' headers with the library's flags and checks, bit for
bit on random chunks, that each AVX2 function equals the clone it replaces (the same
operations per lane, in the same order, with the same FMA contractions), so seeded
results did not change.  Skipped without GCC on x86-64, without the sources, or on a CPU
that does not run the x86-64-v3 clone.
"""
import platform
import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
HEADERS = HERE.parents[1] / "src" / "dpcore"
# meson.build: buildtype=release (-O3), c_std=c11, -fno-math-errno, and -ffp-contract=fast
# for the E-step modules (the clones' FMA contractions)
CFLAGS = ["-O3", "-std=c11", "-fno-math-errno", "-ffp-contract=fast"]


@pytest.mark.slow    # ~25 s: GCC compiles every clone of the kernels
@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="x86-64 only")
@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs GCC (target_clones)")
@pytest.mark.skipif(not (HEADERS / "dpc_gmm.h").is_file(), reason="needs the kernels' sources")
def test_avx2_paths_equal_x86_64_v3_clones(tmp_path):
    exe = tmp_path / "avx2_paths"
    subprocess.run(["gcc", *CFLAGS, "-I", str(HEADERS), str(HERE / "avx2_paths.c"), "-o", str(exe)],
                   check=True, capture_output=True, timeout=600)
    proc = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    if proc.returncode == 77:
        pytest.skip("this CPU does not run the x86-64-v3 clone (no AVX2 path)")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "all equal"
