# Exact symmetry of a (d, d) row-major matrix, one tile row at a time: what the second
# moment (lower triangle computed), the Analyze-Gauss noise (upper triangle drawn) and the
# factor-analysis covariance (upper triangle computed) share.
#
# Tile row I (rows I*SYM_TILE .. (I+1)*SYM_TILE - 1) owns the tiles (I, J), J <= I, of the
# lower triangle and their transposes (J, I) in the upper one: every off-diagonal pair
# {(i, j), (j, i)} belongs to exactly one tile row, so the tile rows are independent tasks
# (for the kernels' one parallel driver) and the result does not depend on the thread
# count.  A tile pair is walked as a blocked transpose (both 64 x 64 tiles stay in cache),
# where the row-by-row mirror read one cache line per entry, and two threads on adjacent
# rows wrote to the same lines.

cdef enum:
    SYM_TILE = 64


cdef inline Py_ssize_t sym_tile_rows(Py_ssize_t d) noexcept nogil:
    """Tile rows (tasks) of a (d, d) matrix."""
    return (d + SYM_TILE - 1) // SYM_TILE


cdef inline void sym_from_lower(double *S, Py_ssize_t d, Py_ssize_t I) noexcept nogil:
    """Tile row ``I``: ``S[j, i] = S[i, j]`` for ``i > j`` (lower triangle copied above)."""
    cdef Py_ssize_t J, i, j, i0 = I * SYM_TILE, i1 = min(d, i0 + SYM_TILE), j0, j1
    for J in range(I + 1):
        j0 = J * SYM_TILE
        j1 = min(d, j0 + SYM_TILE)
        for j in range(j0, j1):
            for i in range(max(i0, j + 1), i1):
                S[j * d + i] = S[i * d + j]


cdef inline void sym_from_upper(double *S, const double *V, Py_ssize_t d, Py_ssize_t I) noexcept nogil:
    """Tile row ``I``, from the upper triangle (diagonal included) ``U``: without ``V``
    (NULL) ``S[i, j] = S[j, i]`` for ``i > j``; with ``V`` every entry of the tile pair
    becomes ``V + U`` (``S[i, j] = V[i, j] + U[j, i]``, ``S[j, i] = V[j, i] + U[j, i]``): a
    symmetric U added to V, as ``V + (U + triu(U, 1).T)`` computes it."""
    cdef Py_ssize_t J, i, j, i0 = I * SYM_TILE, i1 = min(d, i0 + SYM_TILE), j0, j1
    cdef double u
    for J in range(I + 1):
        j0 = J * SYM_TILE
        j1 = min(d, j0 + SYM_TILE)
        for j in range(j0, j1):
            if V == NULL:
                for i in range(max(i0, j + 1), i1):
                    S[i * d + j] = S[j * d + i]
            else:
                for i in range(max(i0, j), i1):
                    u = S[j * d + i]
                    S[i * d + j] = V[i * d + j] + u
                    if i != j:
                        S[j * d + i] = V[j * d + i] + u
