"""Plain-Python reference implementations, used as test oracles and benchmark baselines."""
