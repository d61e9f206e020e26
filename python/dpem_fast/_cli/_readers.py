"""The command line's readers: tables (CSV, .npy, Parquet), documents and a public vocabulary,
per-column bounds and key files; a user's mistake is a :class:`UserError`."""
from __future__ import annotations

import csv
import os

import numpy as np


class UserError(Exception):
    """A mistake in the command line or the input files: one line on stderr, exit 2.  A message
    about a data file names its columns (public), never a cell's value, line or count."""


#: cells that mean "missing" in a CSV file
_BLANKS = ("", "NA", "N/A", "NaN", "nan", "null", "NULL", "None")
#: what a numeric column with empty cells is told (the count of such cells is never given)
_FILL = "drop or fill those rows before fitting (the model takes complete numeric columns)"


def _parse_float(text, where):
    try:
        return float(text)
    except ValueError:
        raise UserError(f"{where}: {text!r} is not a number") from None


def read_table(path, columns=None):
    """(rows as float64 array, column names) from CSV, .npy or Parquet."""
    if not os.path.isfile(path):
        raise UserError(f"DATA: no such file: {path}")
    ext = os.path.splitext(path)[1].lower()
    if ext == ".npy":
        try:
            X = np.load(path, allow_pickle=False)
        except (ValueError, OSError, EOFError) as exc:
            raise UserError(f"DATA: cannot read {path} as .npy ({exc})") from None
        if X.ndim != 2 or X.dtype.kind not in "biuf":
            raise UserError(f"DATA: {path} must hold a 2-D numeric array, got shape {X.shape} dtype {X.dtype}")
        names = [f"x{i}" for i in range(X.shape[1])]
        X = X.astype(np.float64)
    elif ext == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise UserError("DATA: reading Parquet needs pyarrow (pip install pyarrow)") from None
        try:
            table = pq.read_table(path)
        except Exception as exc:   # pyarrow's own error types
            raise UserError(f"DATA: cannot read {path} as Parquet ({exc})") from None
        names = list(table.column_names)
        try:
            X = np.column_stack([table.column(n).to_numpy().astype(np.float64) for n in names])
        except (ValueError, TypeError) as exc:
            raise UserError(f"DATA: {path}: non-numeric column ({exc})") from None
    else:
        X, names = _read_csv(path)
    if columns:
        idx = _picked(columns, names, path)
        X, names = X[:, idx], [names[i] for i in idx]
    if X.shape[0] == 0:
        raise UserError(f"DATA: {path} has no rows")
    return np.ascontiguousarray(X), names


def _picked(columns, names, path):
    """The positions of ``--columns`` (comma-separated names or indices) among ``names``."""
    idx = []
    for c in columns.split(","):
        c = c.strip()
        if c in names:
            idx.append(names.index(c))
        elif c.isdigit() and int(c) < len(names):
            idx.append(int(c))
        else:
            raise UserError(f"--columns: no column {c!r} in {path} (columns: {', '.join(names)})")
    return idx


def read_mixed_table(path, category_flags, columns=None):
    """(a pandas DataFrame, column names, {column: labels}) from a CSV with a header for the mixed
    model: the columns named by ``--category COLUMN=LABEL|LABEL|...`` are read as text and their
    declared labels returned; every other column must be numeric.  ``columns`` (``--columns``):
    the columns fitted, in that order (default every column); the others are not read into the
    table, so they need no declaration."""
    try:
        import pandas as pd
    except ImportError:
        raise UserError("--model mixed reads CSV files with pandas (pip install pandas)") from None
    if not os.path.isfile(path):
        raise UserError(f"DATA: no such file: {path}")
    if os.path.splitext(path)[1].lower() != ".csv":
        raise UserError(f"DATA: --model mixed reads a CSV file with a header, got {path}")
    categories = {}
    for flag in category_flags or ():
        col, sep, labels = flag.partition("=")
        if not sep or not col.strip() or not labels:
            raise UserError(f"--category: expected COLUMN=LABEL|LABEL|..., got {flag!r}")
        categories[col.strip()] = labels.split("|")
    try:
        df = pd.read_csv(path, dtype={c: str for c in categories}, keep_default_na=False,
                         na_values={c: [] for c in categories})
    except (ValueError, OSError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise UserError(f"DATA: cannot read {path} as CSV ({exc})") from None
    names = [str(c) for c in df.columns]
    df.columns = names
    missing = sorted(set(categories) - set(names))
    if missing:
        raise UserError(f"--category: no column {missing} in {path} (columns: {', '.join(names)})")
    if columns:
        idx = _picked(columns, names, path)
        if len(set(idx)) < len(idx):
            raise UserError(f"--columns: a column is named twice in {columns!r}")
        names = [names[i] for i in idx]
        unused = sorted(set(categories) - set(names))
        if unused:
            raise UserError(f"--category: column {unused} is not among --columns ({', '.join(names)})")
        df = df[names]
    for c in names:
        if c not in categories and not pd.api.types.is_numeric_dtype(df[c]):
            cells = df[c].astype(str).str.strip()
            blank = cells.isin(_BLANKS)
            if blank.any() and pd.to_numeric(cells[~blank], errors="coerce").notna().all():
                raise UserError(f"DATA: column {c!r} has missing values (empty cells): {_FILL}; a categorical "
                                "column's empty cells are its 'other' category")
            raise UserError(f"DATA: column {c!r} is not numeric: declare it with --category {c}=LABEL|LABEL|... "
                            "(its public categories; the values in the file are private and never listed)")
    if len(df) == 0:
        raise UserError(f"DATA: {path} has no rows")
    return df, names, categories


def _read_csv(path):
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            rows = [r for r in csv.reader(fh) if r]
    except (UnicodeDecodeError, csv.Error, OSError) as exc:
        raise UserError(f"DATA: cannot read {path} as CSV ({exc})") from None
    if not rows:
        raise UserError(f"DATA: {path} is empty")

    def numeric(cell):
        try:
            float(cell)
            return True
        except ValueError:
            return False

    header = not all(numeric(c) for c in rows[0])
    names = [c.strip() for c in rows[0]] if header else [f"x{i}" for i in range(len(rows[0]))]
    body = rows[1:] if header else rows
    out = np.empty((len(body), len(names)))
    for i, r in enumerate(body):
        if len(r) != len(names):
            raise UserError(f"DATA: {path} line {i + 1 + header}: {len(r)} fields, expected {len(names)}")
        for j, cell in enumerate(r):
            try:
                out[i, j] = float(cell)
                if out[i, j] != out[i, j]:
                    raise ValueError("NaN")
            except ValueError:
                if cell.strip() in _BLANKS:
                    raise UserError(f"DATA: column {names[j]!r} has missing values (empty cells): {_FILL}") from None
                raise UserError(f"DATA: column {names[j]!r} is not numeric: --model mixed takes categorical columns "
                                f"(--category {names[j]}=LABEL|LABEL|...); else drop or encode it") from None
    return out, names


def _bounds_file(path, names):
    """A CSV ``column,lower,upper`` (header optional), one line per selected column."""
    if not os.path.isfile(path):
        raise UserError(f"--bounds-file: no such file: {path}")
    with open(path, newline="", encoding="utf-8") as fh:
        rows = [r for r in csv.reader(fh) if r]
    table = {}
    for r in rows:
        if len(r) != 3:
            raise UserError(f"--bounds-file: each line must be column,lower,upper; got {','.join(r)!r}")
        if r[0].strip().lower() == "column":
            continue
        table[r[0].strip()] = (_parse_float(r[1], "--bounds-file"), _parse_float(r[2], "--bounds-file"))
    missing = [n for n in names if n not in table]
    if missing:
        raise UserError(f"--bounds-file: no bounds for column(s) {', '.join(missing)}")
    return (np.array([table[n][0] for n in names]), np.array([table[n][1] for n in names]))


# ------------------------------------------------------------------ commands
def read_vocabulary(path):
    """The public vocabulary: one word per line (blank lines skipped), lower case, distinct."""
    if not os.path.isfile(path):
        raise UserError(f"--vocabulary: no such file: {path}")
    try:
        with open(path, encoding="utf-8") as fh:
            words = [line.strip() for line in fh if line.strip()]
    except (UnicodeDecodeError, OSError) as exc:
        raise UserError(f"--vocabulary: cannot read {path} ({exc})") from None
    if not words:
        raise UserError(f"--vocabulary: {path} has no words")
    from .._text import tokenize

    for i, w in enumerate(words):
        if tokenize(w) != [w]:
            raise UserError(f"--vocabulary: {path}: word {i + 1} ({w!r}) must be one lower-case run of letters "
                            "(documents are split on everything else, so it could never be counted)")
    return words


def read_documents(path, vocabulary):
    """(document-term counts over ``vocabulary``, number of documents) from one document per line."""
    from .._text import count_matrix

    if not os.path.isfile(path):
        raise UserError(f"DATA: no such file: {path}")
    try:
        with open(path, encoding="utf-8") as fh:
            docs = [line for line in fh if line.strip()]
    except (UnicodeDecodeError, OSError) as exc:
        raise UserError(f"DATA: cannot read {path} as text ({exc})") from None
    if not docs:
        raise UserError(f"DATA: {path} has no documents (one document per line)")
    try:
        return count_matrix(docs, vocabulary)
    except ValueError as exc:
        raise UserError(f"--vocabulary: {exc}") from None


def _key_file(path):
    """The signing key of --key-file: the file's bytes, exactly (a trailing newline is part of
    the key); None without the option."""
    if path is None:
        return None
    if not os.path.isfile(path):
        raise UserError(f"--key-file: no such file: {path}")
    with open(path, "rb") as fh:
        key = fh.read()
    if not key:
        raise UserError(f"--key-file: {path} is empty")
    return key


