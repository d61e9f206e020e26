"""Saved models: ``model.save(path)`` / :func:`dpem_fast.load`, a versioned, non-pickle format.

Format (versions 1 and 2)
-------------------------
One ``.npz`` archive (a zip of ``.npy`` files), read with ``numpy.load(allow_pickle=False)``:

``__meta__``
    uint8 array: UTF-8 JSON object ``{"format": "dpem_fast.model", "format_version": 1 or 2,
    "dpem_fast_version", "estimator", "params", "fitted", "privacy", "private",
    "not_saved"}``, plus ``"signature": "hmac-sha256"`` in a signed file and, from issue 39,
    ``"release_order"`` (the record's releases in plan order; the JSON keys are sorted).
    ``info`` holds free public metadata from the caller (the command line's column names).
``__sha256__``
    uint8 array: hex SHA-256 over ``__meta__`` and every other entry except the signature
    (name, dtype, shape, bytes) in name order.
``__hmac_sha256__`` (signed files only, format version 2)
    uint8 array: hex HMAC-SHA256 under the caller's key over exactly the bytes the SHA-256
    covers (``save(path, key=...)``).
``a0, a1, ...``
    numeric arrays referenced from the JSON as ``{"__array__": "a3"}``.

An unsigned file is written as format version 1, which earlier releases read (they ignore
``release_order``).  A signed file is version 2: a version-1 reader would hash the signature entry as
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

from .._registry import set_writer
from ._check import EPSILON_RTOL, MECHANISM_RTOL, TARGET_RTOL, check_record  # noqa: F401
from ._codec import (ModelFormatError, _Inline, event_from_json, event_to_json,  # noqa: F401
                     record_from_json, record_to_json)
from ._file import (FORMAT, FORMAT_VERSION, _digest, _estimators, _persist_attrs, _read, _saved_names,  # noqa: F401
                    load, save)

__all__ = ["ModelFormatError", "save", "load", "FORMAT_VERSION", "event_to_json", "event_from_json",
           "record_to_json", "record_from_json", "check_record"]

set_writer(save)
