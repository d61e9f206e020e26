"""The file format of a saved model: one ``.npz`` with the JSON metadata, the arrays, the
unkeyed SHA-256 and an optional HMAC-SHA256; :func:`save` and :func:`load` (see
:mod:`dpem_fast._persist` for the format and what a file proves)."""
from __future__ import annotations

import hashlib
import hmac
import io
import json
import os
import zipfile

import numpy as np

from .._registry import NEVER_PARAMS, estimators, saved_names
from .._version import __version__
from ._check import _check_private_flag, _estimator_joint, check_record
from ._codec import ModelFormatError, _decode, _Encoder, record_from_json, record_to_json

__all__ = ["save", "load", "FORMAT", "FORMAT_VERSION"]

FORMAT = "dpem_fast.model"
#: the newest format version this release reads (unsigned files are still written as 1)
FORMAT_VERSION = 2
#: the format version of a signed file (the first that may carry a signature entry)
_SIGNED_VERSION = 2
_META, _HASH, _HMAC = "__meta__", "__sha256__", "__hmac_sha256__"
_SIGNATURE = "hmac-sha256"

#: never saved: see the module docstring (the registry decides, for files and pickles alike)
_NEVER_PARAMS = NEVER_PARAMS


def _estimators():
    """The registered estimators (:mod:`dpem_fast._registry`): persistence imports no model."""
    return estimators()


# ------------------------------------------------------------------ files
def _feed(h, meta_bytes, arrays):
    """The bytes both the checksum and the signature cover: the header, then every array
    entry (name|dtype|shape, bytes) in name order."""
    h.update(meta_bytes)
    for k in sorted(arrays):
        a = arrays[k]
        h.update(f"{k}|{a.dtype.str}|{a.shape}".encode())
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def _digest(meta_bytes, arrays):
    """Unkeyed SHA-256 (hex): detects damage, proves nothing about origin."""
    return _feed(hashlib.sha256(), meta_bytes, arrays)


def _signature(key, meta_bytes, arrays):
    """HMAC-SHA256 (hex) under ``key`` over the same bytes as :func:`_digest`."""
    return _feed(hmac.new(key, digestmod=hashlib.sha256), meta_bytes, arrays)


def _key_bytes(key, where):
    """``key`` as bytes (a str is encoded as UTF-8); None stays None; an empty key is refused."""
    if key is None:
        return None
    if isinstance(key, str):
        key = key.encode("utf-8")
    elif isinstance(key, (bytes, bytearray, memoryview)):
        key = bytes(key)
    else:
        raise TypeError(f"{where}: key must be bytes or str, got {type(key).__name__}")
    if not key:
        raise ValueError(f"{where}: key must not be empty")
    return key


def _saved_names(cls_name):
    return saved_names(cls_name)


def _persist_attrs(model):
    """The attributes of a fitted model that the file holds: its allow-list (``_saved``)."""
    state = vars(model)
    return {k: state[k] for k in _saved_names(type(model).__name__) if k in state}


def save(model, path, *, allow_not_private=False, info=None, key=None):
    """Write a fitted estimator to ``path`` (a ``.npz`` file; see the module docstring).

    ``key`` (bytes, or str taken as UTF-8; not empty): sign the file with HMAC-SHA256 under
    this key (format version 2), so that ``load(path, key=key)`` proves it was written by a
    holder of the key and not modified since.  Without a key the file carries only the
    unkeyed SHA-256, which detects accidental damage but not a deliberate edit.

    The privacy record is cross-checked first (:func:`check_record`), so a file that
    :func:`load` would refuse is never written.
    """
    key = _key_bytes(key, "save")
    name = type(model).__name__
    if _estimators().get(name) is not type(model):
        raise TypeError(f"save: {name} is not a dpem_fast estimator")
    if not hasattr(model, "privacy_"):
        raise ValueError(f"save: this {name} is not fitted yet; call fit first")
    record = model.privacy_
    private = record is not None and bool(record.private)
    if not private and not allow_not_private:
        raise ValueError("save: this model was fitted without a privacy guarantee (epsilon=inf or "
                         "bounds='from_data'); pass allow_not_private=True to save it anyway")
    if record is not None:
        try:
            check_record(record, _estimator_joint(model))
            _check_private_flag(private, record)
        except ModelFormatError as exc:
            raise ValueError(f"save: this {name}'s privacy record is inconsistent, nothing was written: "
                             f"{exc}") from None
    enc = _Encoder()
    params = model.get_params(deep=False)
    not_saved = [k for k in _NEVER_PARAMS if k in params and params[k] is not None]
    params = {k: enc(_NEVER_PARAMS.get(k, v), f"parameter {k}") for k, v in params.items()}
    kept = _persist_attrs(model)
    fitted = {k: enc(v, f"attribute {k}") for k, v in kept.items()}
    not_saved += [k for k in vars(model) if k not in kept and (k.endswith("_") or k.startswith("_"))]
    not_saved.append("diagnostics_")
    meta = {
        "format": FORMAT, "format_version": 1 if key is None else _SIGNED_VERSION,
        "dpem_fast_version": __version__,
        "estimator": name, "params": params, "fitted": fitted, "privacy": record_to_json(record, enc),
        "private": private, "not_saved": sorted(set(not_saved)),
        "info": enc(info or {}, "info"),
    }
    if record is not None:      # the plan order of the releases (the JSON object's keys are sorted)
        meta["release_order"] = list(record.releases)
    if key is not None:
        meta["signature"] = _SIGNATURE
    meta_bytes = json.dumps(meta, allow_nan=False, sort_keys=True).encode()
    entries = dict(enc.arrays)
    entries[_META] = np.frombuffer(meta_bytes, dtype=np.uint8)
    entries[_HASH] = np.frombuffer(_digest(meta_bytes, enc.arrays).encode(), dtype=np.uint8)
    if key is not None:
        entries[_HMAC] = np.frombuffer(_signature(key, meta_bytes, enc.arrays).encode(), dtype=np.uint8)
    path = os.fspath(path)
    with open(path, "wb") as fh:       # np.savez would append ".npz" to a path without it
        np.savez(fh, **entries)
    return path


def _read(path, key=None):
    """(header, arrays) of an intact file; with ``key`` (bytes), only a file signed with it."""
    path = os.fspath(path)
    with open(path, "rb") as fh:
        raw = fh.read()
    if not raw.startswith(b"PK\x03\x04"):
        hint = " (it looks like a pickle; dpem_fast never loads pickles)" if raw[:1] == b"\x80" else ""
        raise ModelFormatError(f"{path}: not a dpem_fast model file{hint}")
    try:
        with np.load(io.BytesIO(raw), allow_pickle=False) as z:
            entries = {k: z[k] for k in z.files}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError) as exc:
        raise ModelFormatError(f"{path}: damaged or truncated model file ({exc})") from None
    if _META not in entries or _HASH not in entries:
        raise ModelFormatError(f"{path}: not a dpem_fast model file (no {_META} entry)")
    meta_bytes = entries.pop(_META).tobytes()
    digest = entries.pop(_HASH).tobytes().decode("ascii", "replace")
    signature = entries.pop(_HMAC, None)
    if key is not None:
        # authenticity first: nothing from an unauthenticated file is parsed
        if signature is None:
            raise ModelFormatError(f"{path}: not signed (no HMAC-SHA256 signature entry), and a key was given: "
                                   "only a file signed with that key is accepted")
        expected = _signature(key, meta_bytes, entries).encode("ascii")
        if not hmac.compare_digest(expected, signature.tobytes()):
            raise ModelFormatError(f"{path}: the HMAC-SHA256 signature does not match: the file was modified "
                                   "after signing, or signed with another key")
    try:
        meta = json.loads(meta_bytes.decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelFormatError(f"{path}: unreadable metadata ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ModelFormatError(f"{path}: not a dpem_fast model file")
    version = meta.get("format_version")
    if not isinstance(version, int) or version < 1:
        raise ModelFormatError(f"{path}: bad format version {version!r}")
    if version > FORMAT_VERSION:
        raise ModelFormatError(f"{path}: written in model format version {version} by a newer dpem_fast "
                               f"({meta.get('dpem_fast_version')}); this version reads format <= {FORMAT_VERSION}")
    if _digest(meta_bytes, entries) != digest:
        raise ModelFormatError(f"{path}: checksum mismatch: the file was edited or damaged")
    declared = meta.get("signature")
    if declared is not None and (declared != _SIGNATURE or version < _SIGNED_VERSION):
        raise ModelFormatError(f"{path}: unknown signature {declared!r} for format version {version}")
    if declared is not None and signature is None:
        raise ModelFormatError(f"{path}: the header declares an HMAC-SHA256 signature but the file has no "
                               "signature entry (removed or damaged)")
    if declared is None and signature is not None:
        raise ModelFormatError(f"{path}: a signature entry that the header does not declare")
    return meta, entries


def load(path, *, key=None):
    """Read a model written by ``model.save(path)``; returns the fitted estimator.

    Raises :class:`ModelFormatError` (a ``ValueError``) for anything that is not an intact
    dpem_fast model file of a format version this release reads, and for a file whose
    privacy record does not follow from its own releases (:func:`check_record`: the stated
    epsilon/delta, the event, the releases and the ``private`` flag must agree).  Never
    unpickles.

    What loading proves: without ``key``, only that the file is undamaged (its SHA-256 is
    unkeyed: anyone can edit a file and recompute it) and internally consistent; edited
    fitted parameters, or a record forged consistently throughout, are not detected.  A
    signed file loaded without a key is checked the same way (its signature is not
    verified).  With ``key`` (bytes, or str taken as UTF-8; not empty), the file must carry
    a valid HMAC-SHA256 under that key: an unsigned file or a wrong signature is refused,
    and a file that loads was written by a holder of the key and not modified since.
    """
    key = _key_bytes(key, "load")
    meta, arrays = _read(path, key)
    cls = _estimators().get(meta.get("estimator"))
    if cls is None:
        raise ModelFormatError(f"{path}: unknown estimator {meta.get('estimator')!r}")
    try:
        model = cls()
        params = {k: _decode(v, arrays) for k, v in meta["params"].items()}
        unknown = set(params) - set(model.get_params(deep=False))
        if unknown:
            raise ModelFormatError(f"{path}: unknown parameters {sorted(unknown)} for {cls.__name__}")
        model.set_params(**params)
        allowed = _saved_names(cls.__name__)
        for k, v in meta["fitted"].items():
            if k not in allowed:
                raise ModelFormatError(f"{path}: unexpected attribute {k!r}")
            setattr(model, k, _decode(v, arrays))
        model.privacy_ = record_from_json(meta["privacy"], arrays, order=meta.get("release_order"))
        private = meta["private"]
    except ModelFormatError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ModelFormatError(f"{path}: inconsistent model file ({type(exc).__name__}: {exc})") from None
    try:
        _check_private_flag(private, model.privacy_)
        if model.privacy_ is not None:
            check_record(model.privacy_, _estimator_joint(model))
    except ModelFormatError as exc:
        raise ModelFormatError(f"{path}: the privacy claim does not follow from the file's own record: "
                               f"{exc}") from None
    except (TypeError, ValueError, AttributeError, ArithmeticError) as exc:
        raise ModelFormatError(f"{path}: malformed privacy record ({type(exc).__name__}: {exc})") from None
    return model

