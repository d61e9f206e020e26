"""``python -m dpem_fast.accounting``: noise table of the DP-EM GGG plan."""
import functools
import sys

from ._table import default_table_accountants, format_noise_table, noise_table


def main(argv=None):
    # the plan is the mixture paper's, not the accounting package's
    from ..mixture import dpem_plan
    k, j, delta = 10, 20, 1e-4
    include_pld = "--pld" in (argv or sys.argv[1:])
    plan = functools.partial(dpem_plan, "GGG", k, j)
    table = noise_table(plan, (0.1, 0.5, 1, 2, 4), delta,
                        default_table_accountants(include_pld=include_pld))
    print(f"DP-EM GGG plan, K={k}, J={j}: {j * (2 * k + 1)} Gaussian "
          f"releases; noise multiplier sigma/Delta needed per release "
          f"(Linear/Advanced: delta_i = 1e-8, classic calibration)\n")
    print(format_noise_table(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
