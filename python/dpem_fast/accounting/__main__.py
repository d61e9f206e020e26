"""``python -m dpem_fast.accounting``: noise table of the DP-EM GGG plan.

The plan is the mixture paper's (:func:`dpem_fast.mixture.dpem_plan`): per iteration one
Gaussian release for the weights and K each for the means and covariances, all at the same
noise multiplier.  What the table needs of it is its count, ``J (2K + 1)`` Gaussian releases
at multiplier z, composed; the accounting package knows mechanisms, not models, so it
composes that count itself (the tests check the table is the one of ``dpem_plan``).
"""
import sys

from ._events import GaussianEvent, SelfComposedEvent
from ._table import default_table_accountants, format_noise_table, noise_table


def main(argv=None):
    k, j, delta = 10, 20, 1e-4
    n_releases = j * (2 * k + 1)
    include_pld = "--pld" in (argv or sys.argv[1:])
    table = noise_table(lambda z: SelfComposedEvent(GaussianEvent(z), n_releases), (0.1, 0.5, 1, 2, 4), delta,
                        default_table_accountants(include_pld=include_pld))
    print(f"DP-EM GGG plan, K={k}, J={j}: {n_releases} Gaussian "
          f"releases; noise multiplier sigma/Delta needed per release "
          f"(Linear/Advanced: delta_i = 1e-8, classic calibration)\n")
    print(format_noise_table(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
