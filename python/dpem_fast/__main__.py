"""Command line: ``python -m dpem_fast [--version [--verbose]] | demo | config``."""
from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dpem_fast", description=__doc__)
    parser.add_argument("--version", action="store_true", help="print the version")
    parser.add_argument("--verbose", "-v", action="store_true", help="with --version: full build configuration")
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("config", help="print build and runtime configuration")
    demo = sub.add_parser("demo", help="fit a private Gaussian mixture on a real dataset")
    demo.add_argument("--epsilon", type=float, default=1.0)
    demo.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)

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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
