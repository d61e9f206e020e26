"""The cross-check of a saved privacy record against itself (what :func:`check_record` proves,
and what it cannot: see "What a file proves" in :mod:`dpem_fast._persist`)."""
from __future__ import annotations

import dataclasses
import math
import numbers

import numpy as np

from ._codec import ModelFormatError

__all__ = ["check_record", "EPSILON_RTOL", "TARGET_RTOL", "MECHANISM_RTOL"]

#: relative tolerance of ``epsilon_spent`` against the event re-accounted on load (both come
#: from the same accountant; the slack absorbs floating-point differences across platforms)
EPSILON_RTOL = 1e-6
#: ``epsilon_spent <= epsilon * (1 + TARGET_RTOL)``: the calibration's rounding
TARGET_RTOL = 1e-9
#: relative tolerance when a release's mechanism (noise scale / sensitivity) is looked up in
#: the event, and of the joint multiplier against the releases (the same numbers, divided)
MECHANISM_RTOL = 1e-9


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
    from ..accounting import SelfComposedEvent
    from ..accounting._events import _child_events

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

    1. the event's relation tags are exactly the record's ``neighbouring``, and their privacy
       unit the record's ``privacy_unit`` (``max_rows_per_group`` a positive integer exactly for
       a group-level record);
    2. the event re-accounts, with ``get_accountant(record.accountant, record.neighbouring)``,
       to ``epsilon_spent`` at ``delta - delta_tail`` (relative tolerance :data:`EPSILON_RTOL`;
       ``0 <= delta_tail < delta``);
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
    from .. import accounting as acc
    from .._engine._record import PrivacyRecord, Release
    from ..accounting._events import tagged_relations, tagged_units

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

    # 1. relation tags, and the privacy unit (row, or a group of at most max_rows_per_group rows)
    tags = tagged_relations(record.event)
    if tags != {rel}:
        raise ModelFormatError(f"the event is tagged neighbouring={sorted(tags)} but the record says "
                               f"neighbouring={rel!r}")
    unit, m = record.privacy_unit, record.max_rows_per_group
    if unit not in ("row", "group"):
        raise ModelFormatError(f"privacy_unit = {unit!r} is not a privacy unit")
    if (unit == "group") != _is_int(m, 1) or (unit == "row" and m is not None):
        raise ModelFormatError(f"max_rows_per_group = {m!r} for privacy_unit = {unit!r} (a positive integer "
                               "for a group, None for a row)")
    units = tagged_units(record.event)
    if units != {unit}:
        raise ModelFormatError(f"the event is tagged privacy_unit={sorted(units)} but the record says "
                               f"privacy_unit={unit!r}")
    tail = record.delta_tail
    if isinstance(tail, (bool, np.bool_)) or not isinstance(tail, numbers.Real) or not 0.0 <= tail < record.delta:
        raise ModelFormatError(f"delta_tail = {tail!r} is not in [0, delta)")
    # 2. the event re-accounts to epsilon_spent (at delta less the delta spent outside it)
    try:
        factory = acc.get_accountant(record.accountant, rel)
        eps = factory().compose(record.event).get_epsilon(record.event_delta)
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
        # with a joint Gaussian, a release is in the event separately only where a mechanism of
        # its own composed as many times as it was released: a one-off release (count 1) of the
        # same multiplier as an iteration release must not pass for it
        count = record.releases[key].count
        if any(_same_mechanism(ev, e) and (joint_event is None or k == count) for e, k in others):
            continue
        if joint_event is None or count != record.n_iter:      # a one-off is never in the joint Gaussian
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


