"""The command line's parser: the subcommands and their options, and the model options read
from the registry (any constructor parameter of a registered estimator)."""
from __future__ import annotations

import argparse


from ._readers import UserError


def models():
    """``{command-line name: estimator class}`` of every registered estimator that has one
    (:mod:`dpem_fast._registry`: the command line imports no model)."""
    from .._registry import estimators

    return {cls._cli_name: cls for cls in estimators().values() if cls._cli_name is not None}


def sampling_models():
    """The command-line names of the registered models that can ``sample`` synthetic rows."""
    return [name for name, cls in models().items() if callable(getattr(cls, "sample", None))]


#: set by dedicated flags, not by the generic model options
_RESERVED = {"epsilon", "delta", "bounds", "data_norm", "random_state", "n_threads", "budget", "verbose",
             "vocabulary", "categories"}



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
    lines.append("mixed: DATA is a CSV with a header whose text columns are categorical: declare each with")
    lines.append("--category COLUMN=LABEL|LABEL|... (public labels, never read from DATA; other values count")
    lines.append("as 'other'); --bounds LO,HI or --bounds-file cover its numeric columns only; sampled numeric")
    lines.append("columns are float64 unless declared with --dtype COLUMN=int64 (never inferred from DATA);")
    lines.append("--columns A,B,... fits those columns only (the others are not read and need no declaration).")
    return "\n".join(lines)


# ------------------------------------------------------------------ data
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


_KEY_HELP_SIGN = ("sign the model file with HMAC-SHA256 under the bytes of this file (kept secret; a "
                  "trailing newline is part of the key); without it the file's checksum only detects damage")
_KEY_HELP_VERIFY = ("accept the model only if it is signed with the key in this file (HMAC-SHA256): proves "
                    "it was written by a key holder and not modified; without it a file is only checked "
                    "for damage and for a privacy record consistent with its own releases")


def build_parser(prog="dpem-fast"):
    p = argparse.ArgumentParser(
        prog=prog, description="Differentially private EM from the command line.  Models (--model): "
        + ", ".join(models()) + f"; sample from: {', '.join(sampling_models())}.  Status lines go to stderr; "
        "-o - writes the output to standard output.")
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
    fit.add_argument("--epsilon", type=float, required=True,
                     help="target epsilon (> 0); inf fits without privacy (a warning; the file is marked not private)")
    fit.add_argument("--delta", type=float, default=1e-5, help="target delta in (0, 1) (default 1e-5)")
    fit.add_argument("--bounds", help="LO,HI: the same public bounds for every column")
    fit.add_argument("--bounds-file", help="CSV of column,lower,upper (public per-column bounds)")
    fit.add_argument("--data-norm", type=float, help="public bound on the row norm")
    fit.add_argument("--columns", help="comma-separated column names (or indices) to use")
    fit.add_argument("--groups", metavar="COLUMN",
                     help="person-level privacy: the column (name or index) of each row's person id, numeric; "
                          "not a feature; needs --max-rows-per-group M")
    fit.add_argument("--random-state", type=int, default=None,
                     help="seed of the noise (kept secret: it is not written to the model file)")
    fit.add_argument("--threads", type=int, default=None)
    fit.add_argument("--category", action="append", metavar="COLUMN=LABEL|LABEL|...",
                     help="mixed: a categorical column and its public categories (repeat for each column)")
    fit.add_argument("--dtype", action="append", metavar="COLUMN=DTYPE",
                     help="mixed: the declared dtype of a numeric column in samples, e.g. age=int64 (repeat for each "
                          "column; undeclared numeric columns are float64)")
    fit.add_argument("--vocabulary", metavar="VOCAB.txt",
                     help="lda: the public vocabulary, one word per line (never built from the documents)")
    fit.add_argument("--progress", action="store_true",
                     help="progress bar on stderr: iteration, seconds per iteration, epsilon spent so far")
    fit.add_argument("-o", "--output", required=True, metavar="MODEL",
                     help="model file to write (.npz); - writes it to standard output")
    fit.add_argument("--key-file", metavar="KEY", help=_KEY_HELP_SIGN)

    sample = sub.add_parser("sample", help=f"synthetic rows from a saved model ({', '.join(sampling_models())})",
                            description="Synthetic rows from a fitted private model, in the original units and "
                                        "column names, clipped to the model's domain and shuffled: "
                                        "post-processing only, no extra privacy cost.  Models that sample: "
                                        + ", ".join(sampling_models()) + ".")
    sample.add_argument("model", metavar="MODEL")
    sample.add_argument("-n", type=int, required=True, help="number of rows")
    sample.add_argument("-o", "--output", required=True, metavar="OUT.csv",
                        help="CSV file to write; - writes it to standard output")
    sample.add_argument("--random-state", type=int, default=None)
    sample.add_argument("--drop-other", action="store_true",
                        help="mixed: draw categorical columns from their declared categories only (no 'other')")
    sample.add_argument("--key-file", metavar="KEY", help=_KEY_HELP_VERIFY)

    report = sub.add_parser("report", help="the privacy record and a summary of a saved model")
    report.add_argument("model", metavar="MODEL")
    report.add_argument("--json", action="store_true", help="machine-readable output")
    report.add_argument("--top-words", type=int, metavar="N",
                        help="lda: the N heaviest words of each topic (post-processing)")
    report.add_argument("--key-file", metavar="KEY", help=_KEY_HELP_VERIFY)

    aud = sub.add_parser(
        "audit", help="an empirical lower bound on epsilon of a model's release (dpem_fast.audit)",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_model_options_help(),
        description="Privacy audit: runs the model's release path on neighbouring datasets "
                    "with a canary on the domain's boundary (a synthetic dataset, no data "
                    "file) and prints a lower bound on epsilon valid at the stated confidence, next to "
                    "what the plan claims. A bound above the claim is a privacy bug; a bound below it "
                    "proves nothing.")
    aud.add_argument("--model", required=True, help="one of: " + ", ".join(models()))
    aud.add_argument("--epsilon", type=float, required=True, help="target epsilon of the fit (> 0)")
    aud.add_argument("--delta", type=float, default=1e-5, help="target delta in (0, 1) (default 1e-5)")
    aud.add_argument("--bounds", help="LO,HI: public bounds for every column")
    aud.add_argument("--data-norm", type=float, help="public bound on the row norm")
    aud.add_argument("--features", type=int, default=None,
                     help="columns of the synthetic dataset (default 2; 20 terms for LDA)")
    aud.add_argument("--trials", type=int, default=None,
                     help="trials per side (default 1000000 releases; 500 fits with --mode black-box)")
    aud.add_argument("--confidence", type=float, default=0.95)
    aud.add_argument("--mode", choices=("white-box", "black-box"), default="white-box",
                     help="white-box: the releases themselves; black-box: whole fits, the final model only")
    aud.add_argument("--scope", choices=("release", "iteration", "fit"), default="release")
    aud.add_argument("--statistic", default=None, help="with --scope release: the release to audit")
    aud.add_argument("--method", choices=("gdp", "threshold"), default=None,
                     help="default: gdp for Gaussian releases, threshold otherwise")
    aud.add_argument("--random-state", type=int, default=None)
    aud.add_argument("--threads", type=int, default=None)
    aud.add_argument("--json", action="store_true", help="machine-readable output")

    accountant = sub.add_parser("accountant", help="noise multiplier needed per accountant (the DP-EM plan)")
    accountant.add_argument("--pld", action="store_true", help="include the PLD accountant (slow)")
    return p


