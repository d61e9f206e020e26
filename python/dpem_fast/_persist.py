"""Saved models: ``model.save(path)`` / :func:`dpem_fast.load`, a versioned, non-pickle format.

Format (versions 1 and 2)
-------------------------
One ``.npz`` archive (a zip of ``.npy`` files), read with ``numpy.load(allow_pickle=False)``:

``__meta__``
    uint8 array: UTF-8 JSON object ``{"format": "dpem_fast.model", "format_version": 1 or 2,
    "dpem_fast_version", "estimator", "params", "fitted", "privacy", "private",
    "not_saved"}``, plus ``"signature": "hmac-sha256"`` in a signed file.
    ``info`` holds free public metadata from the caller (the command line's column names).
``__sha256__``
    uint8 array: hex SHA-256 over ``__meta__`` and every other entry except the signature
    (name, dtype, shape, bytes) in name order.
``__hmac_sha256__`` (signed files only, format version 2)
    uint8 array: hex HMAC-SHA256 under the caller's key over exactly the bytes the SHA-256
    covers (``save(path, key=...)``).
``a0, a1, ...``
    numeric arrays referenced from the JSON as ``{"__array__": "a3"}``.

An unsigned file is written as format version 1, byte for byte what earlier releases wrote
and read.  A signed file is version 2: a version-1 reader would hash the signature entry as
data and report a damaged file, so it says "written by a newer dpem_fast" instead.  This
release reads both.

JSON values are plain JSON except these tagged objects: ``{"__float__": "inf"|"-inf"|"nan"}``,
``{"__tuple__": [...]}``, ``{"__array__": key}``, ``{"__strarray__": [...]}`` (an object array of
strings such as ``feature_names_in_``), ``{"__domain__": {...}}`` (the fitted data domain of
:class:`~dpem_fast.DPKMeans`) and ``{"__event__": ...}`` (an accounting event).  Events use a
small explicit schema: ``{"type": <one of the event classes in _EVENTS>, <field>: value, ...}``,
the fields exactly those of the class, nested events as events; they are rebuilt through the
event constructors, which validate every parameter.  Loading never unpickles and never
evaluates anything from the file: classes are looked up in fixed allow-lists by name.

What a file proves
------------------
- The SHA-256 is **unkeyed**: anyone can edit a file and recompute it.  It detects accidental
  damage (truncation, a flipped byte, a partial copy) and nothing else; it says nothing about
  who wrote the file.
- Every load (and every save) **cross-checks the privacy record against itself**
  (:func:`check_record`): the recorded event re-accounts, under the recorded accountant and
  relation, to ``epsilon_spent`` at ``delta``; ``epsilon_spent`` does not exceed the stated
  target ``epsilon``; every mechanism of the event is one the releases describe, and every
  release's own mechanism (``Release.event()``: noise scale over sensitivity) is in the
  event, or, with ``joint_multiplier``, the releases accounted jointly
  give that multiplier (through the estimator's joint bound) and the joint Gaussian is
  composed ``n_iter`` times; the event's relation tags are the record's; and the file's
  ``private`` flag agrees with the record (no record, or a domain computed from the data,
  means ``"private": false``).  This catches a privacy claim that does not follow from the
  file's own releases.  It does **not** catch edited fitted parameters, nor a forged file
  that is consistent throughout (releases, event and epsilon edited together); the number
  of compositions and any sampling rate in the event are taken as recorded (DP-SEP's
  shuffle pass releases its factor N T times but each row is in T of them, and the
  document count behind LDA's sampling rate is not in the file).
- A **keyed** file (``save(path, key=...)``, ``load(path, key=...)``) carries an HMAC-SHA256
  of everything the checksum covers.  Loading with the key proves that the file was written
  by a holder of the key and not modified since, parameters included; with a key, an
  unsigned file or a wrong signature is refused.  Loading a signed file without a key checks
  the checksum and the record as for any file and does not verify the signature.

What is saved, and what is not
------------------------------
Saved: the constructor's hyperparameters (``get_params``), the fitted parameters and
``privacy_``.  The fitted parameters are an allow-list per estimator (its ``_saved``
declaration in :mod:`dpem_fast._registry`: attributes a
private fit computes from released statistics and public constants only, including the few
private attributes inference needs), plus ``feature_names_in_`` when the model was fitted on
a data frame.  An attribute that is on no list is not written, and a file naming one is
refused; the test suite fails when an estimator gains a fitted attribute that is on neither
its ``_saved`` nor its ``_not_saved`` list, so every new attribute gets a decision.  Pickles
carry the same public state (:func:`dpem_fast._registry.public_state`).

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
import hmac
import io
import json
import math
import numbers
import os
import zipfile

import numpy as np

from ._registry import NEVER_PARAMS, estimators, saved_names, set_writer
from ._version import __version__

__all__ = ["ModelFormatError", "save", "load", "FORMAT_VERSION", "event_to_json", "event_from_json",
           "record_to_json", "record_from_json", "check_record"]

FORMAT = "dpem_fast.model"
#: the newest format version this release reads (unsigned files are still written as 1)
FORMAT_VERSION = 2
#: the format version of a signed file (the first that may carry a signature entry)
_SIGNED_VERSION = 2
_META, _HASH, _HMAC = "__meta__", "__sha256__", "__hmac_sha256__"
_SIGNATURE = "hmac-sha256"

#: relative tolerance of ``epsilon_spent`` against the event re-accounted on load (both come
#: from the same accountant; the slack absorbs floating-point differences across platforms)
EPSILON_RTOL = 1e-6
#: ``epsilon_spent <= epsilon * (1 + TARGET_RTOL)``: the calibration's rounding
TARGET_RTOL = 1e-9
#: relative tolerance when a release's mechanism (noise scale / sensitivity) is looked up in
#: the event, and of the joint multiplier against the releases (the same numbers, divided)
MECHANISM_RTOL = 1e-9

#: never saved: see the module docstring (the registry decides, for files and pickles alike)
_NEVER_PARAMS = NEVER_PARAMS


class ModelFormatError(ValueError):
    """A file that is not a readable dpem_fast model of a supported format version."""


def _estimators():
    """The registered estimators (:mod:`dpem_fast._registry`): persistence imports no model."""
    return estimators()


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


# ------------------------------------------------------------------ record cross-check
def _is_close(a, b, rtol):
    a, b = float(a), float(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return math.isclose(a, b, rel_tol=rtol, abs_tol=0.0)


def _same_mechanism(a, b):
    """Same event class and fields, floats within MECHANISM_RTOL (a release's multiplier is
    its noise scale over its sensitivity, the plan's the same quotient in another order)."""
    if type(a) is not type(b):
        return False
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, float) or isinstance(y, float):
            if x is None or y is None or not _is_close(x, y, MECHANISM_RTOL):
                return False
        elif x != y:
            return False
    return True


def _mechanisms(event):
    """The event's mechanisms (the events without sub-events) with how many times each is
    composed: counts multiply through ``SelfComposedEvent``; every other wrapper (relation
    tags, subsampling) passes its sub-events through.  Generic: a new composite event type
    is walked through its sub-event fields, a new mechanism type is a leaf."""
    from .accounting import SelfComposedEvent
    from .accounting._events import _child_events

    out = []
    stack = [(event, 1)]
    while stack:
        ev, k = stack.pop()
        children = list(_child_events(ev))
        if not children:
            out.append((ev, k))
            continue
        if isinstance(ev, SelfComposedEvent):
            k *= ev.count
        stack.extend((c, k) for c in children)
    return out


def _describe_release(r):
    if r.mechanism == "laplace":
        return f"laplace, epsilon {r.sensitivity / r.noise_scale:.6g} per release"
    return f"{r.mechanism}, noise multiplier {r.noise_scale / r.sensitivity:.6g}"


def _is_int(x, low):
    return not isinstance(x, (bool, np.bool_)) and isinstance(x, numbers.Integral) and x >= low


def _check_release_fields(key, r):
    """The descriptive fields of a release have their documented types."""
    expected = {"gaussian": "l2", "laplace": "l1", "discrete_gaussian": "l2"}
    if r.mechanism not in expected or r.norm != expected[r.mechanism]:
        raise ModelFormatError(f"release {key!r}: mechanism {r.mechanism!r} with norm {r.norm!r}")
    if not _is_int(r.count, 1):
        raise ModelFormatError(f"release {key!r}: count = {r.count!r} is not a positive integer")
    if not (isinstance(r.shape, tuple) and all(_is_int(n, 0) for n in r.shape)):
        raise ModelFormatError(f"release {key!r}: shape = {r.shape!r} is not a tuple of sizes")
    if not isinstance(r.symmetric, bool) or not (r.size is None or _is_int(r.size, 1)):
        raise ModelFormatError(f"release {key!r}: symmetric = {r.symmetric!r}, size = {r.size!r}")
    if (r.granularity is None) != (r.mechanism != "discrete_gaussian"):
        raise ModelFormatError(f"release {key!r}: granularity = {r.granularity!r} for a {r.mechanism} release")


def check_record(record, joint=None):
    """Check that a privacy record's stated guarantee follows from its own releases.

    Raises :class:`ModelFormatError` naming what disagrees; returns None for a consistent
    record.  Checks (see "What a file proves" in the module docstring):

    1. the event's relation tags are exactly the record's ``neighbouring``;
    2. the event re-accounts, with ``get_accountant(record.accountant, record.neighbouring)``,
       to ``epsilon_spent`` at ``delta`` (relative tolerance :data:`EPSILON_RTOL`);
    3. ``epsilon_spent <= epsilon`` (the stated target; :data:`TARGET_RTOL`);
    4. every mechanism in the event is some release's own mechanism (``Release.event()``,
       multipliers within :data:`MECHANISM_RTOL`) or the joint Gaussian, and every
       release's mechanism appears in the event, one-off releases included; with ``joint_multiplier``,
       the releases not in the event separately are the ones accounted jointly: Gaussian,
       ``joint_multiplier ** -2`` between the largest and the sum of their
       ``(sensitivity / noise_scale) ** 2`` and, when ``joint`` is given, equal to
       ``joint(that dict, neighbouring)`` (the estimator's ``_joint_sensitivity``; None from
       it means the estimator never accounts jointly), and ``GaussianEvent(joint_multiplier)``
       composed exactly ``n_iter`` times.

    The number of times a release's mechanism is composed, and sampling rates, are not
    compared with the release counts: parallel composition and subsampling make them differ
    legitimately (DP-SEP's shuffle pass: N T releases, T per row).  The check is internal
    consistency only: a file edited consistently throughout passes (sign files for that).
    """
    from . import accounting as acc
    from ._engine._record import PrivacyRecord, Release
    from .accounting._events import tagged_relations

    if not isinstance(record, PrivacyRecord):
        raise ModelFormatError(f"not a privacy record: {type(record).__name__}")
    rel = record.neighbouring
    if rel not in ("add_remove", "replace"):
        raise ModelFormatError(f"neighbouring = {rel!r} is not a relation")
    if not isinstance(record.event, acc.DpEvent) or type(record.event) is acc.DpEvent:
        raise ModelFormatError("the record has no accounting event")
    for name in ("epsilon", "delta", "epsilon_spent"):
        x = getattr(record, name)
        if isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Real) or math.isnan(x):
            raise ModelFormatError(f"{name} = {x!r} is not a number")
    n_iter = record.n_iter
    if not _is_int(n_iter, 1):
        raise ModelFormatError(f"n_iter = {n_iter!r} is not a positive integer")
    if not isinstance(record.releases, dict) or not record.releases:
        raise ModelFormatError("the record lists no releases")

    # 1. relation tags
    tags = tagged_relations(record.event)
    if tags != {rel}:
        raise ModelFormatError(f"the event is tagged neighbouring={sorted(tags)} but the record says "
                               f"neighbouring={rel!r}")
    # 2. the event re-accounts to epsilon_spent
    try:
        factory = acc.get_accountant(record.accountant, rel)
        eps = factory().compose(record.event).get_epsilon(record.delta)
    except (ValueError, TypeError, ArithmeticError, acc.UnsupportedEventError) as exc:
        raise ModelFormatError(f"the event cannot be re-accounted with accountant={record.accountant!r} "
                               f"under neighbouring={rel!r}: {exc}") from None
    spent = float(record.epsilon_spent)
    if not _is_close(eps, spent, EPSILON_RTOL):
        raise ModelFormatError(f"epsilon_spent = {spent:.17g} but the event re-accounts to {eps:.17g} "
                               f"(accountant={record.accountant!r}, delta={record.delta:g})")
    # 3. within the stated target
    if not spent <= float(record.epsilon) * (1.0 + TARGET_RTOL):
        raise ModelFormatError(f"epsilon_spent = {spent:.6g} exceeds the stated target epsilon = "
                               f"{record.epsilon:.6g}")
    # 4. the releases are in the event
    in_event = _mechanisms(record.event)
    own = {}
    for key, r in record.releases.items():
        if not isinstance(r, Release) or r.name != key:
            raise ModelFormatError(f"release entry {key!r} is not a release of that name")
        _check_release_fields(key, r)
        try:
            own[key] = r.event()
        except (ValueError, TypeError, ArithmeticError) as exc:
            raise ModelFormatError(f"release {key!r} does not describe a mechanism: {exc}") from None
    jz = record.joint_multiplier
    joint_event = None
    if jz is not None:
        try:
            joint_event = acc.GaussianEvent(float(jz))
        except (ValueError, TypeError) as exc:
            raise ModelFormatError(f"joint_multiplier = {jz!r}: {exc}") from None
    others = [(ev, k) for ev, k in in_event if joint_event is None or not _same_mechanism(ev, joint_event)]
    covered = []
    for key, ev in own.items():
        if any(_same_mechanism(ev, e) for e, _ in others):
            continue
        if joint_event is None:
            raise ModelFormatError(f"release {key!r} ({_describe_release(record.releases[key])}) is not in "
                                   "the recorded event: the event does not follow from the releases")
        covered.append(key)
    for ev, _ in others:
        if not any(_same_mechanism(ev, r) for r in own.values()):
            raise ModelFormatError(f"the event holds {ev!r}, which no release describes: the event does not "
                                   "follow from the releases")
    if joint_event is not None:
        _check_joint(record, joint_event, in_event, covered, joint)


def _check_joint(record, joint_event, in_event, covered, joint):
    """The releases ``covered`` are accounted jointly as ``joint_event`` (see check_record)."""
    jz = float(record.joint_multiplier)
    times = sum(k for ev, k in in_event if _same_mechanism(ev, joint_event))
    if times != record.n_iter:
        raise ModelFormatError(f"the joint Gaussian of multiplier joint_multiplier = {jz:.6g} is composed "
                               f"{times} times in the event, not n_iter = {record.n_iter}: the event does "
                               "not follow from the releases")
    if not covered:
        raise ModelFormatError("joint_multiplier is set but every release is in the event separately")
    names = ", ".join(repr(k) for k in covered)
    for k in covered:
        if record.releases[k].mechanism != "gaussian":
            raise ModelFormatError(f"release {k!r} is accounted jointly (not in the event separately) but "
                                   f"is {record.releases[k].mechanism}, not Gaussian")
    a = {k: (record.releases[k].sensitivity / record.releases[k].noise_scale) ** 2 for k in covered}
    mu2 = jz ** -2
    if not max(a.values()) * (1.0 - MECHANISM_RTOL) <= mu2 <= math.fsum(a.values()) * (1.0 + MECHANISM_RTOL):
        raise ModelFormatError(f"joint_multiplier = {jz:.6g} does not follow from the releases accounted "
                               f"jointly ({names}): a joint Gaussian of theirs has a multiplier between "
                               f"{math.fsum(a.values()) ** -0.5:.6g} and {max(a.values()) ** -0.5:.6g}")
    if joint is None:
        return
    try:
        expected = joint(a, record.neighbouring)
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
        raise ModelFormatError(f"the releases accounted jointly ({names}) are not those the estimator's "
                               f"joint bound reads ({type(exc).__name__}: {exc})") from None
    if expected is None:
        raise ModelFormatError("joint_multiplier is set but this estimator never accounts its releases jointly")
    if not (expected > 0 and _is_close(mu2, expected, MECHANISM_RTOL)):
        raise ModelFormatError(f"joint_multiplier = {jz:.6g} does not follow from the releases accounted "
                               f"jointly ({names}): their joint bound gives {float(expected) ** -0.5:.6g}")


def _estimator_joint(model):
    """The estimator's joint bound ``(a, neighbouring) -> sup`` for check_record: its
    ``_joint_sensitivity``, or one that says "never jointly" for an estimator without one."""
    f = getattr(model, "_joint_sensitivity", None)
    return f if callable(f) else (lambda a, neighbouring: None)


def _check_private_flag(flag, record):
    """The file's top-level ``private`` against its record (ModelFormatError if they disagree)."""
    if not isinstance(flag, bool):
        raise ModelFormatError(f"'private' = {flag!r} is not true or false")
    if record is None:
        if flag:
            raise ModelFormatError("the file says private: true but holds no privacy record (a fit "
                                   "without a guarantee, epsilon=inf)")
        return
    if not isinstance(record.private, bool):
        raise ModelFormatError(f"the privacy record's 'private' = {record.private!r} is not true or false")
    if flag != record.private:
        raise ModelFormatError(f"the file says private: {str(flag).lower()} but its privacy record says "
                               f"private: {str(record.private).lower()}")
    dom = record.data_domain
    if not isinstance(dom, dict):
        raise ModelFormatError("the privacy record's data_domain is not a mapping")
    if record.private and dom.get("from_data") is True:
        raise ModelFormatError("the privacy record says private: true but its data domain was computed "
                               "from the data (from_data: true), which gives no guarantee")


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


class _Inline(_Encoder):
    """Arrays inline as lists (for JSON reports and comparisons; not the file format)."""

    def __call__(self, v, where):
        if isinstance(v, np.ndarray) and v.dtype.kind in "biufc":
            return {"array": v.tolist(), "dtype": v.dtype.str}
        if isinstance(v, dict) and not all(isinstance(k, str) for k in v):
            return _refuse(where, v)
        return super().__call__(v, where)


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
        model.privacy_ = record_from_json(meta["privacy"], arrays)
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


set_writer(save)
