"""Mixed tables (numeric and categorical columns) as the engine's rows: the public schema of a
table, its encoding into numeric values and category codes, and back.

Everything here reads only public declarations: column names and pandas dtypes, the user's
``categories`` (or a ``category`` dtype's list, taken as the user's declaration), never the
values that occur in the data.  A text column without declared categories is refused: the
list of its distinct values is itself private (a rare value reveals that someone has it).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from .._kernels.mixed import MixedLayout

__all__ = ["TableSchema", "table_schema", "is_frame"]

_ARRAY_NAME = re.compile(r"^x(\d+)$")


def is_frame(X):
    """True for a pandas DataFrame (duck-typed: no pandas import needed to say no)."""
    return hasattr(X, "columns") and hasattr(X, "dtypes") and hasattr(X, "iloc")


def _labels(values, where):
    """A declared category list as a 1-D array: all strings (object), or all numbers / booleans
    (numeric), unique, not empty.  An int ``C`` declares the codes 0 .. C - 1."""
    if isinstance(values, (int, np.integer)) and not isinstance(values, (bool, np.bool_)):
        if values < 1:
            raise ValueError(f"categories[{where!r}]: a number of categories must be >= 1, got {values}")
        return np.arange(int(values))
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise TypeError(f"categories[{where!r}] must be a list of category labels or a number of "
                        f"categories, got {type(values).__name__}")
    vals = list(values)
    if not vals:
        raise ValueError(f"categories[{where!r}] is empty: declare at least one category")
    if all(isinstance(v, str) for v in vals):
        arr = np.array(vals, dtype=object)
    elif all(isinstance(v, (bool, np.bool_)) for v in vals):
        arr = np.array(vals, dtype=bool)
    elif all(isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))
             for v in vals):
        arr = np.array(vals)
        if not np.all(np.isfinite(arr.astype(np.float64))):
            raise ValueError(f"categories[{where!r}]: labels must be finite")
    else:
        raise TypeError(f"categories[{where!r}]: labels must be all strings or all numbers (or booleans)")
    if len(set(arr.tolist())) != arr.size:
        raise ValueError(f"categories[{where!r}]: labels must be unique")
    return arr


@dataclass(frozen=True)
class TableSchema:
    """The public schema of a fitted table.

    ``names`` the D column names (an array's are ``x0 .. x{D-1}``); ``cat_cols`` the positions
    of the categorical columns, ``categories`` their declared labels (the codes are the
    positions in these lists); ``dtypes`` the released pandas dtype names of a data frame's
    columns (None for an array: its categorical columns hold codes), from declarations only
    (:func:`table_schema`).
    """

    names: tuple
    cat_cols: tuple
    categories: tuple
    dtypes: tuple | None = None

    @property
    def layout(self):
        cats = set(self.cat_cols)
        return MixedLayout(tuple(i for i in range(len(self.names)) if i not in cats), self.cat_cols,
                           tuple(len(c) for c in self.categories))

    @property
    def numeric_names(self):
        return [self.names[i] for i in self.layout.num_cols]

    def encode(self, X):
        """A data frame as a float64 frame of the same column names: numeric columns as
        floats, categorical ones as codes (-1: an undeclared or missing category, which the
        kernel counts as "other").  Anything else is returned as it is (its categorical columns
        must already hold codes)."""
        if not is_frame(X):
            return X
        import pandas as pd

        names = [str(c) for c in X.columns]
        if names != list(self.names):
            raise ValueError(f"The feature names should match those that were passed during fit: "
                             f"expected {list(self.names)}, got {names}")
        out = {}
        cat = dict(zip(self.cat_cols, self.categories))
        for i, name in enumerate(self.names):
            col = X.iloc[:, i]
            if i in cat:
                labels = cat[i]
                values = col.astype(object) if labels.dtype == object or isinstance(
                    col.dtype, pd.CategoricalDtype) else col
                codes = pd.Index(list(labels), dtype=object).get_indexer(pd.Index(values, dtype=object))
                out[name] = codes.astype(np.float64)
            else:
                try:
                    out[name] = np.asarray(col, dtype=np.float64)
                except (TypeError, ValueError):
                    raise TypeError(f"column {name!r} is numeric in the fitted schema but holds "
                                    "values that are not numbers") from None
        return pd.DataFrame(out, index=X.index, columns=list(self.names))

    def decode(self, Z, bounds=None):
        """Rows (n, D) of numeric values and codes back to the table's form: a data frame with
        the fitted columns and dtypes (categories restored; "other" as missing) for a frame
        schema, else the array (codes as they are, "other" as -1).  ``bounds``: the numeric box
        the values are clipped to (public), or None."""
        num = list(self.layout.num_cols)
        if self.dtypes is None:
            Z = np.array(Z, dtype=np.float64, copy=True)
            if bounds is not None and num:
                Z[:, num] = np.clip(Z[:, num], bounds[0], bounds[1])
            return Z
        Z = np.asarray(Z, dtype=np.float64)
        box = {c: (bounds[0][j], bounds[1][j]) for j, c in enumerate(num)} if bounds is not None else {}
        import pandas as pd

        cat = dict(zip(self.cat_cols, self.categories))
        cols = {}
        for i, (name, dt) in enumerate(zip(self.names, self.dtypes)):
            if i in cat:
                labels = list(cat[i])
                codes = Z[:, i].astype(np.int64)
                codes[(codes < 0) | (codes >= len(labels))] = -1
                if _is_category(dt):
                    ordered = dt == "category[ordered]"
                    cols[name] = pd.Categorical.from_codes(codes, dtype=pd.CategoricalDtype(labels, ordered=ordered))
                else:           # a text column ("other": missing, as the dtype writes it)
                    values = np.array(labels + [None], dtype=object)[codes]
                    cols[name] = values if dt == "object" else pd.array(values, dtype=pd.api.types.pandas_dtype(dt))
            else:
                v = np.clip(Z[:, i], *box[i]) if i in box else Z[:, i].copy()
                kind = np.dtype(dt).kind if _is_numpy_dtype(dt) else "f"
                if kind in "iu":
                    info = np.iinfo(np.dtype(dt))
                    v = np.clip(np.rint(v), info.min, info.max).astype(np.dtype(dt))
                elif kind == "f":
                    v = v.astype(np.dtype(dt))
                cols[name] = v
        return pd.DataFrame(cols, columns=list(self.names))


def _is_numpy_dtype(name):
    try:
        np.dtype(name)
        return True
    except TypeError:
        return False


def _text_dtype(dtype):
    """The released dtype of a categorical column with text labels that is not of a ``category``
    dtype: an explicit ``StringDtype`` with ``pd.NA`` as its missing value (only a declaration
    makes one, inference never does) as it is, else the installed pandas' dtype of a column of
    strings (``object`` before pandas 3, ``str`` from it) — not the input's ``object`` or ``str``,
    which in pandas 3 one value decides (a single non-string value makes the column ``object``).
    Caveat: ``DataFrame.convert_dtypes()`` makes a ``string`` column only where every value is a
    string, so after it the released dtype says whether one was not (one bit; declare the column
    a ``CategoricalDtype`` to release nothing of it)."""
    import pandas as pd

    if isinstance(dtype, pd.StringDtype) and dtype.na_value is pd.NA:
        return f"string[{dtype.storage}]"
    return str(pd.Series(["a"]).dtype)


def _is_category(name):
    return name in ("category", "category[ordered]")


def _dtype_name(dtype):
    import pandas as pd

    if isinstance(dtype, pd.CategoricalDtype):
        return "category[ordered]" if dtype.ordered else "category"
    return str(dtype)


def _released_dtypes(dtypes, names, cat_cols):
    """The released dtype name of every column of a data frame: a categorical column's is
    ``category`` (``category[ordered]`` for an ordered declared dtype, set by the caller), a
    numeric column's ``float64`` unless ``dtypes`` declares a number dtype for it."""
    if dtypes is None:
        dtypes = {}
    if not isinstance(dtypes, dict):
        raise TypeError(f"dtypes must be a dict {{numeric column: dtype}} or None, got {type(dtypes).__name__}")
    cats = {names[i] for i in cat_cols}
    out = {}
    for name, dt in dtypes.items():
        if name not in names or name in cats:
            raise ValueError(f"dtypes: {name!r} is not a numeric column of X (categorical columns are "
                             "released as pandas 'category' over their declared labels)")
        if not isinstance(dt, str):
            raise TypeError(f"dtypes: {name!r} has {dt!r}; declare a dtype by its name, e.g. 'int64'")
        try:
            dt = np.dtype(dt)
        except TypeError:
            raise ValueError(f"dtypes: {name!r} has {dt!r}, not a numpy number dtype") from None
        if dt.kind not in "iuf":
            raise ValueError(f"dtypes: {name!r} has {dt}, not an integer or float dtype")
        out[name] = str(dt)
    return tuple("category" if n in cats else out.get(n, "float64") for n in names)


def table_schema(X, categories, n_features, dtypes=None):
    """The schema of the table ``X`` (a data frame) or of rows of ``n_features`` columns (an
    array, a memory map, a block source), from public declarations only.

    Data frame: a column is categorical when ``categories`` names it, or its dtype is
    ``category`` (its list of categories, taken as declared) or ``bool`` ([False, True]);
    numeric when its dtype is a number; any other column (text, dates) is refused with a
    message naming it.  Array: the columns are named ``x0 .. x{D-1}`` and ``categories`` names
    the categorical ones, each with its labels or their number; their values are the codes.

    The released dtypes (``dtypes_``, and those of every sample) come from declarations only,
    never from the frame's inferred dtypes, which one value can decide (``read_csv`` makes an
    int column float with one 30.5, a bool column object with one missing value): categorical
    columns are ``category`` over their declared labels (``category[ordered]`` where an
    ordered ``CategoricalDtype`` declares them; a column with text labels not of a ``category``
    dtype keeps pandas' text dtype, :func:`_text_dtype`), numeric columns ``float64`` unless ``dtypes``
    (``{column: dtype}``) declares an integer or float dtype.  ``dtypes`` is refused for an
    array (its rows are released as an array).
    """
    if categories is not None and not isinstance(categories, dict):
        raise TypeError(f"categories must be a dict {{column name: labels}} or None, got "
                        f"{type(categories).__name__}")
    declared = dict(categories or {})
    for key in declared:
        if not isinstance(key, str):
            raise TypeError(f"categories: keys are column names (str); an array's columns are named "
                            f"'x0', 'x1', ...; got {key!r}")
    if is_frame(X):
        import pandas as pd

        names = list(X.columns)
        if not all(isinstance(c, str) for c in names):
            raise TypeError("X: a data frame's column names must be strings")
        unknown = sorted(set(declared) - set(names))
        if unknown:
            raise ValueError(f"categories: no column named {unknown} in X")
        cat_cols, cats, ordered = [], [], set()
        for i, (name, dtype) in enumerate(zip(names, X.dtypes)):
            if _dtype_name(dtype) == "category[ordered]":
                ordered.add(i)          # the user's declared dtype object, not one the values decide
            if name in declared:
                cat_cols.append(i)
                cats.append(_labels(declared[name], name))
            elif isinstance(dtype, pd.CategoricalDtype):
                cat_cols.append(i)
                cats.append(_labels(list(dtype.categories), name))
            elif pd.api.types.is_bool_dtype(dtype):
                cat_cols.append(i)
                cats.append(np.array([False, True]))
            elif pd.api.types.is_datetime64_any_dtype(dtype) or pd.api.types.is_timedelta64_dtype(dtype) \
                    or isinstance(dtype, pd.PeriodDtype):
                raise ValueError(f"column {name!r} ({dtype}) holds timestamps: convert it to a number (e.g. "
                                 "seconds since an epoch, or the day of the year) or drop it before fitting")
            elif not pd.api.types.is_numeric_dtype(dtype):
                raise ValueError(
                    f"column {name!r} ({dtype}) is neither numeric nor declared categorical: declare its "
                    f"categories from public knowledge (categories={{{name!r}: [...]}}) or give it a pandas "
                    "CategoricalDtype with a declared list; the list of values that occur in the data is "
                    "private, so it is never read from the data")
        released = list(_released_dtypes(dtypes, names, cat_cols))
        for i, labels in zip(cat_cols, cats):
            if i in ordered:
                released[i] += "[ordered]"
            elif labels.dtype == object and not isinstance(X.dtypes.iloc[i], pd.CategoricalDtype):
                released[i] = _text_dtype(X.dtypes.iloc[i])
        released = tuple(released)
        return TableSchema(tuple(names), tuple(cat_cols), tuple(cats), released)
    if dtypes is not None:
        raise ValueError("dtypes: declared output dtypes apply to a data frame; an array's rows are released "
                         "as an array")
    D = int(n_features)
    names = tuple(f"x{i}" for i in range(D))
    cat_cols, cats = [], []
    for key in declared:
        m = _ARRAY_NAME.match(key)
        if m is None or int(m.group(1)) >= D:
            raise ValueError(f"categories: no column named {key!r} in X (an array's {D} columns are named "
                             f"'x0' .. 'x{D - 1}')")
    for i, name in enumerate(names):
        if name in declared:
            cat_cols.append(i)
            cats.append(_labels(declared[name], name))
    return TableSchema(names, tuple(cat_cols), tuple(cats), None)
