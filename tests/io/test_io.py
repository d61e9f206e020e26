"""Row sources: NpyBlocks, the block protocol, superblocks and the validation scan."""
import tracemalloc

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from dpem_fast.io import NpyBlocks, as_row_source, is_block_source, scan

S = 512          # superblock rows in these tests (the engine's rule gives ~64 MiB)


def _save(tmp_path, X, name="x.npy"):
    path = tmp_path / name
    np.save(path, X)
    return path


class Slices:
    """Only the protocol: random-length, Fortran-ordered blocks of an array, every other one
    widened to float64 (exact; the source casts back to its dtype)."""

    def __init__(self, X, seed=0, dtype=np.float64):
        self.X, self.seed, self.n_features, self.dtype = X, seed, X.shape[1], dtype

    def iter_blocks(self):
        rng = np.random.default_rng(self.seed)
        r = 0
        while r < len(self.X):
            m = int(rng.integers(0, 700))
            yield np.asfortranarray(self.X[r:r + m].astype(np.float64 if m % 2 else self.dtype))
            r += m


@pytest.mark.parametrize("dtype", [np.float32, np.float64, ">f8"])
@pytest.mark.parametrize("n", [0, 1, 255, 256, 257, 70_000])
@pytest.mark.parametrize("block_rows", [1, 7, 256, 10**6])
def test_npyblocks_reads_the_file_exactly(tmp_path, n, dtype, block_rows):
    X = np.random.default_rng(n).normal(size=(n, 3)).astype(dtype)
    src = NpyBlocks(_save(tmp_path, X), block_rows=block_rows)
    assert (src.n_rows, src.n_features, src.dtype) == (n, 3, np.dtype(dtype).newbyteorder("="))
    for _ in range(2):      # every pass starts again from the first row
        blocks = [b.copy() for b in src.iter_blocks()]
        got = np.concatenate(blocks) if blocks else np.empty((0, 3))
        assert_array_equal(got, X)
        assert all(len(b) == block_rows for b in blocks[:-1])
    assert is_block_source(src) and not is_block_source(X)


def test_npyblocks_memory_is_bounded_by_the_block(tmp_path):
    X = np.random.default_rng(0).normal(size=(200_000, 4))        # 6.4 MB on disk
    src = NpyBlocks(_save(tmp_path, X), block_rows=1000)           # 32 kB blocks
    tracemalloc.start()
    total = np.zeros(4)
    for b in src.iter_blocks():
        total += b.sum(axis=0)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 4 * 1000 * 4 * 8 + 64_000          # a block (plus small change), not the file
    np.testing.assert_allclose(total, X.sum(axis=0))


def test_npyblocks_errors(tmp_path):
    with pytest.raises(ValueError, match=r"path: no such file '.*missing\.npy'"):
        NpyBlocks(tmp_path / "missing.npy")
    (tmp_path / "junk.npy").write_bytes(b"not an npy file at all")
    with pytest.raises(ValueError, match=r"path: '.*junk\.npy' is not a \.npy file"):
        NpyBlocks(tmp_path / "junk.npy")
    (tmp_path / "short.npy").write_bytes(b"\x93NU")
    with pytest.raises(ValueError, match=r"path: '.*short\.npy' is not a \.npy file"):
        NpyBlocks(tmp_path / "short.npy")
    with pytest.raises(ValueError, match=r"path: '.*f\.npy' holds a Fortran-ordered array"):
        NpyBlocks(_save(tmp_path, np.asfortranarray(np.ones((4, 3))), "f.npy"))
    for name, shape in (("v.npy", (4,)), ("c.npy", (2, 3, 4)), ("s.npy", ())):
        with pytest.raises(ValueError, match=rf"path: '.*{name}' holds an array of shape .*; NpyBlocks reads 2-D"):
            NpyBlocks(_save(tmp_path, np.ones(shape), name))
    for dtype in (np.int64, np.float16, complex, bool):
        with pytest.raises(ValueError, match=r"path: '.*i\.npy' holds .*; NpyBlocks reads float32 or float64"):
            NpyBlocks(_save(tmp_path, np.ones((4, 3), dtype=dtype), "i.npy"))
    for bad in (0, -1, 2.0, True, None):
        with pytest.raises(ValueError, match=r"block_rows must be an int >= 1, got"):
            NpyBlocks(_save(tmp_path, np.ones((4, 3)), "ok.npy"), block_rows=bad)
    path = _save(tmp_path, np.ones((1000, 3)), "t.npy")
    with open(path, "r+b") as f:
        f.truncate(path.stat().st_size - 100)
    src = NpyBlocks(path, block_rows=64)            # the header is intact: found when a pass runs short
    with pytest.raises(ValueError, match=r"path: '.*t\.npy' is truncated \(960 of 1000 rows could be read\)"):
        list(src.iter_blocks())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_source_gives_the_same_superblocks(tmp_path, dtype):
    X = np.random.default_rng(1).normal(size=(3 * S + 77, 5)).astype(dtype)
    path = _save(tmp_path, X)
    want = [b.copy() for b in as_row_source(X, S).superblocks()]
    assert [len(b) for b in want] == [S, S, S, 77]
    sources = [np.load(path, mmap_mode="r"), np.memmap(path, dtype=dtype, mode="r", shape=X.shape,
                                                        offset=np.load(path, mmap_mode="r").offset)]
    sources += [NpyBlocks(path, block_rows=k) for k in (1, 7, 1000, S, 3 * S + 5)]
    sources.append(Slices(X, dtype=dtype))
    for src in sources:
        rs = as_row_source(src, S)
        got = [b.copy() for b in rs.superblocks()]
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.dtype == dtype and g.flags.c_contiguous
            assert_array_equal(g, w)
        if rs.is_stream:
            assert rs.n_rows == len(X)


def test_row_source_errors():
    for bad in (100, 0, -256, 256.0, True, None, 257):
        with pytest.raises(ValueError, match=r"superblock_rows must be a positive multiple of 256, got"):
            as_row_source(np.ones((3, 2)), bad)
    for shape in ((3,), (1, 2, 3), ()):
        with pytest.raises(ValueError, match=r"X must be 2-D, got shape"):
            as_row_source(np.ones(shape), S)
    for bad in ([[1.0, 2.0]], "x.npy", None, object()):
        with pytest.raises(TypeError, match=r"X must be an ndarray \(a numpy.memmap included\) or a block source"):
            as_row_source(bad, S)

    class Bad:
        n_features, dtype = 3, np.float64

        def iter_blocks(self):
            yield np.ones((2, 4))

    with pytest.raises(ValueError, match=r"X: a block source yielded a block of shape \(2, 4\)"):
        list(as_row_source(Bad(), S).superblocks())
    for bad in (0, -1, 2.5, True, "3"):
        Bad.n_features = bad
        with pytest.raises(ValueError, match=r"X: a block source's n_features must be an int >= 1, got"):
            as_row_source(Bad(), S)
    Bad.n_features = 3
    for bad in (np.int32, np.float16, complex):
        Bad.dtype = bad
        with pytest.raises(ValueError, match=r"X: a block source's dtype must be float32 or float64, got"):
            as_row_source(Bad(), S)
    assert as_row_source(np.ones((3, 2), dtype=np.int64), S).dtype == np.float64


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_scan_matches_numpy_even_at_the_largest_finite_values(dtype):
    X = np.random.default_rng(2).normal(size=(2 * S + 3, 4)).astype(dtype)
    big = np.finfo(dtype).max                   # 1.7976931348623157e308 for float64
    X[5, 2], X[700, 0], X[701, :] = big, -big, big  # finite; a naive sum would overflow (and warn)
    for src in (X, Slices(X, dtype=dtype)):
        seen = []
        n, lo, hi, max_abs = scan(as_row_source(src, S), check_block=lambda b: seen.append(len(b)))
        assert n == len(X) and seen == [S, S, 3]
        assert lo.dtype == hi.dtype == np.float64 and isinstance(max_abs, float)
        assert_array_equal(lo, X.min(0))
        assert_array_equal(hi, X.max(0))
        assert max_abs == float(np.abs(X).max()) == float(big)


def test_scan_summarises_and_validates():
    X = np.random.default_rng(2).normal(size=(2 * S + 3, 4))

    def refuse(block):
        raise ValueError("X must be binary")

    for src in (X, Slices(X)):
        with pytest.raises(ValueError, match="X must be binary"):
            scan(as_row_source(src, S), check_block=refuse)
    Y = X.copy()
    Y[S + 1, 3] = np.nan
    for src in (Y, Slices(Y)):
        with pytest.raises(ValueError, match=r"^Input X contains NaN\.$"):
            scan(as_row_source(src, S))
    Y[S + 1, 3] = np.inf
    for src in (Y, Slices(Y)):
        with pytest.raises(ValueError, match=r"^Input X contains infinity or a value too large"):
            scan(as_row_source(src, S))
    for src in (X[:0], Slices(X[:0])):
        with pytest.raises(ValueError, match=r"Found array with 0 sample\(s\) \(shape=\(0, 4\)\).*X has no rows"):
            scan(as_row_source(src, S))


class Drifting:
    """A broken source: pass k yields ``rows[k]`` rows (the last entry repeats)."""

    n_features = 2

    def __init__(self, rows, n_rows=None):
        self.rows, self.passes = list(rows), 0
        if n_rows is not None:
            self.n_rows = n_rows

    def iter_blocks(self):
        m = self.rows[min(self.passes, len(self.rows) - 1)]
        self.passes += 1
        for r0 in range(0, m, 100):
            yield np.ones((min(100, m - r0), 2))


@pytest.mark.parametrize("rows", [[S + 10, S + 11], [S + 10, S + 9], [2 * S, S], [S, 2 * S], [0, 1]])
def test_every_pass_of_a_stream_must_give_the_first_pass_row_count(rows):
    rs = as_row_source(Drifting(rows), S)
    assert rs.n_rows is None
    assert sum(len(b) for b in rs.superblocks()) == rows[0] == rs.n_rows
    consumed = []
    got = f"more than {rows[0]}" if rows[1] > rows[0] else rows[1]
    with pytest.raises(ValueError, match=rf"X: a pass of the block source yielded {got} rows, "
                                         rf"but its first pass gave {rows[0]}: every pass"):
        for b in rs.superblocks():
            consumed.append(len(b))
    assert sum(consumed) <= rows[1]          # the error comes before the deviant pass ends
    assert rs.n_rows == rows[0]


def test_a_declared_row_count_is_checked():
    rs = as_row_source(Drifting([S + 10], n_rows=S + 10), S)
    assert rs.n_rows is None                 # known only once a pass has run
    assert [len(b) for b in rs.superblocks()] == [S, 10] and rs.n_rows == S + 10
    for got, n_rows in ((S + 10, S + 9), (S + 10, 2 * S), (0, 5)):
        said = f"more than {n_rows}" if got > n_rows else got
        with pytest.raises(ValueError, match=rf"yielded {said} rows, but its declared n_rows is {n_rows}"):
            list(as_row_source(Drifting([got], n_rows=n_rows), S).superblocks())
    for bad in (-1, 2.5, True, "10"):
        with pytest.raises(ValueError, match="X: a block source's n_rows must be None or an int"):
            as_row_source(Drifting([1], n_rows=bad), S)
    assert as_row_source(Drifting([1], n_rows=np.int64(1)), S) is not None


@pytest.mark.parametrize("X, match", [
    (np.ones((3, 2), dtype=complex), r"X: complex data is not supported \(an array of dtype complex128\)"),
    (np.array([["a", "b"]]), r"X: an array of dtype <U1; expected real numbers"),
    (np.zeros((3, 2), dtype="datetime64[s]"), r"X: an array of dtype datetime64\[s\]; expected real numbers"),
    (np.array([[1.0, "x"]], dtype=object), r"X: an array of dtype object cannot be read as float64"),
])
def test_arrays_that_are_not_real_numbers_are_refused(X, match):
    with pytest.raises(ValueError, match=match):
        as_row_source(X, S)


@pytest.mark.parametrize("dtype", [bool, np.int8, np.uint64, np.float16, np.longdouble, object])
def test_other_real_arrays_are_read_as_float64(dtype):
    X = np.arange(6).reshape(3, 2).astype(dtype)
    (block,) = as_row_source(X, S).superblocks()
    assert block.dtype == np.float64 and block.flags.c_contiguous
    assert_array_equal(block, np.arange(6).reshape(3, 2).astype(bool if dtype is bool else float))


class Blocks:
    """A source yielding the given blocks."""

    def __init__(self, *blocks, n_features=2, dtype=np.float64):
        self.blocks, self.n_features, self.dtype = blocks, n_features, dtype

    def iter_blocks(self):
        return iter(self.blocks)


@pytest.mark.parametrize("block, match", [
    (np.ones((2, 2), dtype=complex), r"X: complex data is not supported \(a block source yielded a block of "
                                     r"dtype complex128\)"),
    (np.array([["a", "b"]]), "X: a block source yielded a block of dtype <U1; expected real numbers"),
    (np.array([[1.0, "x"]], dtype=object), "X: a block source yielded a block that cannot be read as float64"),
    (np.ones(2), r"X: a block source yielded a block of shape \(2,\); expected \(n, 2\)"),
])
def test_blocks_that_are_not_real_rows_are_refused(block, match):
    with pytest.raises(ValueError, match=match):
        list(as_row_source(Blocks(np.ones((1, 2)), block), S).superblocks())


def test_blocks_of_other_real_types_are_cast_to_the_declared_dtype():
    src = Blocks(np.ones((1, 2), np.float16), [[2, 3]], np.array([[4, 5]], dtype=np.uint8),
                 np.array([[6.0, 7.0]], dtype=object), np.ones((0, 2), bool), dtype=np.float32)
    (block,) = as_row_source(src, S).superblocks()
    assert block.dtype == np.float32
    assert_array_equal(block, [[1, 1], [2, 3], [4, 5], [6, 7]])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_scan_names_the_dtype_that_overflowed(dtype):
    with pytest.raises(ValueError, match=rf"^Input X contains infinity or a value too large for "
                                         rf"dtype\('{np.dtype(dtype).name}'\)\.$"):
        scan(as_row_source(np.array([[1.0, -np.inf]], dtype=dtype), S))


@pytest.mark.parametrize("order, dtype", [("F", np.float64), ("C", np.int32), ("F", np.float32)])
def test_a_memmap_that_needs_converting_is_converted_a_superblock_at_a_time(tmp_path, order, dtype):
    X = np.asarray(np.random.default_rng(3).normal(size=(100 * S + 3, 4)) * 100, dtype=dtype, order=order)
    path = _save(tmp_path, X)                                     # 100 superblocks on disk
    want = X.astype(np.float64 if dtype == np.int32 else dtype)
    m = np.load(path, mmap_mode="r")
    assert isinstance(m, np.memmap) and m.flags.f_contiguous == (order == "F")
    tracemalloc.start()
    rs = as_row_source(m, S)
    sizes = []
    for i, b in enumerate(rs.superblocks()):
        assert b.dtype == want.dtype and b.flags.c_contiguous
        assert_array_equal(b, want[i * S:(i + 1) * S])
        sizes.append(len(b))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert sizes == [S] * 100 + [3] and rs.n_rows == len(X) and not rs.is_stream
    assert peak < 3 * S * 4 * 8 + 64_000                          # superblocks, not size(X) = 100 of them


def test_an_in_memory_array_that_needs_converting_is_converted_once():
    X = np.asfortranarray(np.arange(2 * S * 2, dtype=np.int64).reshape(-1, 2))
    rs = as_row_source(X, S)
    a, b = (list(rs.superblocks()) for _ in range(2))
    assert all(x.base is not None and np.shares_memory(x, y) for x, y in zip(a, b))
    assert_array_equal(np.concatenate(a), X)


def test_a_c_contiguous_float_array_or_memmap_gives_views(tmp_path):
    X = np.ones((2 * S + 1, 3), dtype=np.float32)
    for src in (X, np.load(_save(tmp_path, X), mmap_mode="r")):
        blocks = list(as_row_source(src, S).superblocks())
        assert all(np.shares_memory(b, src) for b in blocks) and [len(b) for b in blocks] == [S, S, 1]


def test_npyblocks_buffer_is_no_bigger_than_the_file(tmp_path):
    src = NpyBlocks(_save(tmp_path, np.ones((10, 4))), block_rows=10**7)    # 320 MB if not capped
    tracemalloc.start()
    (block,) = src.iter_blocks()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert block.shape == (10, 4) and peak < 64_000
