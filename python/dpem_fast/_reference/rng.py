"""Plain-Python twin of the C random-stream core (``dpc_rng.h``, ``dpc_normal.h``).

Written for clarity, not speed (about 1e5 words per second): Python ints for
ChaCha20, ``math`` for the ziggurat.  It reproduces the compiled samplers bit
for bit — same stream layout, same word consumption, same tables — and is the
oracle of ``tests/sampling/test_reference_rng.py`` and a baseline in
``bench/``.

Layout it mirrors: RFC 8439 block function; words 12-13 hold a 64-bit block
counter, words 14-15 a 64-bit stream id; block ``b`` of a sampler call reads
stream ``stream0 + b`` and writes outputs ``[b * BLOCK, (b + 1) * BLOCK)``.
Keys: a seed's key and a release's sub-key as the library derives them
(:func:`make_key_reference`, :func:`release_key_reference`; twins of ``_rng``).
"""
from __future__ import annotations

import hashlib
import math
import secrets

import numpy as np

__all__ = [
    "make_key_reference",
    "release_key_reference",
    "BLOCK",
    "chacha20_block",
    "Stream",
    "uniform",
    "standard_normal",
    "laplace",
    "integers",
    "symmetric_normal",
]

BLOCK = 4096
_MASK32 = 0xFFFFFFFF
#: the personalisation of the library's keyed BLAKE2b (its stream-key convention)
_PERSON = b"dpem_fast.rng.1"


def make_key_reference(random_state=None):
    """The 8-word key of ``random_state``: a non-negative int seeds ``numpy.random.SeedSequence``
    and its first 8 uint32 words are the key; None: 32 bytes from the OS."""
    if random_state is None:
        return [int(w) for w in np.frombuffer(secrets.token_bytes(32), dtype="<u4")]
    return [int(w) for w in np.random.SeedSequence(int(random_state)).generate_state(8, dtype=np.uint32)]


def release_key_reference(key, index, name):
    """The sub-key of release ``index`` of statistic ``name``: keyed BLAKE2b (32-byte digest,
    the key's words little-endian as its key) of the tag ("release", index, name), each part
    typed and length-prefixed: ``b"s" + len (4 bytes LE) + utf-8`` for a str, ``b"i" +
    16 bytes LE signed`` for an int."""
    def part(p):
        if isinstance(p, str):
            b = p.encode()
            return b"s" + len(b).to_bytes(4, "little") + b
        return b"i" + int(p).to_bytes(16, "little", signed=True)

    tag = part("release") + part(index) + part(name)
    k = b"".join(int(w).to_bytes(4, "little") for w in key)
    digest = hashlib.blake2b(tag, digest_size=32, key=k, person=_PERSON).digest()
    return [int.from_bytes(digest[4 * i:4 * i + 4], "little") for i in range(8)]
_SIGMA = (0x61707865, 0x3320646E, 0x79622D32, 0x6B206574)


def _rotl(v, n):
    return ((v << n) | (v >> (32 - n))) & _MASK32


def _quarter(x, a, b, c, d):
    x[a] = (x[a] + x[b]) & _MASK32
    x[d] = _rotl(x[d] ^ x[a], 16)
    x[c] = (x[c] + x[d]) & _MASK32
    x[b] = _rotl(x[b] ^ x[c], 12)
    x[a] = (x[a] + x[b]) & _MASK32
    x[d] = _rotl(x[d] ^ x[a], 8)
    x[c] = (x[c] + x[d]) & _MASK32
    x[b] = _rotl(x[b] ^ x[c], 7)


def chacha20_block(state):
    """RFC 8439 section 2.3: 20 rounds on a 16-word state, then add the input."""
    x = list(state)
    for _ in range(10):
        _quarter(x, 0, 4, 8, 12)
        _quarter(x, 1, 5, 9, 13)
        _quarter(x, 2, 6, 10, 14)
        _quarter(x, 3, 7, 11, 15)
        _quarter(x, 0, 5, 10, 15)
        _quarter(x, 1, 6, 11, 12)
        _quarter(x, 2, 7, 8, 13)
        _quarter(x, 3, 4, 9, 14)
    return [(a + b) & _MASK32 for a, b in zip(x, state)]


class Stream:
    """One (key, stream id) keystream, read as 32-bit words, in order."""

    def __init__(self, key, stream):
        self.key = [int(k) & _MASK32 for k in key]
        self.stream = int(stream)
        self.counter = 0
        self.buf = []

    def next_u32(self):
        if not self.buf:
            st = [*_SIGMA, *self.key, self.counter & _MASK32, self.counter >> 32,
                  self.stream & _MASK32, self.stream >> 32]
            self.buf = chacha20_block(st)[::-1]  # pop() from the end = word 0 first
            self.counter += 1
        return self.buf.pop()

    def next_u64(self):
        lo = self.next_u32()
        return lo | (self.next_u32() << 32)

    def uniform(self):
        """53-bit double in [0, 1)."""
        return (self.next_u64() >> 11) * 2.0**-53

    def below(self, m):
        """Lemire's multiply-and-reject, 32-bit words for m <= 2^32, else 64-bit."""
        bits = 32 if m <= _MASK32 else 64
        draw = self.next_u32 if bits == 32 else self.next_u64
        prod = draw() * m
        low = prod & ((1 << bits) - 1)
        if low < m:
            thresh = ((1 << bits) - m) % m
            while low < thresh:
                prod = draw() * m
                low = prod & ((1 << bits) - 1)
        return prod >> bits

    def normal(self):
        """Marsaglia-Tsang ziggurat, 256 strips (one 64-bit word per attempt)."""
        x, f, r = _zig_tables()
        while True:
            u = self.next_u64()
            i = u & 0xFF
            neg = (u >> 8) & 1
            z = (u >> 11) * 2.0**-53 * x[i]
            if z < x[i + 1]:
                return -z if neg else z
            if i == 0:
                while True:
                    a = -math.log1p(-self.uniform()) / r
                    b = -math.log1p(-self.uniform())
                    if not b + b < a * a:
                        break
                z = r + a
                return -z if neg else z
            if f[i] + self.uniform() * (f[i + 1] - f[i]) < math.exp(-0.5 * z * z):
                return -z if neg else z

    def laplace(self, scale):
        u = self.next_u64()
        e = -math.log1p(-(u >> 11) * 2.0**-53)
        return -scale * e if u & 1 else scale * e


def _zig_close(r, xs):
    fr = math.exp(-0.5 * r * r)
    v = r * fr + math.sqrt(math.pi / 2.0) * math.erfc(r / math.sqrt(2.0))
    xs[0] = v / fr
    xs[1] = r
    for i in range(2, 256):
        t = v / xs[i - 1] + math.exp(-0.5 * xs[i - 1] * xs[i - 1])
        if t >= 1.0:
            return 1.0
        xs[i] = math.sqrt(-2.0 * math.log(t))
    xs[256] = 0.0
    return v - xs[255] * (1.0 - math.exp(-0.5 * xs[255] * xs[255]))


_TABLES = None


def _zig_tables():
    """Strip edges: bisection on r until the recursion closes (as dpc_normal_init)."""
    global _TABLES
    if _TABLES is None:
        xs = [0.0] * 257
        lo, hi = 3.0, 4.0
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            if mid in (lo, hi):
                break
            if _zig_close(mid, xs) > 0.0:
                lo = mid
            else:
                hi = mid
        _zig_close(hi, xs)
        _TABLES = (xs, [math.exp(-0.5 * v * v) for v in xs], hi)
    return _TABLES


def _blocked(n, stream0, key, draw):
    out = []
    for b in range((n + BLOCK - 1) // BLOCK):
        s = Stream(key, stream0 + b)
        out.extend(draw(s) for _ in range(min(BLOCK, n - b * BLOCK)))
    return out


def uniform(key, n, stream0=0):
    """Twin of ``_rng.fill_uniform``."""
    return _blocked(n, stream0, key, Stream.uniform)


def standard_normal(key, n, scale=1.0, stream0=0):
    """Twin of ``_rng.fill_normal``."""
    return _blocked(n, stream0, key, lambda s: scale * s.normal())


def laplace(key, n, scale, stream0=0):
    """Twin of ``_rng.fill_laplace``."""
    return _blocked(n, stream0, key, lambda s: s.laplace(scale))


def integers(key, n, m, stream0=0):
    """Twin of ``_rng.fill_integers``."""
    return _blocked(n, stream0, key, lambda s: s.below(m))


def symmetric_normal(key, d, sigma, batch=1, stream0=0, offdiag=1.0):
    """Twin of ``_symnoise.fill_symmetric_normal``: row i of matrix m reads stream m*d + i;
    entries above the diagonal have sd ``sigma * offdiag``."""
    sigma_off = sigma * offdiag
    mats = []
    for m in range(batch):
        M = [[0.0] * d for _ in range(d)]
        for i in range(d):
            s = Stream(key, stream0 + m * d + i)
            M[i][i] = sigma * s.normal()
            for j in range(i + 1, d):
                M[i][j] = M[j][i] = sigma_off * s.normal()
        mats.append(M)
    return mats
