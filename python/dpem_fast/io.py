"""Rows from disk or any stream: fits that do not fit in memory.

Every engine estimator's ``fit`` accepts, besides an in-memory array:

* a ``numpy.memmap`` (or ``np.load(path, mmap_mode="r")``): an ndarray, read page by page;
* a **block source**: any object with the small protocol below, read one pass per EM
  iteration (plus one validation pass, and one per histogram of a private domain estimate).
  :class:`NpyBlocks` reads a ``.npy`` file this way with memory bounded by its block size.

The block protocol
------------------
An object ``src`` with

``src.n_features`` : int
    The number of columns.
``src.iter_blocks()`` : iterator of 2-D arrays
    Each call starts a **new pass from the first row**; every pass yields the same rows in
    the same order, in blocks of shape ``(m_i, n_features)`` with any ``m_i >= 0`` (float
    arrays of any layout).  The engine copies what it keeps: a block may reuse a buffer.
``src.dtype`` : numpy dtype, optional
    ``float32`` or ``float64`` (default ``float64``); blocks are cast to it.
``src.n_rows`` : int, optional
    The number of rows, when known.  It is checked, not trusted: a pass that yields another
    number of rows raises ``ValueError``, as does any pass whose row count differs from the
    first pass's.  (Only the first pass is scanned for non-finite values; a source whose
    values change between passes breaks the contract undetected.)

For example, a Parquet file read with ``pyarrow.parquet.ParquetFile(path).iter_batches()``
or rows of a database cursor fit behind ``iter_blocks`` in a few lines.

The same result as in memory
----------------------------
The engine regroups the rows of any source into *superblocks* of a fixed number of rows
(``dpem_fast._dpcore._contract.superblock_rows(n_features)``, about 64 MiB of float64) and
sums the statistics of the superblocks in order.  The partition depends on the number of
features only — never on how the source cuts its blocks — so an array, a memory map of it
and a block source of the same rows give bit-identical statistics, hence, with the same
``random_state``, the same fit.
"""
from __future__ import annotations

import mmap
import os

import numpy as np

__all__ = ["NpyBlocks", "as_row_source", "is_block_source", "scan"]


class NpyBlocks:
    """Rows of a ``.npy`` file, read block by block with plain reads (no memory map).

    Parameters
    ----------
    path : str or path-like
        A ``.npy`` file holding a 2-D C-ordered float32 or float64 array.
    block_rows : int, default=65536
        Rows per read; memory is bounded by ``block_rows * n_features * itemsize`` (one
        buffer, reused: a consumer must copy what it keeps, as the engine does).

    Attributes
    ----------
    path, block_rows, n_rows, n_features, dtype
    """

    def __init__(self, path, block_rows=65536):
        if isinstance(block_rows, bool) or not isinstance(block_rows, (int, np.integer)) or block_rows < 1:
            raise ValueError(f"block_rows must be an int >= 1, got {block_rows!r}")
        self.path = os.fspath(path)
        self.block_rows = int(block_rows)
        if not os.path.isfile(self.path):
            raise ValueError(f"path: no such file {self.path!r}")
        with open(self.path, "rb") as f:
            try:
                version = np.lib.format.read_magic(f)
                shape, fortran, dtype = _read_header(f, version)
            except ValueError as exc:
                raise ValueError(f"path: {self.path!r} is not a .npy file ({exc})") from None
            self._offset = f.tell()
        if fortran:
            raise ValueError(f"path: {self.path!r} holds a Fortran-ordered array; NpyBlocks reads C order")
        if len(shape) != 2:
            raise ValueError(f"path: {self.path!r} holds an array of shape {shape}; NpyBlocks reads 2-D arrays")
        if dtype.kind != "f" or dtype.itemsize not in (4, 8):
            raise ValueError(f"path: {self.path!r} holds {dtype}; NpyBlocks reads float32 or float64")
        self.n_rows, self.n_features = int(shape[0]), int(shape[1])
        self._file_dtype = dtype
        self.dtype = np.dtype(dtype.newbyteorder("="))

    def iter_blocks(self):
        """A new pass over the rows, ``block_rows`` at a time (the last block shorter)."""
        d, item = self.n_features, self._file_dtype.itemsize
        rows = min(self.block_rows, self.n_rows) if d else self.n_rows     # no bigger than the file
        buf = np.empty((rows, d), dtype=self._file_dtype)
        raw = buf.reshape(-1).view(np.uint8)
        with open(self.path, "rb") as f:
            f.seek(self._offset)
            left = self.n_rows
            while left > 0:
                m = min(rows, left)
                want = m * d * item
                got = f.readinto(memoryview(raw)[:want])
                if got != want:
                    raise ValueError(f"path: {self.path!r} is truncated ({self.n_rows - left} of "
                                     f"{self.n_rows} rows could be read)")
                left -= m
                block = buf[:m]
                yield block if self._file_dtype.isnative else block.astype(self.dtype)

    def __repr__(self):
        return (f"NpyBlocks({self.path!r}, block_rows={self.block_rows}) "
                f"# {self.n_rows} x {self.n_features} {self.dtype}")


def _read_header(f, version):
    """(shape, fortran_order, dtype) of an open .npy file after its magic string."""
    if version == (1, 0):
        return np.lib.format.read_array_header_1_0(f)
    if version == (2, 0):
        return np.lib.format.read_array_header_2_0(f)
    raise ValueError(f"unsupported .npy format version {version}")


def is_block_source(X) -> bool:
    """Whether ``X`` follows the block protocol (and is not an array)."""
    return not isinstance(X, np.ndarray) and callable(getattr(X, "iter_blocks", None)) \
        and hasattr(X, "n_features")


def _mapped(X):
    """Whether ``X`` is, or views, a memory map (validation may hand on a plain ndarray view of
    a ``numpy.memmap``: its rows are still on disk)."""
    while X is not None:
        if isinstance(X, (np.memmap, mmap.mmap)):
            return True
        X = getattr(X, "base", None)
    return False


class _ArrayRows:
    """A 2-D array (in memory or memory-mapped) cut into superblocks.

    A C-contiguous float32/float64 array gives views, no copies.  Otherwise an in-memory array
    is converted once, up front; a ``numpy.memmap`` is converted one superblock at a time
    (a fresh array per superblock), so that it is never copied into memory whole.
    """

    is_stream = False

    def __init__(self, X, dtype, superblock_rows):
        if not isinstance(X, np.memmap):
            X = np.ascontiguousarray(X, dtype=dtype)
        self._X = X
        self.in_memory = not _mapped(X)     # all rows already in this process's memory
        self._rows = superblock_rows
        self.n_rows, self.n_features = X.shape
        self.dtype = dtype

    def superblocks(self):
        for r0 in range(0, self.n_rows, self._rows):
            yield np.ascontiguousarray(self._X[r0:r0 + self._rows], dtype=self.dtype)


class _StreamRows:
    """A block source regrouped into superblocks of exactly ``superblock_rows`` rows (one
    reused buffer: each superblock must be consumed before the next is requested).

    ``n_rows`` is ``None`` until a pass has run to its end.  Every pass must give the same
    number of rows (and the source's declared ``n_rows``, if any): a pass that yields more
    raises as soon as it does, one that yields fewer raises at its end; either way the
    generator raises before it is exhausted, so a consumer summing the pass never completes
    (or releases) a statistic of a deviant pass.
    """

    is_stream = True

    def __init__(self, src, superblock_rows):
        self._src = src
        self._rows = superblock_rows
        self.n_features = _check_n_features(src.n_features)
        dtype = np.dtype(getattr(src, "dtype", np.float64))
        if dtype not in (np.float32, np.float64):
            raise ValueError(f"X: a block source's dtype must be float32 or float64, got {dtype}")
        self.dtype = dtype
        declared = getattr(src, "n_rows", None)
        if declared is not None and (isinstance(declared, bool) or not isinstance(declared, (int, np.integer))
                                     or declared < 0):
            raise ValueError(f"X: a block source's n_rows must be None or an int >= 0, got {declared!r}")
        self._expected = None if declared is None else int(declared)
        self.n_rows = None                       # known after a full pass

    def _wrong_count(self, got, expected):
        what = "first pass gave" if self.n_rows is not None else "declared n_rows is"
        return ValueError(f"X: a pass of the block source yielded {got} rows, but its {what} {expected}: "
                          "every pass must yield the same rows")

    def superblocks(self):
        d, S = self.n_features, self._rows
        expected = self._expected
        buf = np.empty((S, d), dtype=self.dtype)
        fill = total = 0
        for block in self._src.iter_blocks():
            block = np.asarray(block)
            if block.ndim != 2 or block.shape[1] != d:
                raise ValueError(f"X: a block source yielded a block of shape {block.shape}; "
                                 f"expected (n, {d})")
            _check_real(block.dtype, "a block source yielded a block of")
            if expected is not None and total + fill + block.shape[0] > expected:
                raise self._wrong_count(f"more than {expected}", expected)
            start = 0
            while start < block.shape[0]:
                take = min(S - fill, block.shape[0] - start)
                try:
                    buf[fill:fill + take] = block[start:start + take]     # copies and casts
                except (TypeError, ValueError) as exc:                    # an object block
                    raise ValueError(f"X: a block source yielded a block that cannot be read as "
                                     f"{self.dtype} ({exc})") from None
                fill += take
                start += take
                if fill == S:
                    total += S
                    yield buf                    # one buffer: consumed before the next is asked
                    fill = 0
        total += fill
        if expected is not None and total != expected:
            raise self._wrong_count(total, expected)
        if fill:
            yield buf[:fill]
        self.n_rows = self._expected = total


def _check_real(dtype, what):
    """ValueError naming X unless ``dtype`` holds real numbers (bool, int, float, object)."""
    if dtype.kind == "c":
        raise ValueError(f"X: complex data is not supported ({what} dtype {dtype})")
    if dtype.kind not in "biufO":
        raise ValueError(f"X: {what} dtype {dtype}; expected real numbers")


def _check_n_features(n):
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"X: a block source's n_features must be an int >= 1, got {n!r}")
    return int(n)


def as_row_source(X, superblock_rows):
    """The engine's view of ``X``: superblocks of ``superblock_rows`` rows.

    ``X`` is a 2-D ndarray (``numpy.memmap`` included; float32/float64 kept, other real
    dtypes converted to float64, made C-contiguous) or a block source.  The result has
    ``n_features``, ``dtype``, ``n_rows`` (``None`` for a stream until a pass has run),
    ``is_stream``, and ``superblocks()``: a new pass over the rows in C-contiguous arrays of
    ``superblock_rows`` rows, the last one shorter, none empty.  A superblock is valid until
    the next one is requested (a stream reuses one buffer); an array's superblocks are views
    of X when X is C-contiguous float32/float64, so they must not be written to.
    """
    if isinstance(superblock_rows, bool) or not isinstance(superblock_rows, (int, np.integer)) \
            or superblock_rows < 256 or superblock_rows % 256:
        raise ValueError(f"superblock_rows must be a positive multiple of 256, got {superblock_rows!r}")
    if isinstance(X, np.ndarray):
        if X.ndim != 2:
            raise ValueError(f"X must be 2-D, got shape {X.shape}")
        if X.dtype in (np.float32, np.float64):
            return _ArrayRows(X, X.dtype, int(superblock_rows))
        _check_real(X.dtype, "an array of")
        try:
            return _ArrayRows(X, np.dtype(np.float64), int(superblock_rows))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"X: an array of dtype {X.dtype} cannot be read as float64 ({exc})") from None
    if is_block_source(X):
        return _StreamRows(X, int(superblock_rows))
    raise TypeError("X must be an ndarray (a numpy.memmap included) or a block source with "
                    f"n_features and iter_blocks() (see dpem_fast.io), got {type(X).__name__}")


def scan(source, check_block=None):
    """One validation pass: ``(n_rows, column_min, column_max, max_abs)``.

    Raises ``ValueError`` mentioning X for NaN or infinite values and for zero rows; calls
    ``check_block(superblock)`` (a model's row check, which may raise) on every superblock.
    """
    n = 0
    lo = hi = None
    max_abs = 0.0
    for block in source.superblocks():
        with np.errstate(over="ignore", invalid="ignore"):
            finite = np.isfinite(block)
        if not finite.all():
            if np.isnan(block).any():
                raise ValueError("Input X contains NaN.")
            raise ValueError(f"Input X contains infinity or a value too large for {block.dtype!r}.")
        if check_block is not None:
            check_block(block)
        b_lo, b_hi = block.min(axis=0).astype(np.float64), block.max(axis=0).astype(np.float64)
        lo = b_lo if lo is None else np.minimum(lo, b_lo)
        hi = b_hi if hi is None else np.maximum(hi, b_hi)
        max_abs = max(max_abs, float(np.max(np.abs(b_lo))), float(np.max(np.abs(b_hi))))
        n += block.shape[0]
    if n == 0:
        raise ValueError(f"Found array with 0 sample(s) (shape=(0, {source.n_features})) while a minimum "
                         "of 1 is required: X has no rows.")
    return n, lo, hi, max_abs
