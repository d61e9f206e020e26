"""The package version, in its own module so that any layer can read it without importing
the package (and with it every estimator)."""
#: The installed version of dpem_fast (PEP 440).
__version__ = "0.1.0.dev0"
