"""The command line's commands: fit, sample, report, accountant."""
from __future__ import annotations

import contextlib
import csv
import json
import os
import shutil
import sys
import tempfile
import warnings

import numpy as np

from ._parser import _estimator_class, _model_options, sampling_models
from ._readers import (UserError, _bounds_file, _key_file, _parse_float, read_documents, read_mixed_table, read_table,
                       read_vocabulary)


def _fit_reporting_noise(model, X, groups=None):
    """``model.fit(X)`` (with ``groups``, person-level); a :class:`~dpem_fast.NoiseDominatedWarning`
    becomes one ``warning:`` line on stderr (its message holds no number of the data), other
    warnings pass through."""
    from ..accounting import NoiseDominatedWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", NoiseDominatedWarning)
        model.fit(X) if groups is None else model.fit(X, groups=groups)
    for w in caught:
        if issubclass(w.category, NoiseDominatedWarning):
            print("warning: " + " ".join(str(w.message).split()), file=sys.stderr)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return model


def cmd_fit(args, extra):
    from .. import _persist

    key = _key_file(args.key_file)      # before the fit: a bad key file costs no budget
    not_private = _epsilon_inf(args.epsilon)        # before reading anything
    if args.output == "-" and sys.stdout.isatty():
        raise UserError("-o -: the model file is binary; redirect standard output to a file or a pipe")
    cls = _estimator_class(args.model)
    lda = cls._input == "documents"
    if lda:
        for flag in ("columns", "bounds", "bounds_file", "data_norm", "category", "dtype"):
            if getattr(args, flag) is not None:
                raise UserError(f"--{flag.replace('_', '-')}: not used by --model lda (documents are "
                                "capped at --max-doc-length tokens instead)")
        if args.vocabulary is None:
            raise UserError("--model lda needs --vocabulary VOCAB.txt (a public word list, one word per line)")
        vocabulary = read_vocabulary(args.vocabulary)
        X, names = read_documents(args.data, vocabulary), None
    else:
        if args.vocabulary is not None:
            raise UserError("--vocabulary: only for --model lda")
        if "categories" in cls().get_params():      # a mixed table: text columns with declared categories
            X, names, categories = read_mixed_table(args.data, args.category, args.columns)
        elif args.category or args.dtype:
            raise UserError(f"--{'category' if args.category else 'dtype'}: only for --model mixed")
        else:
            X, names = read_table(args.data, args.columns)
    groups = None
    if args.groups is not None:
        if lda:
            raise UserError("--groups: the command line fits lda per document")
        if "categories" in cls().get_params():
            raise UserError("--groups: the command line fits a mixed table per row (fit DPMixedMixture with "
                            "groups= from Python)")
        X, names, groups = _group_column(args, X, names)
    kw = _model_options(cls, extra)
    if not lda and "categories" in cls().get_params():
        kw["categories"] = categories or None
        kw["dtypes"] = _declared_dtypes(args.dtype)
    known = cls().get_params()
    kw.update(epsilon=args.epsilon, delta=args.delta)
    if lda:
        kw["vocabulary"] = vocabulary
    if args.random_state is not None:
        kw["random_state"] = args.random_state
    if args.threads is not None:
        kw["n_threads"] = args.threads
    if args.progress:
        if "verbose" not in known:
            raise UserError(f"--progress: {cls.__name__} has no progress display")
        kw["verbose"] = 1
    declared = [a for a in ("bounds", "bounds_file", "data_norm") if getattr(args, a) is not None]
    if len(declared) > 1:
        raise UserError("give at most one of --bounds, --bounds-file, --data-norm")
    for a in declared:
        target = "bounds" if a == "bounds_file" else a
        if target not in known:
            raise UserError(f"--{a.replace('_', '-')}: {cls.__name__} has no declared domain of that kind "
                            "(see its clip_norm / model options)")
    if args.bounds is not None:
        parts = args.bounds.split(",")
        if len(parts) != 2:
            raise UserError(f"--bounds: expected LO,HI, got {args.bounds!r}")
        kw["bounds"] = (_parse_float(parts[0], "--bounds"), _parse_float(parts[1], "--bounds"))
    if args.bounds_file is not None:
        if "categories" in known:           # mixed: the numeric columns' bounds, by name
            numeric = [n for n in names if n not in (kw.get("categories") or {})]
            kw["bounds"] = dict(zip(numeric, zip(*_bounds_file(args.bounds_file, numeric))))
        else:
            kw["bounds"] = _bounds_file(args.bounds_file, names)
    if args.data_norm is not None:
        kw["data_norm"] = args.data_norm
    if not_private:
        status("warning: --epsilon inf: a NON-PRIVATE fit (no noise, no guarantee); the model file is marked "
               "not private and must not be published")
    model = _fit_reporting_noise(cls(**kw), X, groups)
    if args.progress:
        model.set_params(verbose=0)     # a display setting of this run, not of the saved model
    with _output(args.output) as out:
        _persist.save(model, out, info={"columns": names}, key=key,         # not the data file's name
                      allow_not_private=not_private)
    # no row or document count: under add/remove it is private (the saved model never holds it)
    shape = f"{X.shape[1]} vocabulary words" if lda else f"{X.shape[1]} columns"
    spent = ("not private (epsilon=inf)" if model.privacy_ is None else
             f"epsilon spent {model.privacy_.epsilon_spent:.6g} at delta={model.privacy_.delta:g}")
    status(f"fitted {cls.__name__} on {shape}; {spent}; saved {_where(args.output)}"
           + (" (signed with the key file)" if key is not None else ""))
    return 0


def status(line):
    """A status or warning line: always on stderr, so that ``-o -`` leaves stdout to the output."""
    print(line, file=sys.stderr)


def _where(output):
    return "to standard output" if output == "-" else output


@contextlib.contextmanager
def _output(path):
    """``path`` to write (a file path), or for ``-`` a temporary file whose bytes are copied to
    standard output afterwards (``cmd_fit`` refuses a terminal before the fit)."""
    if path != "-":
        yield path
        return
    with tempfile.TemporaryDirectory() as d:
        tmp = os.path.join(d, "out")
        yield tmp
        sys.stdout.flush()
        with open(tmp, "rb") as fh:
            shutil.copyfileobj(fh, sys.stdout.buffer)
        sys.stdout.buffer.flush()


def _epsilon_inf(epsilon):
    """True for ``--epsilon inf`` (a non-private fit, as ``epsilon=inf`` in Python: allowed, said
    loudly before the fit, the file marked not private); a NaN is refused before any fit work."""
    if epsilon != epsilon:
        raise UserError("--epsilon: nan is not a privacy level; give a number > 0 (or inf for a non-private fit)")
    return epsilon == float("inf")


def _declared_dtypes(flags):
    """``{column: dtype name}`` from ``--dtype COLUMN=DTYPE`` flags (None without any); the model
    checks the names and dtypes."""
    out = {}
    for flag in flags or ():
        col, sep, dtype = flag.partition("=")
        if not sep or not col.strip() or not dtype.strip():
            raise UserError(f"--dtype: expected COLUMN=DTYPE (e.g. age=int64), got {flag!r}")
        out[col.strip()] = dtype.strip()
    return out or None


def _group_column(args, X, names):
    """``(X without the person column, its names, the person ids)`` for ``--groups COLUMN``: the
    column is read from the whole file, then the features are ``--columns`` (default: every
    other column)."""
    every, all_names = read_table(args.data, None) if args.columns else (X, names)
    c = args.groups.strip()
    if c in all_names:
        j = all_names.index(c)
    elif c.isdigit() and int(c) < len(all_names):
        j = int(c)
    else:
        raise UserError(f"--groups: no column {c!r} in {args.data} (columns: {', '.join(all_names)})")
    if all_names[j] in names and args.columns:
        raise UserError(f"--groups: column {all_names[j]!r} is also in --columns; a person id is not a feature")
    keep = [i for i, n in enumerate(names) if n != all_names[j]]
    return np.ascontiguousarray(X[:, keep]), [names[i] for i in keep], every[:, j]


def _load(path, key_file=None):
    """(model, the file's info, a line on what the file proves about its origin)."""
    from .. import _persist

    key = _key_file(key_file)
    if not os.path.isfile(path):
        raise UserError(f"MODEL: no such file: {path}")
    model = _persist.load(path, key=key)
    meta = _persist._read(path, key)[0]
    signed = meta.get("signature") is not None
    origin = ("signed (HMAC-SHA256), signature verified with the key file" if key is not None else
              "signed (HMAC-SHA256), signature not verified (no --key-file)" if signed else
              "unsigned: its checksum detects damage only")
    return model, meta.get("info") or {}, origin


def _clip_to_domain(model, X):
    """Clip synthetic rows to the model's recorded (declared or privately estimated) domain."""
    rec = model.privacy_
    dom = rec.data_domain if rec is not None else {}
    if dom.get("bounds") is not None:
        lo, hi = dom["bounds"]
        return np.clip(X, lo, hi)
    scale = dom.get("scale", dom.get("radius"))     # "radius": a record written before issue 23
    if scale is not None and dom.get("center") is not None:
        c, s = np.asarray(dom["center"]), np.asarray(scale, dtype=float)
        norms = np.linalg.norm((X - c) / s, axis=1, keepdims=True)
        return c + (X - c) * np.minimum(1.0, 1.0 / np.maximum(norms, np.finfo(float).tiny))
    return X


def cmd_sample(args, extra):
    if extra:
        raise UserError(f"unexpected argument {extra[0]!r}")
    model, info, origin = _load(args.model, args.key_file)
    if not hasattr(model, "sample"):
        raise UserError(f"MODEL: {type(model).__name__} does not support sampling (models that do: "
                        f"{', '.join(sampling_models())})")
    if args.n < 1:
        raise UserError(f"-n must be >= 1, got {args.n}")
    if args.drop_other and "categories" not in model.get_params():
        raise UserError("--drop-other: only for a mixed model")
    if "categories" in model.get_params():      # a table: the model's own columns and dtypes, clipped by it
        X, _ = model.sample(args.n, other="drop" if args.drop_other else "missing", random_state=args.random_state)
        if hasattr(X, "to_csv"):
            X.to_csv(sys.stdout if args.output == "-" else args.output, index=False)
            status(_wrote(args))
            return 0
        X = np.asarray(X, dtype=float)
    else:
        X, _ = model.sample(args.n, random_state=args.random_state)
        X = _clip_to_domain(model, np.asarray(X, dtype=float))
    X = np.random.default_rng(args.random_state).permutation(X)
    names = info.get("columns") or [f"x{i}" for i in range(X.shape[1])]
    with contextlib.nullcontext(sys.stdout) if args.output == "-" else \
            open(args.output, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(names)
        w.writerows([[repr(float(v)) for v in row] for row in X])
    status(_wrote(args))
    return 0


def _wrote(args):
    return (f"wrote {args.n} synthetic rows {'to standard output' if args.output == '-' else 'to ' + args.output} "
            "(post-processing of the private model)")


def _summary(model):
    from .._persist import _persist_attrs

    def shape(v):
        if isinstance(v, np.ndarray):
            return list(np.shape(v))
        if isinstance(v, list) and v and all(isinstance(a, np.ndarray) for a in v):
            return [list(np.shape(a)) for a in v]       # a list of arrays (a mixed model's per-column ones)
        return v
    return {k: shape(v) for k, v in _persist_attrs(model).items()
            if not k.startswith("_")}     # private inference state (e.g. DPKMeans._domain) is not summarised


def cmd_report(args, extra):
    from .._engine._report import privacy_report
    from .._persist import _Inline, record_to_json

    if extra:
        raise UserError(f"unexpected argument {extra[0]!r}")
    model, info, origin = _load(args.model, args.key_file)
    params = {k: v for k, v in model.get_params().items()}
    topics = _top_words(model, args.top_words) if args.top_words is not None else None
    if args.json:
        out = {"estimator": type(model).__name__, "columns": info.get("columns"),
               "params": _Inline()(params, "params"), "fitted_shapes": _summary(model),
               "privacy": record_to_json(model.privacy_, _Inline()),
               "release_order": None if model.privacy_ is None else list(model.privacy_.releases)}
        if topics is not None:
            out["top_words"] = topics
        print(json.dumps(out, indent=2, sort_keys=True))
        return 0
    print(f"model         : {type(model).__name__}")
    print(f"file          : {origin}; privacy record consistent with its releases")
    if info.get("columns"):
        print(f"columns       : {', '.join(info['columns'])}")
    print("parameters    : " + ", ".join(
        f"{k}=<{len(v)} items>" if isinstance(v, (list, tuple)) and len(v) > 8 else f"{k}={v!r}"
        for k, v in sorted(params.items()) if v is not None and not isinstance(v, np.ndarray)))
    for k, v in _summary(model).items():
        print(f"  {k:<24} {'shape ' + str(tuple(v)) if isinstance(v, list) else v}")
    print(privacy_report(model, columns=info.get("columns")))     # the renderer of dpem_fast.privacy_report
    if topics is not None:
        print(f"top words per topic (post-processing of the private topics):")
        for k, words in enumerate(topics):
            print(f"  topic {k:<3}: {' '.join(words)}")
    return 0


def _top_words(model, n_words):
    """[[word, ...] per topic]: the heaviest words of each released topic (post-processing)."""
    from .._text import top_word_indices

    vocabulary = getattr(model, "vocabulary", None)
    if not hasattr(model, "components_") or vocabulary is None:
        raise UserError(f"--top-words: {type(model).__name__} is not a topic model with a vocabulary "
                        "(fit one with --model lda)")
    if n_words < 1:
        raise UserError(f"--top-words must be >= 1, got {n_words}")
    return [[vocabulary[j] for j in row] for row in top_word_indices(model.components_, n_words)]


def cmd_accountant(args, extra):
    from ..accounting.__main__ import main as table_main

    if extra:
        raise UserError(f"unexpected argument {extra[0]!r}")
    return table_main(["--pld"] if args.pld else [])


# ------------------------------------------------------------------ parser


def cmd_audit(args, extra):
    """``dpem-fast audit``: :func:`dpem_fast.audit.audit` of a model built from the options."""
    from ..audit import audit

    cls = _estimator_class(args.model)
    known = cls().get_params()
    kw = _model_options(cls, extra)
    kw.update(epsilon=args.epsilon, delta=args.delta)
    if args.threads is not None:
        kw["n_threads"] = args.threads
    if args.bounds is not None and args.data_norm is not None:
        raise UserError("give at most one of --bounds, --data-norm")
    declared = "data_norm" in known or "bounds" in known      # else the model's domain is fixed
    if declared and args.bounds is None and args.data_norm is None:
        raise UserError("the audit needs a declared domain: --bounds LO,HI or --data-norm R")
    for a in ("bounds", "data_norm"):
        if getattr(args, a) is not None and a not in known:
            raise UserError(f"--{a.replace('_', '-')}: {cls.__name__} has no declared domain of that kind")
    if args.bounds is not None:
        parts = args.bounds.split(",")
        if len(parts) != 2:
            raise UserError(f"--bounds: expected LO,HI, got {args.bounds!r}")
        kw["bounds"] = (_parse_float(parts[0], "--bounds"), _parse_float(parts[1], "--bounds"))
    elif args.data_norm is not None:
        kw["data_norm"] = args.data_norm
    r = audit(cls(**kw), n_trials=args.trials, confidence=args.confidence, random_state=args.random_state,
              mode=args.mode, scope=args.scope, statistic=args.statistic, method=args.method,
              n_features=args.features)
    out = {"model": cls.__name__, "mode": r.mode, "statistic": r.statistic, "scope": r.claimed_for,
           "audited": r.audited, "method": r.method,
           "confidence": r.confidence, "n_trials": r.n_trials, "delta": r.delta,
           "epsilon_lower": r.epsilon_lower, "epsilon_claimed": r.epsilon_claimed,
           "plan_epsilon": r.plan_epsilon, "violated": bool(r.violated),
           "canary_attained": float(r.canary["attained"])}
    if args.json:
        print(json.dumps(out))
    else:
        print(f"{cls.__name__}: {r.audited}, {r.method} bound at {r.confidence:.0%} "
              f"confidence, {r.n_trials} trials per side")
        print(f"  epsilon lower bound {r.epsilon_lower:.4f}   claimed {r.epsilon_claimed:.4f}   "
              f"(whole fit {r.plan_epsilon:.4f}, delta {r.delta:g})")
        print("  VIOLATED: the bound exceeds the claim" if r.violated else
              "  consistent with the claim (a lower bound; it proves no privacy)")
    return 1 if r.violated else 0
