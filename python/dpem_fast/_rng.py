"""Keys and addressed random streams.

One 256-bit key per fit or per call comes from ``random_state``; every draw
site derives its own sub-key from a tag (purpose, iteration, release, ...)
with keyed BLAKE2b, and the C core then gives block ``b`` of that draw the
ChaCha20 stream ``b``.  Adding a release or changing the thread count never
shifts another release's noise.

``random_state=None`` (the default) keys the generator from the operating
system's entropy (:func:`secrets.token_bytes`).  An int, a
:class:`numpy.random.SeedSequence` or a :class:`numpy.random.Generator`
makes runs reproducible: use that for tests and research only, because
anyone who knows the seed can recompute (and subtract) the noise.
numpy's own bit generators are never used to draw noise.
"""
from __future__ import annotations

import hashlib
import secrets
import sys
from numbers import Integral

import numpy as np

__all__ = ["make_key", "derive_key", "KeyDeriver", "KEY_WORDS"]

KEY_WORDS = 8
_PERSON = b"dpem_fast.rng.1"


def make_key(random_state=None) -> np.ndarray:
    """Return a 256-bit key (``uint32[8]``) from ``random_state``.

    Parameters
    ----------
    random_state : None, int, numpy.random.SeedSequence or numpy.random.Generator
        ``None``: 32 bytes from the OS CSPRNG.  int (>= 0) or SeedSequence:
        ``SeedSequence.generate_state(8)``.  Generator: 8 words drawn from it
        (advancing it, as scikit-learn does with ``check_random_state``).
    """
    if random_state is None:
        return np.frombuffer(secrets.token_bytes(32), dtype="<u4").astype(np.uint32)
    if isinstance(random_state, np.random.SeedSequence):
        return random_state.generate_state(KEY_WORDS, dtype=np.uint32)
    if isinstance(random_state, np.random.Generator):
        return random_state.integers(0, 2**32, size=KEY_WORDS, dtype=np.uint32)
    if isinstance(random_state, np.random.RandomState):
        return random_state.randint(0, 2**32, size=KEY_WORDS, dtype=np.uint32)
    if isinstance(random_state, (bool, np.bool_)) or not isinstance(random_state, (Integral, np.integer)):
        raise TypeError(
            "random_state must be None, an int, a numpy SeedSequence or Generator; "
            f"got {type(random_state).__name__}"
        )
    if int(random_state) < 0:
        raise ValueError(f"random_state must be non-negative, got {random_state}")
    return np.random.SeedSequence(int(random_state)).generate_state(KEY_WORDS, dtype=np.uint32)


def _encode_tag(parts) -> bytes:
    out = []
    for p in parts:
        if isinstance(p, str):
            b = p.encode()
            out.append(b"s" + len(b).to_bytes(4, "little") + b)
        elif isinstance(p, (Integral, np.integer)) and not isinstance(p, bool):
            out.append(b"i" + int(p).to_bytes(16, "little", signed=True))
        else:
            raise TypeError(f"stream tags are str or int, got {type(p).__name__}")
    return b"".join(out)


def _keyed_hash(key):
    k = np.ascontiguousarray(key, dtype=np.uint32)
    if k.shape != (KEY_WORDS,):
        raise ValueError(f"key must have shape ({KEY_WORDS},), got {k.shape}")
    return hashlib.blake2b(digest_size=32, key=k.astype("<u4").tobytes(), person=_PERSON)


_LITTLE = sys.byteorder == "little"
_UINT32 = np.dtype(np.uint32)       # (a dtype instance: frombuffer parses it fastest positionally)


class KeyDeriver:
    """:func:`derive_key` for one key, for a draw site that derives many sub-keys (a fit's
    releases): the keyed BLAKE2b state is set up once and copied per tag (keyed BLAKE2b
    hashes the key block first, so the digest is the same), and a tag's fixed leading and
    trailing parts are encoded once.  ``deriver.derive(prefix, i, suffix)`` equals
    ``derive_key(key, *prefix, i, *suffix)`` for an int ``i``."""

    def __init__(self, key):
        self._hash = _keyed_hash(key)
        self._parts = {}

    def derive(self, prefix, index, suffix=()):
        parts = self._parts.get((prefix, suffix))
        if parts is None:
            parts = self._parts[(prefix, suffix)] = (_encode_tag(prefix) + b"i", _encode_tag(suffix))
        h = self._hash.copy()
        h.update(parts[0] + int(index).to_bytes(16, "little", signed=True) + parts[1])
        if _LITTLE:     # the digest's words are native: read in place (a writable array, one copy)
            return np.frombuffer(bytearray(h.digest()), _UINT32)
        return np.frombuffer(h.digest(), dtype="<u4").astype(np.uint32)


def derive_key(key: np.ndarray, *tag) -> np.ndarray:
    """Sub-key for one draw site: keyed BLAKE2b(key, encode(tag)) -> ``uint32[8]``.

    Distinct tags give computationally independent keys; the encoding is
    injective (typed, length-prefixed), so ``("a", 12)`` and ``("a1", 2)``
    never collide.
    """
    k = np.ascontiguousarray(key, dtype=np.uint32)
    if k.shape != (KEY_WORDS,):
        raise ValueError(f"key must have shape ({KEY_WORDS},), got {k.shape}")
    h = hashlib.blake2b(_encode_tag(tag), digest_size=32, key=k.astype("<u4").tobytes(), person=_PERSON)
    return np.frombuffer(h.digest(), dtype="<u4").astype(np.uint32)
