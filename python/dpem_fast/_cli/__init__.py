"""The ``dpem-fast`` command line: fit, sample, report, accountant, audit (and demo, config).

User mistakes (a missing file, a bad column, epsilon <= 0, an unknown model or option, an
unreadable CSV) print one line ``dpem-fast: error: <cause>`` on stderr and exit with status 2;
no traceback.  Status and warning lines (``fitted ...``, ``wrote ...``) always go to stderr, so that
``-o -`` (``fit``: the model file; ``sample``: the CSV) can write the output to standard output.
The lists of models (the help, ``sample``'s refusal) are read from the registry.

LDA (``--model lda``) reads a text file with one document per line (blank lines skipped)
and a **public** vocabulary file with one word per line (``--vocabulary``); the documents
are tokenised as lower-cased runs of letters and counted over that vocabulary only
(:mod:`dpem_fast._text`).  The vocabulary must not be built from the documents.
"""
from __future__ import annotations

import sys


from ._commands import cmd_accountant, cmd_audit, cmd_fit, cmd_report, cmd_sample
from ._parser import build_parser, models
from ._readers import UserError

__all__ = ["main", "console_main", "build_parser", "models", "UserError"]


def main(argv=None, prog="dpem-fast") -> int:
    from .. import ModelFormatError

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
                "accountant": cmd_accountant, "audit": cmd_audit}[args.command](args, extra)
    except (UserError, ModelFormatError, ValueError, TypeError, OSError) as exc:
        msg = " ".join(str(exc).split()) or type(exc).__name__
        print(f"{prog}: error: {msg}", file=sys.stderr)
        return 2


def _basic(parser, args):
    from .. import __version__, show_config

    if args.version:
        print(f"dpem_fast {__version__}")
        if args.verbose:
            show_config()
        return 0
    if args.command == "config":
        show_config()
        return 0
    if args.command == "demo":
        from .._demo import run_demo

        return run_demo(epsilon=args.epsilon, n_threads=args.threads)
    parser.print_help()
    return 0


def console_main():   # pragma: no cover - the [project.scripts] entry
    sys.exit(main())

