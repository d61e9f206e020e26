"""The float32 path of the GMM E-step kernels (float32 rows in single precision with float64
accumulation; issue 26): against the numpy twin on the clipped-then-rounded rows (a float32
tolerance), identical for every thread count, its fallbacks to float64, and the sensitivity
widening derived for its rounding (dpem_fast._engine._specs, "Float32 rows")."""
import math
import platform
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from dpem_fast._dpcore import _contract, _estep, _estep_diag
from dpem_fast._engine import StatSpec
from dpem_fast._engine._specs import (FLOAT32_WIDENING, float32_rounding_factor, float32_specs, second_moments,
                                      soft_counts, weighted_sums)
from dpem_fast._kernels.gmm import _params, compute_stats, compute_stats_diag, single_parameters
from dpem_fast._preprocess import clip_target, resolve_domain, scale_and_clip
from dpem_fast._reference.gmm import estep_diag_stats_reference, estep_stats_reference
from plain_stats import plain

CHUNK = _contract.CHUNK_SIZE
HERE = Path(__file__).resolve().parent
HEADERS = HERE.parents[1] / "src" / "dpcore"
#: float32 tolerance against the float64 twin on the same (rounded) rows: the log-densities and
#: responsibilities carry float rounding (relative ~1e-7 of the Mahalanobis terms), the sums
#: about 64 u relative
RTOL = 2e-5
R = 12.0        # the declared data_norm: rows in the original units map to x / R


def problem(n, d, K, seed=0, triangular=True):
    """Float32 rows in the original units, their domain, and parameters in working units."""
    rng = np.random.default_rng(seed)
    means = rng.normal(scale=3.0, size=(K, d))
    P = np.empty((K, d, d))
    for k in range(K):
        A = rng.normal(size=(d, d))
        L = np.linalg.cholesky(A @ A.T / d + 0.5 * np.eye(d))
        P[k] = np.linalg.solve(L, np.eye(d)).T
        if not triangular:
            P[k] = P[k] @ np.linalg.qr(rng.normal(size=(d, d)))[0]
    X = means[rng.integers(K, size=n)] + rng.normal(size=(n, d)) * 1.5
    X[::17] *= 4.0                                  # some rows beyond the ball: clipped
    return X.astype(np.float32), resolve_domain(d, R, None), rng.dirichlet(np.ones(K)), means / R, P * R


def float_clip(X, domain):
    """The twin of the float32 path's loader (``dpf_load_domain32``, issue 41): the box rounded
    inward to floats, clip, centre and scale in float32, the squared norm summed in float64
    in feature order, rows beyond 1 rescaled to ``clip_target`` in float64 and rounded; a row
    whose float map overflows is clipped in float64 and rounded.  Returns (rows, n_clipped)."""
    lo, hi, c, inv = domain.loader_array()
    lo32, hi32 = lo.astype(np.float32), hi.astype(np.float32)
    lo32 = np.where(lo32.astype(np.float64) < lo, np.nextafter(lo32, np.float32(np.inf)), lo32)
    hi32 = np.where(hi32.astype(np.float64) > hi, np.nextafter(hi32, np.float32(-np.inf)), hi32)
    X = np.asarray(X, dtype=np.float32)
    boxed = np.any((X < lo32) | (X > hi32), axis=1)
    with np.errstate(over="ignore", invalid="ignore"):
        u = (np.clip(X, lo32, hi32) - c.astype(np.float32)) * inv.astype(np.float32)
    s = np.zeros(X.shape[0])
    for j in range(X.shape[1]):
        s = s + u[:, j].astype(np.float64) ** 2
    over = s > 1.0
    target = clip_target(X.shape[1], np.float64)
    fine = over & np.isfinite(s)
    u[fine] = (u[fine].astype(np.float64) * (target / np.sqrt(s[fine]))[:, None]).astype(np.float32)
    huge = over & ~np.isfinite(s)
    if huge.any():
        u[huge] = scale_and_clip(X[huge].astype(np.float64), domain)[0].astype(np.float32)
    return u, int(np.count_nonzero(boxed | over))


def rounded_rows(X, domain):
    """What the float32 path computes on: rows clipped in float (float_clip)."""
    return float_clip(X, domain)[0]


def assert_close(got, ref, rtol=RTOL):
    got, ref = plain(got), plain(ref)
    assert got["n_rows"] == ref["n_rows"]
    for name in ("counts", "first_moments", "second_moments"):
        scale = max(1.0, np.abs(ref[name]).max(initial=0.0))
        assert_allclose(got[name], ref[name], rtol=rtol, atol=rtol * scale, err_msg=name)
    assert_allclose(got["loglik"], ref["loglik"], rtol=rtol, atol=rtol * got["n_rows"])


FULL_SHAPES = [
    (1, 1, 1),
    (CHUNK - 7, 2, 5),        # n < chunk
    (3 * CHUNK + 17, 10, 3),  # n % chunk != 0
    (2000, 1, 4),             # d == 1
    (1500, 4, 1),             # K == 1
    (700, 15, 3),             # largest hand-loop d
    (700, 16, 3),             # smallest tiled d (s2 pieces of F32_LANE_ROWS rows)
    (900, 23, 2),             # tiles' last columns: 23 % 6 == 5, 23 % 4 == 3
    (600, 70, 4),
    (70 * CHUNK + 5, 3, 2),   # many blocks
]


@pytest.mark.parametrize("n,d,K", FULL_SHAPES)
def test_full_matches_the_twin_on_rounded_rows(n, d, K):
    X, dom, w, means, P = problem(n, d, K)
    got = compute_stats(X, w, means, P, n_threads=2, domain=dom, single=True)
    ref = estep_stats_reference(rounded_rows(X, dom), w, means, P)
    assert_close(got, ref)
    assert got.n_clipped == scale_and_clip(X.astype(np.float64), dom)[1]
    assert_array_equal(got["second_moments"], got["second_moments"].transpose(0, 2, 1))


@pytest.mark.parametrize("kind", ["full", "diag"])
def test_far_components_flush_to_zero_in_the_block_only(kind):
    """Responsibilities of far components down to e^-87 make subnormal products (g x_i,
    g x_i x_j; the diagonal kernel's g x_j, g x_j²); both float32 paths flush them to zero
    inside their blocks (dpf_ftz_begin, issue 41: subnormal operands take a slow path): the
    statistics still agree with the twin, are the same for every thread count, and the
    caller's floating-point mode is back after every call (numpy float32 arithmetic still
    makes subnormals)."""
    n, d, K = 12 * CHUNK + 5, 10, 4
    rng = np.random.default_rng(11)
    dom = resolve_domain(d, R, None)
    centres = np.eye(K, d) * 5.0
    X = (centres[rng.integers(K, size=n)] + rng.normal(scale=0.6, size=(n, d))).astype(np.float32)
    means = centres / R
    P = np.broadcast_to(np.eye(d) * (R / 0.55), (K, d, d)).copy()
    w = np.full(K, 1.0 / K)
    rows = rounded_rows(X, dom)
    lp = -0.5 * (((rows[:, None, :] - means[None]) * (R / 0.55)) ** 2).sum(axis=2)
    gap = lp - lp.max(axis=1, keepdims=True)
    assert np.count_nonzero((gap > -87) & (gap < -80)) > 100     # subnormal products do occur
    p = np.full((K, d), R / 0.55)
    runs = []
    for t in (1, 2, 3):
        if kind == "diag":
            runs.append(compute_stats_diag(X, w, means, p, n_threads=t, domain=dom, single=True))
        else:
            runs.append(compute_stats(X, w, means, P, n_threads=t, domain=dom, single=True))
        tiny = np.float32(1e-38) * np.float32(1e-3)
        assert tiny > 0 and tiny < np.finfo(np.float32).tiny
    if kind == "diag":
        assert_close(runs[0], estep_diag_stats_reference(rows, w, means, p))
    else:
        assert_close(runs[0], estep_stats_reference(rows, w, means, P))
    for r in runs[1:]:
        for name in ("counts", "first_moments", "second_moments"):
            assert_array_equal(r[name], runs[0][name], err_msg=name)


@pytest.mark.parametrize("kind", ["full", "diag"])
def test_box_and_per_feature_scales(kind):
    """A declared box and per-feature scales (the vectorised float32 loader's box test and its
    clip counts): the twin on the clipped-then-rounded rows, the same rows counted as clipped."""
    from dpem_fast._preprocess import DataDomain

    n, d, K = 3 * CHUNK + 5, 7, 3
    X, _, w, means, P = problem(n, d, K, seed=6)
    lo, hi = np.full(d, -4.0), np.full(d, 5.0)
    dom = DataDomain(np.full(d, 0.5), np.linspace(2.0, 6.0, d), (lo, hi), False)
    ref_rows, ref_clipped = float_clip(X, dom)
    assert 0 < ref_clipped < n and ref_clipped == scale_and_clip(X.astype(np.float64), dom)[1]
    if kind == "diag":
        p = np.ascontiguousarray(np.abs(np.diagonal(P, axis1=1, axis2=2)))
        got = compute_stats_diag(X, w, means, p, domain=dom, single=True)
        ref = estep_diag_stats_reference(ref_rows, w, means, p)
    else:
        got = compute_stats(X, w, means, P, domain=dom, single=True)
        ref = estep_stats_reference(ref_rows, w, means, P)
    assert got.n_clipped == ref_clipped
    assert_close(got, ref)


def test_rows_whose_squared_norm_overflows():
    """A scale so small that a row's squared norm overflows float64: the loader redoes that row
    along its own direction, onto the rim of the ball (as the float64 loader does)."""
    X, _, w, means, P = problem(2 * CHUNK + 3, 4, 2, seed=7)
    dom = resolve_domain(4, 1e-200, None)
    got = compute_stats(X, w, means * 0, P, domain=dom, single=True)
    ref = compute_stats(X, w, means * 0, P, domain=dom)
    assert got.n_clipped == ref.n_clipped == X.shape[0]
    trace = np.trace(got["second_moments"], axis1=1, axis2=2).sum()
    assert np.all(np.isfinite(got["second_moments"])) and trace <= X.shape[0] * (1 + 1e-6)
    assert_close(got, ref, rtol=1e-5)


@pytest.mark.parametrize("d", [3, 20, 53])
def test_full_non_triangular_factor(d):
    X, dom, w, means, P = problem(900, d, 3, triangular=False)
    assert np.any(np.tril(P, -1))
    got = compute_stats(X, w, means, P, domain=dom, single=True)
    assert_close(got, estep_stats_reference(rounded_rows(X, dom), w, means, P))


DIAG_SHAPES = [(1, 1, 1), (CHUNK - 7, 7, 3), (3 * CHUNK + 17, 10, 3), (1500, 4, 1), (900, 64, 10),
               (70 * CHUNK + 5, 3, 2)]


@pytest.mark.parametrize("d", [3, 8, 10, 33])
def test_float_clip_stays_in_the_ball(d):
    """The float clip's rows (the twin) lie in the ball of radius 1 + 2^-24 that the widening
    assumes (_specs, "Float32 rows" (a)), with and without a box, and the kernel counts the
    twin's clipped rows."""
    from dpem_fast._preprocess import DataDomain

    X, dom, w, means, P = problem(3 * CHUNK + 11, d, 3, seed=8)
    boxed = DataDomain(np.full(d, 0.1), np.linspace(0.3, 0.9, d), (np.full(d, -2.0), np.full(d, 2.5)), False)
    for domain in (dom, boxed):
        rows, n_clipped = float_clip(X, domain)
        assert np.sqrt((rows.astype(np.float64) ** 2).sum(axis=1)).max() <= 1 + 2.0 ** -24
        p = np.ascontiguousarray(np.abs(np.diagonal(P, axis1=1, axis2=2)))
        assert compute_stats_diag(X, w, means, p, domain=domain, single=True).n_clipped == n_clipped
        assert compute_stats(X, w, means, P, domain=domain, single=True).n_clipped == n_clipped


@pytest.mark.slow    # GCC compiles the loader three times
@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="x86-64 only")
@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs GCC (target_clones)")
@pytest.mark.skipif(not (HEADERS / "dpc_f32.h").is_file(), reason="needs the kernels' sources")
def test_float_clip_is_the_same_in_every_clone(tmp_path):
    """f32_clip_clones.c built as shipped (the clone for this CPU), for baseline x86-64 and for
    x86-64-v3 (the AVX2 clone's code): the same rows and clip counts, bit for bit."""
    out = []
    for name, flags in (("shipped", []), ("baseline", ["-DDPC_NO_CLONES"]),
                        ("v3", ["-DDPC_NO_CLONES", "-march=x86-64-v3"])):
        exe = tmp_path / name
        subprocess.run(["gcc", "-O3", "-std=c11", "-fno-math-errno", "-ffp-contract=fast", *flags, "-I", str(HEADERS),
                        str(HERE / "f32_clip_clones.c"), "-o", str(exe), "-lm"], check=True, capture_output=True,
                       timeout=600)
        out.append(subprocess.run([str(exe)], capture_output=True, text=True, timeout=60, check=True).stdout)
    assert out[0] == out[1] == out[2] and out[0].strip()


@pytest.mark.slow    # GCC compiles the lanes three times
@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="x86-64 only")
@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs GCC (target_clones)")
@pytest.mark.skipif(not (HEADERS / "dpc_lanes.h").is_file(), reason="needs the kernels' sources")
def test_second_moment_lanes_keep_the_row_order_in_every_clone(tmp_path):
    """f32_lanes_order.c: dpf_lanes_s2's tiles (issue 41: the diagonal entry shares the last
    column's loop) equal the plain per-lane loop bit for bit, built as shipped, for baseline
    x86-64 and for x86-64-v3."""
    for name, flags in (("shipped", []), ("baseline", ["-DDPC_NO_CLONES"]),
                        ("v3", ["-DDPC_NO_CLONES", "-march=x86-64-v3"])):
        exe = tmp_path / name
        subprocess.run(["gcc", "-O3", "-std=c11", "-fno-math-errno", "-ffp-contract=fast", *flags, "-I", str(HEADERS),
                        str(HERE / "f32_lanes_order.c"), "-o", str(exe)], check=True, capture_output=True, timeout=600)
        proc = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0 and proc.stdout.strip() == "all equal", (name, proc.stdout)


@pytest.mark.parametrize("n,d,K", DIAG_SHAPES)
def test_diag_matches_the_twin_on_rounded_rows(n, d, K):
    X, dom, w, means, P = problem(n, d, K)
    p = np.ascontiguousarray(np.abs(np.diagonal(P, axis1=1, axis2=2)))
    got = compute_stats_diag(X, w, means, p, n_threads=2, domain=dom, single=True)
    assert_close(got, estep_diag_stats_reference(rounded_rows(X, dom), w, means, p))


def _runs(kind, n, d, K, threads=(1, 2, 4)):
    X, dom, w, means, P = problem(n, d, K, seed=3)
    if kind == "diag":
        p = np.ascontiguousarray(np.abs(np.diagonal(P, axis1=1, axis2=2)))
        return [compute_stats_diag(X, w, means, p, n_threads=t, domain=dom, single=True) for t in threads]
    return [compute_stats(X, w, means, P, n_threads=t, domain=dom, single=True) for t in threads]


@pytest.mark.parametrize("kind,n,d,K", [("full", 70 * CHUNK + 5, 3, 4), ("full", 50 * CHUNK + 3, 10, 3),
                                        ("full", 20 * CHUNK + 9, 40, 3), ("diag", 50 * CHUNK + 3, 33, 5)])
def test_identical_for_every_thread_count(kind, n, d, K):
    runs = _runs(kind, n, d, K)
    for r in runs[1:]:
        for name in ("counts", "first_moments", "second_moments"):
            assert_array_equal(r[name], runs[0][name], err_msg=name)
        assert r.loglik == runs[0].loglik and r.n_clipped == runs[0].n_clipped


@pytest.mark.slow
def test_blocks_longer_than_a_flush():
    """Blocks of more than F32_FLUSH_CHUNKS chunks (the partial budget caps the block count at
    large K d²): their float lanes are flushed inside the block; still the numbers of the
    float64 pass over the same rounded rows (the twin, tested above, is slow at this size).
    (A flush is per block, so which thread runs it cannot matter; the thread tests above
    cover the driver.)"""
    n, d, K = 72 * CHUNK, 128, 64
    nb = _estep.block_count(n, d, K)
    assert -(-72 // nb) > _contract.F32_FLUSH_CHUNKS
    X, dom, w, means, P = problem(n, d, K, seed=5)
    got = compute_stats(X, w, means, P, n_threads=2, domain=dom, single=True)
    assert_close(got, compute_stats(rounded_rows(X, dom).astype(np.float64), w, means, P, n_threads=2))


@pytest.mark.parametrize("kind", ["full", "diag"])
def test_single_runs_in_single_precision(kind):
    """The float32 path is taken (its numbers differ from the float64 pass over the same float32
    rows in the last float bits) and agrees with it to float precision."""
    X, dom, w, means, P = problem(3000, 6, 3, seed=1)
    if kind == "diag":
        p = np.ascontiguousarray(np.abs(np.diagonal(P, axis1=1, axis2=2)))
        f = lambda single: compute_stats_diag(X, w, means, p, domain=dom, single=single)
    else:
        f = lambda single: compute_stats(X, w, means, P, domain=dom, single=single)
    a, b = f(True), f(False)
    assert not np.array_equal(a["second_moments"], b["second_moments"])
    assert_close(a, b, rtol=1e-5)


def test_fallbacks_run_the_float64_pass():
    """float64 rows, no domain (rows outside the ball), or parameters whose Mahalanobis terms could
    overflow a float: the float64 pass, bit for bit."""
    X, dom, w, means, P = problem(2000, 5, 3, seed=2)
    same = lambda a, b: all(np.array_equal(a[k], b[k]) for k in ("counts", "first_moments", "second_moments"))
    X64 = X.astype(np.float64)
    assert same(compute_stats(X64, w, means, P, domain=dom, single=True), compute_stats(X64, w, means, P, domain=dom))
    assert same(compute_stats(X, w, means, P, single=True), compute_stats(X, w, means, P))
    huge = P * 2.0 ** 48
    assert single_parameters(means, huge, np.zeros(3), dom) is None
    assert same(compute_stats(X, w, means, huge, domain=dom, single=True), compute_stats(X, w, means, huge, domain=dom))
    far = means + 2.0 ** 50
    assert same(compute_stats(X, w, far, P, domain=dom, single=True), compute_stats(X, w, far, P, domain=dom))
    assert single_parameters(means, P, np.array([0.0, np.nan, 1.0]), dom) is None
    assert single_parameters(means, P, np.zeros(3), None) is None
    m32, p32, c32 = single_parameters(means, P, np.array([0.0, -np.inf, 1.0]), dom)
    assert m32.dtype == p32.dtype == c32.dtype == np.float32 and c32[1] == -np.inf


def test_float32_arguments_are_checked():
    X, dom, w, means, P = problem(600, 4, 2)
    Xc, m, Pc, lc, upper = _params(X, w, means, P)
    nb = _estep.block_count(600, 4, 2)
    parts = [np.empty((nb, 2)), np.empty((nb, 2, 4)), np.empty((nb, 2, 4, 4)), np.empty(nb)]
    m32, p32, c32 = m.astype(np.float32), Pc.astype(np.float32), lc.astype(np.float32)
    with pytest.raises(ValueError, match="needs means32, prec32 and log_const32"):
        _estep.estep_stats(Xc, m, Pc, lc, *parts, upper, 1, means32=m32)
    with pytest.raises(ValueError, match="needs float32 rows"):
        _estep.estep_stats(Xc.astype(np.float64), m, Pc, lc, *parts, upper, 1, means32=m32, prec32=p32,
                           log_const32=c32)
    with pytest.raises(ValueError, match="float32 parameter shapes"):
        _estep.estep_stats(Xc, m, Pc, lc, *parts, upper, 1, means32=m32[:1], prec32=p32, log_const32=c32)
    pd = np.ascontiguousarray(np.abs(np.diagonal(Pc, axis1=1, axis2=2)))
    dparts = [np.empty((nb, 2)), np.empty((nb, 2, 4)), np.empty((nb, 2, 4)), np.empty(nb)]
    with pytest.raises(ValueError, match="float32 parameter shapes"):
        _estep_diag.estep_diag_stats(Xc, m, pd, lc, *dparts, 1, means32=m32, prec32=pd[:, :3].astype(np.float32),
                                     log_const32=c32)


# --------------------------------------------------------------- the sensitivity widening

def test_widening_bounds_the_derived_rounding_factor():
    """_specs' derivation: (1 + κ)(1 + u)² (1 + 2 m γ_{m+5}) with m = F32_LANE_ROWS rows per float
    lane, at most FLOAT32_WIDENING; a longer lane (one ssyrk per chunk: m = 256)
    or a float normalisation of the responsibilities (κ ~ K u) would break it for large K."""
    assert _contract.F32_LANE_ROWS == _contract.F32_FLUSH_CHUNKS * CHUNK // _contract.LANES == 128
    u = 2.0 ** -24
    m = 128
    expected = (1 + u) ** 3 * (1 + 2 * m * (m + 5) * u / (1 - (m + 5) * u))
    assert float32_rounding_factor() == pytest.approx(expected, rel=1e-9)
    assert float32_rounding_factor() <= FLOAT32_WIDENING < 1 + 4e-3
    assert float32_rounding_factor(lane_rows=256) > FLOAT32_WIDENING


def test_float32_specs_widen_every_sensitivity():
    specs = (soft_counts("c", 3), weighted_sums("s", (3, 4), 4), second_moments("q", (3, 4, 4)))
    wide = float32_specs(specs)
    for a, b in zip(specs, wide):
        assert (a.name, a.shape, a.symmetric) == (b.name, b.shape, b.symmetric)
        for rel in ("add_remove", "replace"):
            assert b.sensitivity("l2", rel) == a.sensitivity("l2", rel) * FLOAT32_WIDENING
            if a.l1 is not None:
                assert b.sensitivity("l1", rel) == a.sensitivity("l1", rel) * FLOAT32_WIDENING
    with pytest.raises(ValueError, match="integer"):
        float32_specs((StatSpec("n", (1,), l2={"add_remove": 1.0, "replace": 1.0}, integer=True),))
    assert math.isclose(wide[2].sensitivity("l2", "replace"), math.sqrt(2) * (1 + 2 ** -8))
