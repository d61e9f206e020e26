"""The registry of private estimators: a model joins it by subclassing, and persistence and
the command line read only this registry (they import no model).

A concrete estimator declares, in its class body:

``_saved`` : tuple of str
    The fitted attributes that leave a fit — in a saved file and in a pickle (an
    allow-list: each is post-processing of released statistics and public constants;
    ``feature_names_in_`` is added for every estimator).  Declaring it registers the class.
``_not_saved`` : tuple of str
    Fitted attributes deliberately kept out (computed from the raw data, or fitting state);
    ``privacy_`` (stored on its own) and ``diagnostics_`` are implied.  The test suite
    fails when an estimator has a fitted attribute on neither list.
``_cli_name`` : str or None
    Its name on the command line (``dpem-fast fit --model NAME``); None keeps it off.
``_input`` : {"table", "documents"}
    What the command line reads for it: a table of rows, or documents over a public
    vocabulary.

Adding a model therefore touches its own module (the class with these declarations) and
its subpackage's ``__init__`` (which imports it, so that it registers; the package exports
every subpackage's ``__all__``).

What leaves a fitted private model (:func:`public_state`) is decided here, once, for files
and pickles alike: the hyperparameters with ``random_state`` and ``budget`` set to ``None``
(the seed is the key of the release noise; a ledger is live state), the ``_saved``
attributes and ``privacy_``.  Writing a file is the persistence layer's
(:mod:`dpem_fast._persist` installs its writer with :func:`set_writer` when it is imported,
so that this layer does not import it).
"""
from __future__ import annotations

__all__ = ["Registered", "estimators", "saved_names", "public_state", "set_writer",
           "SAVED_ANY", "NOT_SAVED_ANY", "NEVER_PARAMS"]

#: class name -> class, in registration (import) order
_REGISTRY: dict = {}
#: saved for every estimator when present
SAVED_ANY = ("feature_names_in_",)
#: never saved by any estimator: privacy_ is stored on its own, diagnostics_ is not private
NOT_SAVED_ANY = ("privacy_", "diagnostics_")
#: hyperparameters written as None: the seed is the noise key, a ledger is live state
NEVER_PARAMS = {"random_state": None, "budget": None}
_INPUTS = ("table", "documents")
_WRITER = []


def set_writer(fn):
    """Install ``fn(model, path, **options)``, the file writer behind ``model.save``."""
    _WRITER[:] = [fn]


def estimators():
    """``{class name: class}`` of every registered estimator, in registration order."""
    return dict(_REGISTRY)


def saved_names(cls):
    """The attributes a file or pickle of ``cls`` (a class or its name) may hold."""
    if isinstance(cls, str):
        cls = _REGISTRY[cls]
    return tuple(cls._saved) + SAVED_ANY


def public_state(model, state, saved=None):
    """The part of ``state`` (a fitted model's ``__dict__``) that may leave the fit.

    The hyperparameters (``random_state`` and ``budget`` as ``None``), the allow-listed
    fitted attributes, ``privacy_`` and scikit-learn's version tag; everything else — the
    diagnostics, attributes computed from the raw data (a row count, ``n_skipped_``),
    fitting state — is dropped.  An unfitted model, or one fitted without privacy
    (``privacy_`` is None), is returned whole: there is nothing private in it (an unfitted model
    holding a ``budget`` ledger then cannot be pickled: the ledger refuses, so that a joblib
    worker never fits with an independent copy of the user's account).  ``saved``: the allow-list
    of an estimator off the registry (a meta-estimator); by default its class's.
    """
    if state.get("privacy_") is None:
        return state
    keep = set(model.get_params(deep=False)) | set(saved_names(type(model)) if saved is None else saved)
    keep |= {"privacy_", "_sklearn_version"}
    out = {k: v for k, v in state.items() if k in keep}
    out.update({k: v for k, v in NEVER_PARAMS.items() if k in out})
    return out


class Registered:
    """Registry membership, ``save`` and a pickle that carries what a saved file carries.

    A fitted private model may be published as a ``save()`` file or as a pickle (``pickle``,
    ``joblib``, ``cloudpickle``): both hold the hyperparameters (``random_state`` and
    ``budget`` as ``None``), the allow-listed fitted parameters and ``privacy_``, never
    ``diagnostics_``, attributes computed from the raw data or any key
    (:func:`public_state`).  Unpickling gives a model that predicts, scores and samples as
    the original; continuing it (``partial_fit``) draws fresh keys.  Unlike a saved file, a
    pickle runs code when it is loaded: load pickles from trusted sources only.
    """

    _saved = None
    _not_saved = ()
    _cli_name = None
    _input = "table"

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("_saved") is None:
            return                                  # an abstract base or a user's subclass
        name = cls.__name__
        if name in _REGISTRY and _REGISTRY[name] is not cls:
            other = _REGISTRY[name]
            raise TypeError(f"estimator name {name!r} is registered already ({other.__module__}.{name})")
        if cls._input not in _INPUTS:
            raise TypeError(f"{name}._input must be one of {_INPUTS}, got {cls._input!r}")
        clash = [c.__name__ for c in _REGISTRY.values()
                 if c is not cls and cls._cli_name is not None and c._cli_name == cls._cli_name]
        if clash:
            raise TypeError(f"{name}: command-line name {cls._cli_name!r} is taken by {clash[0]}")
        _REGISTRY[name] = cls

    def __getstate__(self):
        return public_state(self, super().__getstate__())

    def save(self, path, *, allow_not_private=False, key=None):
        """Write the fitted model to ``path``: a versioned ``.npz`` with JSON metadata, no pickle.

        Saves the hyperparameters, the fitted parameters and ``privacy_``; never
        ``diagnostics_`` (computed from the raw data) nor ``random_state`` (the noise key).
        Read it back with :func:`dpem_fast.load`.  A fit without a privacy guarantee is
        refused unless ``allow_not_private=True``.

        ``key`` (bytes, or str taken as UTF-8): sign the file with HMAC-SHA256, so that
        ``dpem_fast.load(path, key=key)`` proves it came from a holder of the key unmodified.
        Without a key the file's SHA-256 only detects accidental damage: anyone can edit the
        file and recompute it, and loading then checks only that the privacy record is
        consistent with its own releases, not that the parameters are the fitted ones.
        """
        if not _WRITER:
            raise RuntimeError("save: the persistence layer (dpem_fast._persist) is not loaded")
        return _WRITER[0](self, path, allow_not_private=allow_not_private, key=key)
