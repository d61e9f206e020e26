"""Compiled kernels of dpem_fast (Cython, nogil, OpenMP). No policy, no validation here."""
