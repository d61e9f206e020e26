"""Saved models: ``model.save(path)`` / :func:`dpem_fast.load`, a versioned, non-pickle format.

Format (version 1)
------------------
One ``.npz`` archive (a zip of ``.npy`` files), read with ``numpy.load(allow_pickle=False)``:

``__meta__``
    uint8 array: UTF-8 JSON object ``{"format": "dpem_fast.model", "format_version": 1,
    "dpem_fast_version", "estimator", "params", "fitted", "privacy", "private",
    "not_saved"}``.
    ``info`` holds free public metadata from the caller (the command line's column names).
``__sha256__``
    uint8 array: hex SHA-256 over ``__meta__`` and every other entry (name, dtype, shape,
    bytes) in name order.  It detects truncation and accidental edits; it is not a
    signature (anyone can recompute it), so a file is only as trustworthy as its source.
``a0, a1, ...``
    numeric arrays referenced from the JSON as ``{"__array__": "a3"}``.

JSON values are plain JSON except these tagged objects: ``{"__float__": "inf"|"-inf"|"nan"}``,
``{"__tuple__": [...]}``, ``{"__array__": key}``, ``{"__strarray__": [...]}`` (an object array of
strings such as ``feature_names_in_``), ``{"__domain__": {...}}`` (the fitted data domain of
:class:`~dpem_fast.DPKMeans`) and ``{"__event__": ...}`` (an accounting event).  Events use a
small explicit schema: ``{"type": <one of the event classes in _EVENTS>, <field>: value, ...}``,
the fields exactly those of the class, nested events as events; they are rebuilt through the
event constructors, which validate every parameter.  Loading never unpickles and never
evaluates anything from the file: classes are looked up in fixed allow-lists by name.

What is saved, and what is not
------------------------------
Saved: the constructor's hyperparameters (``get_params``), the fitted parameters and
``privacy_``.  The fitted parameters are an allow-list per estimator (``_SAVED``: attributes a
private fit computes from released statistics and public constants only, including the few
private attributes inference needs), plus ``feature_names_in_`` when the model was fitted on
a data frame.  An attribute that is on no list is not written, and a file naming one is
refused; the test suite fails when an estimator gains a fitted attribute that is on neither
``_SAVED`` nor ``_NOT_SAVED``, so every new attribute gets a decision.

Never saved:

- ``diagnostics_`` and the attributes documented as not private (``DPStochasticEP.n_skipped_``):
  computed from the raw data;
- ``random_state``: the seed is the key of the release noise; with it and the released
  parameters one could regenerate the noise and subtract it.  It is written as ``null``;
- ``budget`` (a live ledger object) and any private fitting state (``partial_fit``'s key and
  events): written as ``null`` / dropped, listed in the file's ``not_saved`` entry.

A model whose fit gives no privacy guarantee (``epsilon=inf``, or ``bounds="from_data"``) is
refused unless ``allow_not_private=True``; its file then says ``"private": false``.
"""
from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import math
import os
import zipfile

import numpy as np

__all__ = ["ModelFormatError", "save", "load", "FORMAT_VERSION", "event_to_json", "event_from_json",
           "record_to_json", "record_from_json"]

FORMAT = "dpem_fast.model"
FORMAT_VERSION = 1
_META, _HASH = "__meta__", "__sha256__"

#: never saved: see the module docstring
_NEVER_PARAMS = {"random_state": None, "budget": None}
#: the fitted attributes a file holds, per estimator (allow-list; see the module docstring):
#: each is post-processing of the fit's releases and public constants
_SAVED = {
    "DPGaussianMixture": ("weights_", "means_", "covariances_", "precisions_", "precisions_cholesky_",
                          "converged_", "n_iter_", "n_features_in_"),
    "DPBernoulliMixture": ("weights_", "means_", "n_iter_", "n_features_in_"),
    "DPKMeans": ("cluster_centers_", "n_iter_", "n_features_in_", "_domain"),
    "DPFactorAnalysis": ("components_", "mean_", "noise_variance_", "loglike_", "n_iter_", "n_features_in_"),
    "DPGradientEM": ("weights_", "means_", "beta_", "n_iter_", "n_features_in_", "_means_param"),
    "DPStochasticEP": ("weights_", "means_", "means_covariance_", "natural_parameters_", "factor_",
                       "component_variance_", "n_steps_", "n_features_in_"),
    "DPLatentDirichletAllocation": ("components_", "exp_dirichlet_component_", "n_batch_iter_", "n_iter_",
                                    "n_features_in_"),
}
#: saved for every estimator when present
_SAVED_ANY = ("feature_names_in_",)
#: fitted attributes deliberately not in the file: privacy_ is stored on its own; the others
#: are computed from the raw data (diagnostics_, DPStochasticEP.n_skipped_) or are fitting
#: state (the public row count of a replace-one fit)
_NOT_SAVED = ("privacy_", "diagnostics_", "n_skipped_", "_n_public")


class ModelFormatError(ValueError):
    """A file that is not a readable dpem_fast model of a supported format version."""


def _estimators():
    from .cluster import DPKMeans
    from .decomposition import DPFactorAnalysis, DPLatentDirichletAllocation
    from .mixture import DPBernoulliMixture, DPGaussianMixture, DPGradientEM, DPStochasticEP

    classes = (DPGaussianMixture, DPBernoulliMixture, DPGradientEM, DPStochasticEP, DPKMeans,
               DPFactorAnalysis, DPLatentDirichletAllocation)
    return {c.__name__: c for c in classes}


def _events():
    from . import accounting as acc

    return {name: getattr(acc, name) for name in acc._events.__all__ if name != "DpEvent"}


# ------------------------------------------------------------------ values
class _Encoder:
    def __init__(self):
        self.arrays = {}

    def __call__(self, v, where):
        from ._preprocess import DataDomain
        from .accounting import DpEvent

        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, (int, np.integer)) and not isinstance(v, np.bool_):
            return int(v)
        if isinstance(v, np.bool_):
            return bool(v)
        if isinstance(v, (float, np.floating)):
            v = float(v)
            return v if math.isfinite(v) else {"__float__": repr(v)}
        if isinstance(v, DpEvent):
            return {"__event__": event_to_json(v)}
        if isinstance(v, DataDomain):
            return {"__domain__": {f.name: self(getattr(v, f.name), where) for f in dataclasses.fields(v)}}
        if isinstance(v, np.ndarray):
            if v.dtype.kind in "biufc":
                key = f"a{len(self.arrays)}"
                self.arrays[key] = np.ascontiguousarray(v)
                return {"__array__": key}
            if v.dtype.kind in "OUS" and all(isinstance(s, str) for s in v.ravel()):
                return {"__strarray__": [str(s) for s in v.ravel()], "shape": list(v.shape)}
        if isinstance(v, tuple):
            return {"__tuple__": [self(x, where) for x in v]}
        if isinstance(v, list):
            return [self(x, where) for x in v]
        if isinstance(v, dict) and all(isinstance(k, str) for k in v):
            return {k: self(x, where) for k, x in v.items()} if not any(k.startswith("__") for k in v) \
                else _refuse(where, v)
        return _refuse(where, v)


def _refuse(where, v):
    raise TypeError(f"save: {where} of type {type(v).__name__} cannot be saved in the dpem_fast model format")


def _decode(v, arrays):
    if isinstance(v, list):
        return [_decode(x, arrays) for x in v]
    if not isinstance(v, dict):
        return v
    if "__float__" in v:
        s = v["__float__"]
        if s not in ("inf", "-inf", "nan"):
            raise ModelFormatError(f"bad float tag {s!r}")
        return float(s)
    if "__tuple__" in v:
        return tuple(_decode(x, arrays) for x in v["__tuple__"])
    if "__array__" in v:
        key = v["__array__"]
        if key not in arrays:
            raise ModelFormatError(f"missing array entry {key!r}")
        return arrays[key]
    if "__strarray__" in v:
        return np.array(v["__strarray__"], dtype=object).reshape(v["shape"])
    if "__event__" in v:
        return event_from_json(v["__event__"])
    if "__domain__" in v:
        from ._preprocess import DataDomain

        d = {k: _decode(x, arrays) for k, x in v["__domain__"].items()}
        return DataDomain(**d)
    return {k: _decode(x, arrays) for k, x in v.items()}


# ------------------------------------------------------------------ events
def event_to_json(event):
    """An accounting event as a JSON-ready dict ``{"type": name, field: value, ...}``."""
    events = _events()
    name = type(event).__name__
    if events.get(name) is not type(event):
        raise TypeError(f"unknown event type {name}")
    out = {"type": name}
    for f in dataclasses.fields(event):
        x = getattr(event, f.name)
        if isinstance(x, tuple):
            out[f.name] = [event_to_json(e) for e in x]
        elif dataclasses.is_dataclass(x):
            out[f.name] = event_to_json(x)
        elif x is None or isinstance(x, (str, int, float)):
            if isinstance(x, float) and not math.isfinite(x):
                raise TypeError(f"event field {f.name} = {x} is not finite")
            out[f.name] = x
        else:
            raise TypeError(f"event field {f.name} of type {type(x).__name__}")
    return out


def event_from_json(obj):
    """Inverse of :func:`event_to_json`; the event constructors validate every field."""
    events = _events()
    if not isinstance(obj, dict) or obj.get("type") not in events:
        raise ModelFormatError(f"not an accounting event: {str(obj)[:80]}")
    cls = events[obj["type"]]
    names = {f.name for f in dataclasses.fields(cls)}
    if set(obj) - {"type"} != names:
        raise ModelFormatError(f"event {obj['type']}: fields {sorted(set(obj) - {'type'})}, expected {sorted(names)}")
    kw = {}
    for n in names:
        x = obj[n]
        if isinstance(x, dict):
            x = event_from_json(x)
        elif isinstance(x, list):
            x = tuple(event_from_json(e) for e in x)
        elif not (x is None or isinstance(x, (str, int, float))):
            raise ModelFormatError(f"event {obj['type']}: bad field {n}")
        kw[n] = x
    try:
        return cls(**kw)
    except (TypeError, ValueError) as exc:
        raise ModelFormatError(f"event {obj['type']}: {exc}") from None


# ------------------------------------------------------------------ privacy record
def record_to_json(record, enc=None):
    """A :class:`~dpem_fast._engine._record.PrivacyRecord` as a JSON-ready dict."""
    enc = enc or _Encoder()
    if record is None:
        return None
    out = {}
    for f in dataclasses.fields(record):
        x = getattr(record, f.name)
        if f.name == "releases":
            out[f.name] = {k: {g.name: enc(getattr(r, g.name), f"privacy_.releases[{k}]")
                               for g in dataclasses.fields(r)} for k, r in x.items()}
        else:
            out[f.name] = enc(x, f"privacy_.{f.name}")
    return out


def record_from_json(obj, arrays=None):
    from ._engine._record import PrivacyRecord, Release

    if obj is None:
        return None
    arrays = arrays or {}
    try:
        kw = {k: _decode(v, arrays) for k, v in obj.items() if k != "releases"}
        kw["releases"] = {k: Release(**{g: _decode(x, arrays) for g, x in r.items()})
                          for k, r in obj["releases"].items()}
        return PrivacyRecord(**kw)
    except (TypeError, KeyError, AttributeError) as exc:
        raise ModelFormatError(f"bad privacy record: {exc}") from None


# ------------------------------------------------------------------ files
def _digest(meta_bytes, arrays):
    h = hashlib.sha256(meta_bytes)
    for k in sorted(arrays):
        a = arrays[k]
        h.update(f"{k}|{a.dtype.str}|{a.shape}".encode())
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def _saved_names(cls_name):
    return _SAVED[cls_name] + _SAVED_ANY


def _persist_attrs(model):
    """The attributes of a fitted model that the file holds: its allow-list (``_SAVED``)."""
    state = vars(model)
    return {k: state[k] for k in _saved_names(type(model).__name__) if k in state}


class _Inline(_Encoder):
    """Arrays inline as lists (for JSON reports and comparisons; not the file format)."""

    def __call__(self, v, where):
        if isinstance(v, np.ndarray) and v.dtype.kind in "biufc":
            return {"array": v.tolist(), "dtype": v.dtype.str}
        if isinstance(v, dict) and not all(isinstance(k, str) for k in v):
            return _refuse(where, v)
        return super().__call__(v, where)


def save(model, path, *, allow_not_private=False, info=None):
    """Write a fitted estimator to ``path`` (a ``.npz`` file; see the module docstring)."""
    from . import __version__

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
    enc = _Encoder()
    params = model.get_params(deep=False)
    not_saved = [k for k in _NEVER_PARAMS if k in params and params[k] is not None]
    params = {k: enc(_NEVER_PARAMS.get(k, v), f"parameter {k}") for k, v in params.items()}
    kept = _persist_attrs(model)
    fitted = {k: enc(v, f"attribute {k}") for k, v in kept.items()}
    not_saved += [k for k in vars(model) if k not in kept and (k.endswith("_") or k.startswith("_"))]
    not_saved.append("diagnostics_")
    meta = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "dpem_fast_version": __version__,
        "estimator": name, "params": params, "fitted": fitted, "privacy": record_to_json(record, enc),
        "private": private, "not_saved": sorted(set(not_saved)),
        "info": enc(info or {}, "info"),
    }
    meta_bytes = json.dumps(meta, allow_nan=False, sort_keys=True).encode()
    entries = dict(enc.arrays)
    entries[_META] = np.frombuffer(meta_bytes, dtype=np.uint8)
    entries[_HASH] = np.frombuffer(_digest(meta_bytes, enc.arrays).encode(), dtype=np.uint8)
    path = os.fspath(path)
    with open(path, "wb") as fh:       # np.savez would append ".npz" to a path without it
        np.savez(fh, **entries)
    return path


def _read(path):
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
    return meta, entries


def load(path):
    """Read a model written by ``model.save(path)``; returns the fitted estimator.

    Raises :class:`ModelFormatError` (a ``ValueError``) for anything that is not an intact
    dpem_fast model file of a format version this release reads.  Never unpickles.
    """
    meta, arrays = _read(path)
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
        model.privacy_ = record_from_json(meta["privacy"], arrays)
    except ModelFormatError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ModelFormatError(f"{path}: inconsistent model file ({type(exc).__name__}: {exc})") from None
    return model


def public_state(model, state):
    """The part of ``state`` (a fitted private model's ``__dict__``) that may leave the fit:
    the hyperparameters, with ``random_state`` and ``budget`` as ``None`` (the seed is the
    noise key; a ledger is live state), the estimator's allow-listed fitted attributes
    (``_SAVED``), ``privacy_`` and scikit-learn's version tag.  Everything else — the
    diagnostics, attributes computed from the raw data (``n_skipped_``, a row count),
    fitting state — is dropped.  An unfitted model, or one fitted without privacy
    (``privacy_ is None``), is returned whole: there is nothing private in it.
    """
    if state.get("privacy_") is None:
        return state
    keep = set(model.get_params(deep=False)) | set(_saved_names(type(model).__name__))
    keep |= {"privacy_", "_sklearn_version"}
    out = {k: v for k, v in state.items() if k in keep}
    out.update({k: v for k, v in _NEVER_PARAMS.items() if k in out})
    return out


class SaveMixin:
    """``save(path)`` for the estimators (see :mod:`dpem_fast._persist`), and a pickle that
    carries what a saved file carries.

    A fitted private model may be published as a ``save()`` file or as a pickle (``pickle``,
    ``joblib``, ``cloudpickle``): both hold the hyperparameters (``random_state`` and
    ``budget`` as ``None``), the allow-listed fitted parameters and ``privacy_``, never
    ``diagnostics_``, attributes computed from the raw data or any key
    (:func:`public_state`).  Unpickling gives a model that predicts, scores and samples as
    the original; continuing it (``partial_fit``) draws fresh keys.  Unlike a saved file, a
    pickle runs code when it is loaded: load pickles from trusted sources only.
    """

    def __getstate__(self):
        return public_state(self, super().__getstate__())

    def save(self, path, *, allow_not_private=False):
        """Write the fitted model to ``path``: a versioned ``.npz`` with JSON metadata, no pickle.

        Saves the hyperparameters, the fitted parameters and ``privacy_``; never
        ``diagnostics_`` (computed from the raw data) nor ``random_state`` (the noise key).
        Read it back with :func:`dpem_fast.load`.  A fit without a privacy guarantee is
        refused unless ``allow_not_private=True``.
        """
        return save(self, path, allow_not_private=allow_not_private)
