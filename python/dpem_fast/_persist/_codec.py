"""The codec of a saved model: plain JSON values with a few tagged objects (non-finite floats,
tuples, numeric arrays stored beside the JSON, string arrays, the k-means domain, accounting
events in an explicit schema) and the privacy record's JSON form.  Nothing is unpickled or
evaluated: classes are looked up in fixed allow-lists by name (see :mod:`dpem_fast._persist`)."""
from __future__ import annotations

import dataclasses
import math

import numpy as np


__all__ = ["ModelFormatError", "event_to_json", "event_from_json", "record_to_json", "record_from_json"]


class ModelFormatError(ValueError):
    """A file that is not a readable dpem_fast model of a supported format version."""


def _events():
    from .. import accounting as acc

    return {name: getattr(acc, name) for name in acc._events.__all__ if name != "DpEvent"}


# ------------------------------------------------------------------ values
class _Encoder:
    def __init__(self):
        self.arrays = {}

    def __call__(self, v, where):
        from .._preprocess import DataDomain
        from ..accounting import DpEvent

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
        from .._preprocess import DataDomain

        d = {k: _decode(x, arrays) for k, x in v["__domain__"].items()}
        if "radius" in d and "scale" not in d:
            # a file written before issue 23 (one radius for every feature): the same map as a
            # uniform per-feature scale, so its fitted parameters load unchanged
            radius = d.pop("radius")
            if not isinstance(radius, (int, float)) or isinstance(radius, bool):
                raise ModelFormatError(f"data domain: radius must be a number, got {type(radius).__name__}")
            d["scale"] = np.full(np.shape(d.get("center")), float(radius))
        try:
            return DataDomain(**d)
        except (TypeError, ValueError) as e:
            raise ModelFormatError(f"bad data domain: {e}") from None
    return {k: _decode(x, arrays) for k, x in v.items()}


# ------------------------------------------------------------------ events
#: Event fields added after the format was fixed, with the value an older file means by leaving
#: them out: written only when they differ from it (a row-level file stays byte for byte what
#: earlier releases wrote and read), read as it when absent.
_ADDED_FIELDS = {("NeighbouringEvent", "privacy_unit"): "row"}
#: The same for the privacy record's fields (absent: the record's defaults).
_ADDED_RECORD_FIELDS = {"privacy_unit": "row", "max_rows_per_group": None}


def event_to_json(event):
    """An accounting event as a JSON-ready dict ``{"type": name, field: value, ...}``."""
    events = _events()
    name = type(event).__name__
    if events.get(name) is not type(event):
        raise TypeError(f"unknown event type {name}")
    out = {"type": name}
    for f in dataclasses.fields(event):
        x = getattr(event, f.name)
        if (name, f.name) in _ADDED_FIELDS and x == _ADDED_FIELDS[(name, f.name)]:
            continue
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
    optional = {f for t, f in _ADDED_FIELDS if t == obj["type"]}
    if not names - optional <= set(obj) - {"type"} <= names:
        raise ModelFormatError(f"event {obj['type']}: fields {sorted(set(obj) - {'type'})}, expected {sorted(names)}")
    kw = {}
    for n in names & set(obj):
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
        if f.name in _ADDED_RECORD_FIELDS and x == _ADDED_RECORD_FIELDS[f.name]:
            continue            # a row-level record is written as before issue 27
        if f.name == "releases":
            out[f.name] = {k: {g.name: enc(getattr(r, g.name), f"privacy_.releases[{k}]")
                               for g in dataclasses.fields(r)} for k, r in x.items()}
        else:
            out[f.name] = enc(x, f"privacy_.{f.name}")
    return out


def record_from_json(obj, arrays=None, order=None):
    """The record of ``obj``; ``order``: its releases' names in plan order (a file's
    ``release_order``; None, as in a file written before issue 39: the releases stay in name order)."""
    from .._engine._record import PrivacyRecord, Release

    if obj is None:
        return None
    arrays = arrays or {}
    try:
        kw = {k: _decode(v, arrays) for k, v in obj.items() if k != "releases"}
        releases = obj["releases"]
        if order is not None:
            if not (isinstance(order, list) and len(set(map(str, order))) == len(order) == len(releases)
                    and set(order) == set(releases)):
                raise ModelFormatError("release_order does not list the record's releases once each")
            releases = {k: releases[k] for k in order}
        kw["releases"] = {k: Release(**{g: _decode(x, arrays) for g, x in r.items()})
                          for k, r in releases.items()}
        return PrivacyRecord(**kw)
    except (TypeError, KeyError, AttributeError) as exc:
        raise ModelFormatError(f"bad privacy record: {exc}") from None


class _Inline(_Encoder):
    """Arrays inline as lists (for JSON reports and comparisons; not the file format)."""

    def __call__(self, v, where):
        if isinstance(v, np.ndarray) and v.dtype.kind in "biufc":
            return {"array": v.tolist(), "dtype": v.dtype.str}
        if isinstance(v, dict) and not all(isinstance(k, str) for k in v):
            return _refuse(where, v)
        return super().__call__(v, where)


