"""Command line: ``dpem-fast`` / ``python -m dpem_fast`` (see :mod:`dpem_fast._cli`)."""
from __future__ import annotations

import sys


def main(argv=None) -> int:
    from ._cli import main as cli_main

    return cli_main(argv, prog="python -m dpem_fast" if argv is None and sys.argv[0].endswith("__main__.py")
                    else "dpem-fast")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
