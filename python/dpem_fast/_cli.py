"""The ``dpem-fast`` command line: fit, sample, report, accountant (and demo, config).

User mistakes (a missing file, a bad column, epsilon <= 0, an unknown model or option, an
unreadable CSV) print one line ``dpem-fast: error: <cause>`` on stderr and exit with status 2;
no traceback.

LDA (``--model lda``) reads a text file with one document per line (blank lines skipped)
and a **public** vocabulary file with one word per line (``--vocabulary``); the documents
are tokenised as lower-cased runs of letters and counted over that vocabulary only
(:mod:`dpem_fast._text`).  The vocabulary must not be built from the documents.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import sys

import numpy as np

def models():
    """``{command-line name: estimator class}`` of every registered estimator that has one
    (:mod:`dpem_fast._registry`: the command line imports no model)."""
    from ._registry import estimators

    return {cls._cli_name: cls for cls in estimators().values() if cls._cli_name is not None}


#: set by dedicated flags, not by the generic model options
_RESERVED = {"epsilon", "delta", "bounds", "data_norm", "random_state", "n_threads", "budget", "verbose",
             "vocabulary"}


class UserError(Exception):
    """A mistake in the command line or the input files: one line on stderr, exit 2."""


def _estimator_class(model):
    known = models()
    if model not in known:
        raise UserError(f"--model: unknown model {model!r}; choose one of {', '.join(known)}")
    return known[model]


def _model_options_help():
    lines = ["model options (any constructor parameter, underscores as dashes; values are numbers,",
             "true/false/none, comma-separated lists or strings):"]
    for key, cls in models().items():
        params = sorted(p for p in cls().get_params() if p not in _RESERVED)
        lines.append(f"  {key:<12} " + " ".join("--" + p.replace("_", "-") for p in params))
    lines.append("lda: DATA is a text file, one document per line; --vocabulary VOCAB.txt (required) is a")
    lines.append("public word list, one word per line, never built from the documents; a private fit also")
    lines.append("needs --total-samples N, the public number of documents (the corpus size is private and")
    lines.append("is never counted from DATA).")
    return "\n".join(lines)


# ------------------------------------------------------------------ data
def _parse_float(text, where):
    try:
        return float(text)
    except ValueError:
        raise UserError(f"{where}: {text!r} is not a number") from None


def read_table(path, columns=None):
    """(rows as float64 array, column names) from CSV, .npy or Parquet."""
    if not os.path.isfile(path):
        raise UserError(f"DATA: no such file: {path}")
    ext = os.path.splitext(path)[1].lower()
    if ext == ".npy":
        try:
            X = np.load(path, allow_pickle=False)
        except (ValueError, OSError, EOFError) as exc:
            raise UserError(f"DATA: cannot read {path} as .npy ({exc})") from None
        if X.ndim != 2 or X.dtype.kind not in "biuf":
            raise UserError(f"DATA: {path} must hold a 2-D numeric array, got shape {X.shape} dtype {X.dtype}")
        names = [f"x{i}" for i in range(X.shape[1])]
        X = X.astype(np.float64)
    elif ext == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise UserError("DATA: reading Parquet needs pyarrow (pip install pyarrow)") from None
        try:
            table = pq.read_table(path)
        except Exception as exc:   # pyarrow's own error types
            raise UserError(f"DATA: cannot read {path} as Parquet ({exc})") from None
        names = list(table.column_names)
        try:
            X = np.column_stack([table.column(n).to_numpy().astype(np.float64) for n in names])
        except (ValueError, TypeError) as exc:
            raise UserError(f"DATA: {path}: non-numeric column ({exc})") from None
    else:
        X, names = _read_csv(path)
    if columns:
        idx = []
        for c in columns.split(","):
            c = c.strip()
            if c in names:
                idx.append(names.index(c))
            elif c.isdigit() and int(c) < len(names):
                idx.append(int(c))
            else:
                raise UserError(f"--columns: no column {c!r} in {path} (columns: {', '.join(names)})")
        X, names = X[:, idx], [names[i] for i in idx]
    if X.shape[0] == 0:
        raise UserError(f"DATA: {path} has no rows")
    return np.ascontiguousarray(X), names


def _read_csv(path):
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            rows = [r for r in csv.reader(fh) if r]
    except (UnicodeDecodeError, csv.Error, OSError) as exc:
        raise UserError(f"DATA: cannot read {path} as CSV ({exc})") from None
    if not rows:
        raise UserError(f"DATA: {path} is empty")

    def numeric(cell):
        try:
            float(cell)
            return True
        except ValueError:
            return False

    header = not all(numeric(c) for c in rows[0])
    names = [c.strip() for c in rows[0]] if header else [f"x{i}" for i in range(len(rows[0]))]
    body = rows[1:] if header else rows
    out = np.empty((len(body), len(names)))
    for i, r in enumerate(body):
        if len(r) != len(names):
            raise UserError(f"DATA: {path} line {i + 1 + header}: {len(r)} fields, expected {len(names)}")
        for j, cell in enumerate(r):
            out[i, j] = _parse_float(cell, f"DATA: {path} line {i + 1 + header}, column {names[j]!r}")
    return out, names


def _value(text):
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    if "," in text:
        return [_value(t) for t in text.split(",")]
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def _model_options(cls, extra):
    known = cls().get_params()
    opts, i = {}, 0
    while i < len(extra):
        flag = extra[i]
        if not flag.startswith("--"):
            raise UserError(f"unexpected argument {flag!r}")
        name, _, val = flag[2:].partition("=")
        key = name.replace("-", "_")
        if key not in known or key in _RESERVED:
            raise UserError(f"unknown option --{name} for {cls.__name__} (see dpem-fast fit --help)")
        if not val:
            if i + 1 >= len(extra):
                raise UserError(f"--{name} needs a value")
            val, i = extra[i + 1], i + 1
        opts[key] = _value(val)
        i += 1
    return opts


def _bounds_file(path, names):
    """A CSV ``column,lower,upper`` (header optional), one line per selected column."""
    if not os.path.isfile(path):
        raise UserError(f"--bounds-file: no such file: {path}")
    with open(path, newline="", encoding="utf-8") as fh:
        rows = [r for r in csv.reader(fh) if r]
    table = {}
    for r in rows:
        if len(r) != 3:
            raise UserError(f"--bounds-file: each line must be column,lower,upper; got {','.join(r)!r}")
        if r[0].strip().lower() == "column":
            continue
        table[r[0].strip()] = (_parse_float(r[1], "--bounds-file"), _parse_float(r[2], "--bounds-file"))
    missing = [n for n in names if n not in table]
    if missing:
        raise UserError(f"--bounds-file: no bounds for column(s) {', '.join(missing)}")
    return (np.array([table[n][0] for n in names]), np.array([table[n][1] for n in names]))


# ------------------------------------------------------------------ commands
def read_vocabulary(path):
    """The public vocabulary: one word per line (blank lines skipped), lower case, distinct."""
    if not os.path.isfile(path):
        raise UserError(f"--vocabulary: no such file: {path}")
    try:
        with open(path, encoding="utf-8") as fh:
            words = [line.strip() for line in fh if line.strip()]
    except (UnicodeDecodeError, OSError) as exc:
        raise UserError(f"--vocabulary: cannot read {path} ({exc})") from None
    if not words:
        raise UserError(f"--vocabulary: {path} has no words")
    from ._text import tokenize

    for i, w in enumerate(words):
        if tokenize(w) != [w]:
            raise UserError(f"--vocabulary: {path}: word {i + 1} ({w!r}) must be one lower-case run of letters "
                            "(documents are split on everything else, so it could never be counted)")
    return words


def read_documents(path, vocabulary):
    """(document-term counts over ``vocabulary``, number of documents) from one document per line."""
    from ._text import count_matrix

    if not os.path.isfile(path):
        raise UserError(f"DATA: no such file: {path}")
    try:
        with open(path, encoding="utf-8") as fh:
            docs = [line for line in fh if line.strip()]
    except (UnicodeDecodeError, OSError) as exc:
        raise UserError(f"DATA: cannot read {path} as text ({exc})") from None
    if not docs:
        raise UserError(f"DATA: {path} has no documents (one document per line)")
    try:
        return count_matrix(docs, vocabulary)
    except ValueError as exc:
        raise UserError(f"--vocabulary: {exc}") from None


def _key_file(path):
    """The signing key of --key-file: the file's bytes, exactly (a trailing newline is part of
    the key); None without the option."""
    if path is None:
        return None
    if not os.path.isfile(path):
        raise UserError(f"--key-file: no such file: {path}")
    with open(path, "rb") as fh:
        key = fh.read()
    if not key:
        raise UserError(f"--key-file: {path} is empty")
    return key


def cmd_fit(args, extra):
    from . import _persist

    key = _key_file(args.key_file)      # before the fit: a bad key file costs no budget
    cls = _estimator_class(args.model)
    lda = cls._input == "documents"
    if lda:
        for flag in ("columns", "bounds", "bounds_file", "data_norm"):
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
        X, names = read_table(args.data, args.columns)
    kw = _model_options(cls, extra)
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
        kw["bounds"] = _bounds_file(args.bounds_file, names)
    if args.data_norm is not None:
        kw["data_norm"] = args.data_norm
    model = cls(**kw).fit(X)
    if args.progress:
        model.set_params(verbose=0)     # a display setting of this run, not of the saved model
    _persist.save(model, args.output, info={"columns": names}, key=key)   # not the data file's name
    # no row or document count: under add/remove it is private (the saved model never holds it)
    shape = f"{X.shape[1]} vocabulary words" if lda else f"{X.shape[1]} columns"
    print(f"fitted {cls.__name__} on {shape}; "
          f"epsilon spent {model.privacy_.epsilon_spent:.6g} at delta={model.privacy_.delta:g}; saved {args.output}"
          + (" (signed with the key file)" if key is not None else ""))
    return 0


def _load(path, key_file=None):
    """(model, the file's info, a line on what the file proves about its origin)."""
    from . import _persist

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
    if dom.get("radius") is not None and dom.get("center") is not None:
        c, r = np.asarray(dom["center"]), float(dom["radius"])
        norms = np.linalg.norm(X - c, axis=1, keepdims=True)
        return c + (X - c) * np.minimum(1.0, r / np.maximum(norms, np.finfo(float).tiny))
    return X


def cmd_sample(args, extra):
    if extra:
        raise UserError(f"unexpected argument {extra[0]!r}")
    model, info, origin = _load(args.model, args.key_file)
    if not hasattr(model, "sample"):
        raise UserError(f"MODEL: {type(model).__name__} does not support sampling (gmm and bernoulli do)")
    if args.n < 1:
        raise UserError(f"-n must be >= 1, got {args.n}")
    X, _ = model.sample(args.n, random_state=args.random_state)
    X = np.random.default_rng(args.random_state).permutation(_clip_to_domain(model, np.asarray(X, dtype=float)))
    names = info.get("columns") or [f"x{i}" for i in range(X.shape[1])]
    with open(args.output, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(names)
        w.writerows([[repr(float(v)) for v in row] for row in X])
    print(f"wrote {args.n} synthetic rows to {args.output} (post-processing of the private model)")
    return 0


def _summary(model):
    from ._persist import _persist_attrs

    return {k: (list(np.shape(v)) if isinstance(v, np.ndarray) else v) for k, v in _persist_attrs(model).items()
            if not k.startswith("_")}     # private inference state (e.g. DPKMeans._domain) is not summarised


def cmd_report(args, extra):
    from ._persist import _Inline, record_to_json

    if extra:
        raise UserError(f"unexpected argument {extra[0]!r}")
    model, info, origin = _load(args.model, args.key_file)
    params = {k: v for k, v in model.get_params().items()}
    topics = _top_words(model, args.top_words) if args.top_words is not None else None
    if args.json:
        out = {"estimator": type(model).__name__, "columns": info.get("columns"),
               "params": _Inline()(params, "params"), "fitted_shapes": _summary(model),
               "privacy": record_to_json(model.privacy_, _Inline())}
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
    print("privacy record:" if model.privacy_ is not None else "privacy record: NONE (fitted without privacy)")
    if model.privacy_ is not None:
        print(str(model.privacy_))
    if topics is not None:
        print(f"top words per topic (post-processing of the private topics):")
        for k, words in enumerate(topics):
            print(f"  topic {k:<3}: {' '.join(words)}")
    return 0


def _top_words(model, n_words):
    """[[word, ...] per topic]: the heaviest words of each released topic (post-processing)."""
    from ._text import top_word_indices

    vocabulary = getattr(model, "vocabulary", None)
    if not hasattr(model, "components_") or vocabulary is None:
        raise UserError(f"--top-words: {type(model).__name__} is not a topic model with a vocabulary "
                        "(fit one with --model lda)")
    if n_words < 1:
        raise UserError(f"--top-words must be >= 1, got {n_words}")
    return [[vocabulary[j] for j in row] for row in top_word_indices(model.components_, n_words)]


def cmd_accountant(args, extra):
    from .accounting.__main__ import main as table_main

    if extra:
        raise UserError(f"unexpected argument {extra[0]!r}")
    return table_main(["--pld"] if args.pld else [])


# ------------------------------------------------------------------ parser
_KEY_HELP_SIGN = ("sign the model file with HMAC-SHA256 under the bytes of this file (kept secret; a "
                  "trailing newline is part of the key); without it the file's checksum only detects damage")
_KEY_HELP_VERIFY = ("accept the model only if it is signed with the key in this file (HMAC-SHA256): proves "
                    "it was written by a key holder and not modified; without it a file is only checked "
                    "for damage and for a privacy record consistent with its own releases")


def build_parser(prog="dpem-fast"):
    p = argparse.ArgumentParser(prog=prog, description="Differentially private EM from the command line.")
    p.add_argument("--version", action="store_true", help="print the version")
    p.add_argument("--verbose", "-v", action="store_true", help="with --version: full build configuration")
    sub = p.add_subparsers(dest="command")
    sub.add_parser("config", help="print build and runtime configuration")
    demo = sub.add_parser("demo", help="fit a private Gaussian mixture on a real dataset")
    demo.add_argument("--epsilon", type=float, default=1.0)
    demo.add_argument("--threads", type=int, default=None)

    fit = sub.add_parser(
        "fit", help="fit a private model on a CSV / .npy / Parquet file and save it",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_model_options_help(),
        description="Fit a private model. The data domain is declared with --bounds, --bounds-file or "
                    "--data-norm; with none of them the engine estimates it privately (part of the budget).")
    fit.add_argument("data", metavar="DATA", help="CSV (header optional), .npy, or .parquet (needs pyarrow); "
                                                   "for --model lda a text file, one document per line")
    fit.add_argument("--model", required=True, help="one of: " + ", ".join(models()))
    fit.add_argument("--epsilon", type=float, required=True, help="target epsilon (> 0)")
    fit.add_argument("--delta", type=float, default=1e-5, help="target delta in (0, 1) (default 1e-5)")
    fit.add_argument("--bounds", help="LO,HI: the same public bounds for every column")
    fit.add_argument("--bounds-file", help="CSV of column,lower,upper (public per-column bounds)")
    fit.add_argument("--data-norm", type=float, help="public bound on the row norm")
    fit.add_argument("--columns", help="comma-separated column names (or indices) to use")
    fit.add_argument("--random-state", type=int, default=None,
                     help="seed of the noise (kept secret: it is not written to the model file)")
    fit.add_argument("--threads", type=int, default=None)
    fit.add_argument("--vocabulary", metavar="VOCAB.txt",
                     help="lda: the public vocabulary, one word per line (never built from the documents)")
    fit.add_argument("--progress", action="store_true",
                     help="progress bar on stderr: iteration, seconds per iteration, epsilon spent so far")
    fit.add_argument("-o", "--output", required=True, metavar="MODEL", help="model file to write (.npz)")
    fit.add_argument("--key-file", metavar="KEY", help=_KEY_HELP_SIGN)

    sample = sub.add_parser("sample", help="synthetic rows from a saved model (gmm, bernoulli)",
                            description="Synthetic rows from a fitted private model, in the original units and "
                                        "column names, clipped to the model's domain and shuffled: "
                                        "post-processing only, no extra privacy cost.")
    sample.add_argument("model", metavar="MODEL")
    sample.add_argument("-n", type=int, required=True, help="number of rows")
    sample.add_argument("-o", "--output", required=True, metavar="OUT.csv")
    sample.add_argument("--random-state", type=int, default=None)
    sample.add_argument("--key-file", metavar="KEY", help=_KEY_HELP_VERIFY)

    report = sub.add_parser("report", help="the privacy record and a summary of a saved model")
    report.add_argument("model", metavar="MODEL")
    report.add_argument("--json", action="store_true", help="machine-readable output")
    report.add_argument("--top-words", type=int, metavar="N",
                        help="lda: the N heaviest words of each topic (post-processing)")
    report.add_argument("--key-file", metavar="KEY", help=_KEY_HELP_VERIFY)

    accountant = sub.add_parser("accountant", help="noise multiplier needed per accountant (the DP-EM plan)")
    accountant.add_argument("--pld", action="store_true", help="include the PLD accountant (slow)")
    return p


def main(argv=None, prog="dpem-fast") -> int:
    from . import ModelFormatError

    parser = build_parser(prog)
    argv = list(sys.argv[1:] if argv is None else argv)
    for i in range(len(argv) - 1):      # "--bounds -4,4": a value starting with "-" is not an option
        if argv[i] == "--bounds" and argv[i + 1].startswith("-"):
            argv[i:i + 2] = [f"--bounds={argv[i + 1]}", ""]
    args, extra = parser.parse_known_args([a for a in argv if a != ""])
    try:
        if args.version or args.command in (None, "config", "demo"):
            if extra:
                parser.error(f"unrecognized arguments: {' '.join(extra)}")
            return _basic(parser, args)
        return {"fit": cmd_fit, "sample": cmd_sample, "report": cmd_report,
                "accountant": cmd_accountant}[args.command](args, extra)
    except (UserError, ModelFormatError, ValueError, TypeError, OSError) as exc:
        msg = " ".join(str(exc).split()) or type(exc).__name__
        print(f"{prog}: error: {msg}", file=sys.stderr)
        return 2


def _basic(parser, args):
    from . import __version__, show_config

    if args.version:
        print(f"dpem_fast {__version__}")
        if args.verbose:
            show_config()
        return 0
    if args.command == "config":
        show_config()
        return 0
    if args.command == "demo":
        from ._demo import run_demo

        return run_demo(epsilon=args.epsilon, n_threads=args.threads)
    parser.print_help()
    return 0


def console_main():   # pragma: no cover - the [project.scripts] entry
    sys.exit(main())

