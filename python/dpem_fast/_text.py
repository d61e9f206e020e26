"""Plain-text documents for the topic model: tokens, counts over a public vocabulary, top words.

The vocabulary must be public (a published word list such as
:func:`dpem_fast.datasets.public_vocabulary`, or one fixed before the data were seen):
building it from the private documents would reveal their rare words.  Nothing here
builds a vocabulary from documents.
"""
from __future__ import annotations

import re

import numpy as np
import scipy.sparse as sp

__all__ = ["tokenize", "count_matrix", "top_word_indices"]

_TOKEN = re.compile(r"[^\W\d_]+")      # runs of letters (any script); digits, '_' and punctuation split


def tokenize(text):
    """Lower-cased runs of letters: ``"U.S. bank's 2nd-quarter"`` → ``["u", "s", "bank", "s", "nd", "quarter"]``."""
    return _TOKEN.findall(text.lower())


def count_matrix(documents, vocabulary):
    """CSR matrix (n_documents, len(vocabulary)) of token counts; tokens outside the vocabulary
    are dropped.

    Parameters
    ----------
    documents : iterable of str
    vocabulary : sequence of str
        Public, distinct, lower-case words (a ``ValueError`` names a duplicate).
    """
    index = {}
    for j, w in enumerate(vocabulary):
        if not isinstance(w, str) or not w:
            raise ValueError(f"vocabulary: entry {j} is not a non-empty word: {w!r}")
        if w in index:
            raise ValueError(f"vocabulary: {w!r} appears twice (lines {index[w] + 1} and {j + 1})")
        index[w] = j
    indptr, indices = [0], []
    for doc in documents:
        indices.extend(index[t] for t in tokenize(doc) if t in index)
        indptr.append(len(indices))
    n = len(indptr) - 1
    X = sp.csr_matrix((np.ones(len(indices)), np.asarray(indices, dtype=np.int64), np.asarray(indptr)),
                      shape=(n, len(index)))
    X.sum_duplicates()
    return X


def top_word_indices(components, n_words):
    """Per topic (row), the column indices of its ``n_words`` largest weights, largest first
    (ties: the lower index first).  Post-processing of the released topics."""
    components = np.asarray(components, dtype=np.float64)
    if components.ndim != 2:
        raise ValueError(f"components must be 2-D (topics x words), got shape {components.shape}")
    if isinstance(n_words, bool) or not isinstance(n_words, (int, np.integer)) or n_words < 1:
        raise ValueError(f"n_words must be a positive integer, got {n_words!r}")
    n = min(int(n_words), components.shape[1])
    return np.argsort(-components, axis=1, kind="stable")[:, :n]
