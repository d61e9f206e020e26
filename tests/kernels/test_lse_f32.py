"""The float32 path's log-sum-exp (dpc_f32.h: dpf_exp_neg, dpf_log_pos, dpf_lse; issue 41)
against the numpy float64 twin (dpem_fast._reference.gmm.responsibilities_reference), in this
CPU's clone through the library and in every clone's code built here (below).

Error bounds (u = 2^-24, the float unit roundoff; measured maxima over these inputs and 2e6
more uniform in [-87, 0]):

* ``exp`` (float): at most 1.5 ulp and 2 u relative from exp of the float argument, for every
  x >= -87 (measured: 0.89 ulp, 1.26 u with FMA -- the x86-64-v3 and v4 clones --, 1.20 ulp,
  1.69 u without -- the baseline clone); exactly +0 below -87 and for -inf; never a denormal.
* ``log`` (float64, per row): dpe_log_pos's operations; 2^-51 relative (measured: 2^-52).
* responsibilities: e_k = exp(fl(L_k - max)) carries (2 + |x_k|) u relative (the exp, and the
  rounding of its argument x_k = L_k - max: at most |x_k| u absolute); s = sum_k e_k in
  float64 the e_k-weighted mean of those plus K 2^-53; gamma_k = (float)(e_k (1 / s)) one more
  u.  Asserted: |gamma_k - ref_k| <= ((5 + |x_k| + S) u + K 2^-53) ref_k + e^-87 (an exp cut
  to 0), S = sum_k ref_k |x_k| (measured: up to 0.95 of the bound, where |x_k| is just above
  a power of 2 and its rounding is the largest).
* log-likelihood: ll = max + log(s) in float64: |ll - ref| <= (4 + S) u + 2^-52 |ref|
  (measured: 0.09 of the bound).
"""
import ctypes
import platform
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from dpem_fast._dpcore import _contract, _estep
from dpem_fast._reference.gmm import responsibilities_reference

HERE = Path(__file__).resolve().parent
HEADERS = HERE.parents[1] / "src" / "dpcore"
U = 2.0 ** -24
CHUNK = _contract.CHUNK_SIZE
TINY = float(np.finfo(np.float32).tiny)
CUT = float(np.exp(np.float64(-87.0)) * (1 + 2.0 ** -16))   # the most a cut (to 0) exp can lose


def ulps(got, ref):
    """|got - ref| in units of the float spacing at ref (ref > 0, float64)."""
    return np.abs(got.astype(np.float64) - ref) / np.spacing(ref.astype(np.float32)).astype(np.float64)


def exp_args(rng):
    """x <= 0: uniform over the float range of the exp, small, near the cut, very negative, -inf."""
    return np.concatenate([
        -rng.uniform(0, 87.5, 200_000), -np.geomspace(1e-30, 1, 2000), -rng.uniform(86.9, 87.1, 20_000),
        -87.0 + np.arange(-50, 51) * 2.0 ** -17, -rng.uniform(88, 1e6, 5000),
        [0.0, -0.0, -1e30, -3.4e38, -np.inf]]).astype(np.float32)


def test_exp_ulp_bound_and_cut(impl=_estep):
    x = exp_args(np.random.default_rng(0))
    y, lg = np.empty_like(x), np.empty(0)
    impl._exp_log_f32_wrapper(x, y, np.empty(0), lg)
    ok = x >= -87
    ref = np.exp(x[ok].astype(np.float64))
    assert ulps(y[ok], ref).max() <= 1.5
    assert np.all(np.abs(y[ok] - ref) <= 2 * U * ref)
    assert np.all(y[~ok] == 0.0) and not np.any(np.signbit(y))
    assert y[x == 0].tolist() == [1.0, 1.0]
    assert np.all(y[ok] >= TINY)                      # no denormals
    assert not np.any(np.isnan(y))


def test_log_matches_numpy(impl=_estep):
    rng = np.random.default_rng(1)
    s = np.concatenate([1.0 + rng.uniform(0, 1, 50_000) * rng.choice([1, 10, 1000, 1e6], 50_000),
                        np.sqrt(2.0) * (1 + np.arange(-40, 41) * 2.0 ** -52), 2.0 ** np.arange(-1000, 1000, 7.0),
                        rng.uniform(1, 512, 10_000), [1.0, 2.0, 512.0]])
    lg = np.empty_like(s)
    impl._exp_log_f32_wrapper(np.empty(0, np.float32), np.empty(0, np.float32), s, lg)
    ref = np.log(s)
    assert np.all(np.abs(lg - ref) <= 2.0 ** -51 * np.abs(ref))
    assert lg[s == 1.0].tolist() == [0.0]


def log_densities(rng, n, K, spread):
    """(K, n) float log densities like the E-step's: rows of spread up to ``spread``, an empty
    component (-inf), a few very negative entries, columns whose runner-up is below the cut."""
    L = (rng.normal(size=(K, n)) * rng.uniform(0.1, spread, n) - rng.uniform(0, 50, n)).astype(np.float32)
    if K > 2:
        L[K // 2] = -np.inf                          # log pi_k = -inf: an empty component
        L[1, ::7] = -3e38
        L[0, ::11] = L[2, ::11] - 100.0              # below exp's cut: exactly 0
    return L


@pytest.mark.parametrize("n,K,spread", [(1, 1, 1.0), (257, 2, 3.0), (3000, 5, 30.0), (2000, 12, 200.0),
                                        (700, 64, 50.0), (300, 512, 20.0), (1000, 3, 1e4)])
def test_lse_matches_the_twin(n, K, spread, impl=_estep):
    L = log_densities(np.random.default_rng(K + n), n, K, spread)
    ref, ref_ll = responsibilities_reference(L.T)
    ref = ref.T
    g, ll = L.copy(), np.empty(n)
    impl._lse_f32_wrapper(g, ll)
    assert not np.any(np.isnan(g)) and not np.any(np.isnan(ll))
    x = np.abs(L.astype(np.float64) - L.max(axis=0))
    x[~np.isfinite(x)] = 0.0
    S = (ref * x).sum(axis=0)
    assert np.all(np.abs(g - ref) <= ((5 + x + S) * U + K * 2.0 ** -53) * ref + CUT)
    assert np.all(np.abs(ll - ref_ll) <= (4 + S) * U + 2.0 ** -52 * np.abs(ref_ll))
    assert np.all(g[~np.isfinite(L)] == 0.0)         # empty components: exactly 0
    cut = L - L.max(axis=0) < -87                   # the float argument, as the kernel rounds it
    assert np.all(g[cut] == 0.0)                     # underflow to 0
    assert np.all(g.sum(axis=0, dtype=np.float64) <= 1 + (K + 1) * U)


def test_lse_single_finite_component_is_one(impl=_estep):
    L = np.full((6, 300), -np.inf, dtype=np.float32)
    L[2] = np.random.default_rng(3).normal(scale=1e3, size=300).astype(np.float32)
    g, ll = L.copy(), np.empty(300)
    impl._lse_f32_wrapper(g, ll)
    assert np.all(g[2] == 1.0) and np.all(g[[0, 1, 3, 4, 5]] == 0.0)
    assert np.array_equal(ll, L[2].astype(np.float64))


# ------------------------------------------------------------------ every clone, here
# Each clone's code built on its own (-march=..., no clones; the library's flags) into a small
# shared library: GCC must report every row loop of the log-sum-exp vectorised (SSE2: 4 floats,
# AVX2: 8, AVX-512: 16), and where this CPU runs that target, the same twin bounds hold.

C_SOURCE = """#include "dpc_f32.h"
void lse(float *L, ptrdiff_t K, ptrdiff_t nr, ptrdiff_t npad, double *ll, double *tmp)
{ dpf_lse(L, K, DPC_CHUNK_SIZE, nr, npad, ll, tmp); }
void rows(const float *x, float *y, ptrdiff_t nx, const double *s, double *lg, ptrdiff_t ns)
{ dpf_exp_log_rows(x, y, nx, s, lg, ns); }
int runs_v3(void) { __builtin_cpu_init(); return __builtin_cpu_supports("x86-64-v3"); }
int runs_v4(void) { __builtin_cpu_init(); return __builtin_cpu_supports("x86-64-v4"); }
"""
CFLAGS = ["-O3", "-std=c11", "-fno-math-errno", "-ffp-contract=fast", "-DDPC_NO_CLONES", "-shared", "-fPIC"]


def _lse_loop_lines():
    """Line numbers of the arithmetic row loops of dpf_colmax, dpf_lse and dpf_exp_log_rows in
    dpc_f32.h (the max, exp, log, normalisation; the hook's exp and log)."""
    lines = (HEADERS / "dpc_f32.h").read_text().splitlines()
    out, inside = [], False
    for i, line in enumerate(lines, 1):
        if re.match(r"(DPE_CLONES )?static (inline )?void dpf_(colmax|lse|exp_log_rows)\(", line):
            inside = True
        elif line == "}":
            inside = False
        elif inside and re.search(r"for \((r|i) = 0; (r|i) < (npad|nx|ns); (r|i)\+\+\)", line):
            if not re.search(r"\] = (L\[r\]|0\.0);", line):      # a copy, a zeroing: memmove, memset
                out.append(i)
    return out


class Clone:
    """One clone's dpf_lse and dpf_exp_log_rows through ctypes (the _estep wrappers' interface)."""

    def __init__(self, path):
        f, d, p = ctypes.POINTER(ctypes.c_float), ctypes.POINTER(ctypes.c_double), ctypes.c_ssize_t
        self.lib = ctypes.CDLL(str(path))
        self.lib.lse.argtypes = [f, p, p, p, d, d]
        self.lib.rows.argtypes = [f, f, p, d, d, p]

    def _exp_log_f32_wrapper(self, x, y, s, lg):
        f, d = ctypes.POINTER(ctypes.c_float), ctypes.POINTER(ctypes.c_double)
        self.lib.rows(x.ctypes.data_as(f), y.ctypes.data_as(f), len(x), s.ctypes.data_as(d), lg.ctypes.data_as(d),
                      len(s))

    def _lse_f32_wrapper(self, L, out_ll):
        f, d = ctypes.POINTER(ctypes.c_float), ctypes.POINTER(ctypes.c_double)
        K, n = L.shape
        ll, tmp = np.empty(CHUNK), np.empty(2 * CHUNK)
        for c in range(0, n, CHUNK):
            nr = min(CHUNK, n - c)
            npad = -(-nr // 16) * 16
            buf = np.empty((K, CHUNK), np.float32)
            buf[:, :npad] = L[:, c:c + 1]
            buf[:, :nr] = L[:, c:c + nr]
            self.lib.lse(buf.ctypes.data_as(f), K, nr, npad, ll.ctypes.data_as(d), tmp.ctypes.data_as(d))
            L[:, c:c + nr], out_ll[c:c + nr] = buf[:, :nr], ll[:nr]


@pytest.fixture(scope="module", params=["x86-64", "x86-64-v3", "x86-64-v4"])
def clone(request, tmp_path_factory):
    """(march, GCC's vectorisation report, the Clone or None where this CPU cannot run it)."""
    if platform.machine().lower() not in ("x86_64", "amd64") or shutil.which("gcc") is None:
        pytest.skip("needs GCC on x86-64")
    if not (HEADERS / "dpc_f32.h").is_file():
        pytest.skip("needs the kernels' sources")
    march, tmp = request.param, tmp_path_factory.mktemp(request.param)
    (tmp / "lse.c").write_text(C_SOURCE)
    out = subprocess.run(["gcc", *CFLAGS, f"-march={march}", "-fopt-info-vec-optimized", "-I", str(HEADERS),
                          str(tmp / "lse.c"), "-o", str(tmp / "lse.so")],
                         capture_output=True, text=True, timeout=300, check=True).stderr
    subprocess.run(["gcc", *CFLAGS, "-march=x86-64", str(tmp / "lse.c"), "-I", str(HEADERS), "-o",
                    str(tmp / "probe.so")], capture_output=True, timeout=300, check=True)
    probe = ctypes.CDLL(str(tmp / "probe.so"))
    runs = {"x86-64": 1, "x86-64-v3": probe.runs_v3(), "x86-64-v4": probe.runs_v4()}[march]
    return march, out, Clone(tmp / "lse.so") if runs else None


def test_every_loop_vectorises(clone):
    march, report, _ = clone
    done = {int(m) for m in re.findall(r"dpc_f32\.h:(\d+):\d+: optimized: loop vectorized", report)}
    loops = _lse_loop_lines()
    assert len(loops) == 6
    assert not set(loops) - done, f"{march}: {report}"


def _runs(clone):
    if clone[2] is None:
        pytest.skip(f"this CPU does not run {clone[0]} code")
    return clone[2]


def test_clone_exp_and_log(clone):
    test_exp_ulp_bound_and_cut(_runs(clone))
    test_log_matches_numpy(_runs(clone))


@pytest.mark.parametrize("n,K,spread", [(3000, 5, 30.0), (700, 64, 50.0), (300, 512, 20.0)])
def test_clone_lse(clone, n, K, spread):
    test_lse_matches_the_twin(n, K, spread, _runs(clone))
    test_lse_single_finite_component_is_one(_runs(clone))
