"""The loops of the one privacy path (issue 36; the list in :mod:`~dpem_fast._engine._estimator`):
a :class:`PrivateRun` owns plan → the one charge → the releases → the one record, and runs the
loop a model hands its maths to (:meth:`~PrivateRun.once`, :meth:`~PrivateRun.minibatches`,
:meth:`~PrivateRun.sequence`; the full pass is :class:`~dpem_fast._engine._base.PrivateEM`'s).
"""
from __future__ import annotations

import numpy as np

from .. import accounting as acc
from .._dpcore import _rng as _core_rng
from .._rng import derive_key
from ._estimator import Context
from ._groups import group_batches
from ._path import build_record, chain_record, charge
from ._release import ReleaseLayer
from ._specs import check_row_cap

__all__ = ["PrivateRun"]


class PrivateRun:
    """A private fit of ``plan`` (None: a non-private one, no charge, no noise).  Opened, it refuses
    ``private_count`` (a row count where it is private) above the rounding bound's public cap
    (:func:`~._specs.check_row_cap`) and charges the whole plan to ``budget`` under ``label`` (also
    bounded by the plan's accountant; a user's class: the ledger's own bound only), before any
    statistic of the data is computed; it releases through its layer (keyed by ``key``), records at ``delta``."""

    def __init__(self, plan, key, n_threads=1, *, budget=None, label="fit", delta=None, private_count=None):
        self.plan, self.key, self.n_threads, self.delta, self.layer = plan, key, int(n_threads), delta, None
        if plan is not None:
            if private_count is not None:
                check_row_cap(private_count)
            accountant = plan.accountant if plan.accountant in acc.ACCOUNTANTS else None
            charge(budget, plan.event, label, accountant=accountant, delta_tail=plan.delta_tail)
            self.layer = ReleaseLayer(plan, key, n_threads)

    @classmethod
    def of(cls, est, plan, key, n_threads, *, what="fit", private_count=None):
        """The run of estimator ``est``'s fit: its ``budget`` charged as ``<class>.<what>``, its δ."""
        return cls(plan, key, n_threads, budget=getattr(est, "budget", None), label=f"{type(est).__name__}.{what}",
                   delta=est.delta, private_count=private_count)

    def record(self, **fields):
        """The run's :class:`~dpem_fast._engine._record.PrivacyRecord` (:func:`build_record`)."""
        return build_record(self.plan, delta=self.delta, **fields)

    def once(self, statistics, *, chain=None, **fields):
        """The one-shot release: ``(noisy, record)`` of ``statistics`` released at index 0; with
        ``chain=(prev, name)``, the record of a sequence of charged calls (:func:`chain_record`)."""
        noisy = self.layer.release(statistics, 0)
        if chain is None:
            return noisy, self.record(n_iter=1, **fields)
        (stat,), (prev, name) = noisy, chain
        return noisy, chain_record(prev, self.plan, stat, name=name, delta=self.delta, **fields)

    def minibatches(self, name, n_records, q, rounds, statistic, update, progress, *, tag, grouping=None):
        """The minibatch loop: round t keeps each record independently with the public probability q
        (the plan's amplification) — record i iff its uniform of ``derive_key(key, *tag, t)`` is below q, drawn
        on the client (``n_records`` sizes the draw only) — or each group of ``grouping`` with its rows
        (:func:`~._groups.group_batches`, ``(*tag, "groups")``), releases ``statistic(t, batch)`` as
        ``name`` at index t and calls ``update(noisy, Context)``; ``progress`` steps per round."""
        batches = (self._poisson(n_records, q, rounds, tag) if grouping is None else
                   group_batches(self.key, grouping, q, rounds, (*tag, "groups"), n_threads=self.n_threads))
        with progress:
            for t, batch in batches:
                update(self.layer.release({name: statistic(t, batch)}, t)[name], Context(t, self.plan.releases))
                progress.step()

    def _poisson(self, n_records, q, rounds, tag):
        u = np.empty(int(n_records))
        for t in range(int(rounds)):
            _core_rng.fill_uniform(derive_key(self.key, *tag, t), 0, u, self.n_threads)
            yield t, np.flatnonzero(u < q)

    def sequence(self, name, rounds, per_round, chunk, step, progress):
        """The sequential loop: releases ``0 .. rounds · per_round − 1`` of ``name``, each round's in
        chunks of at most ``chunk``, their noise in bulk (:meth:`~._release.ReleaseLayer.noise_block`):
        ``step(a, b, noise)`` runs them in a compiled loop that adds row ``i − a`` of ``noise`` at step
        ``i`` and nothing else sees the rows (None: a non-private run); ``progress`` steps per round.
        Returns the sum of what ``step`` returns (a count the model keeps)."""
        total = 0
        with progress:
            for r0 in range(0, int(rounds) * int(per_round), int(per_round)):
                for a in range(r0, r0 + int(per_round), int(chunk)):
                    b = min(r0 + int(per_round), a + int(chunk))
                    total += step(a, b, None if self.layer is None else self.layer.noise_block(name, a, b))
                progress.step()
        return total
