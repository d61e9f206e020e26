"""dpem_fast._text: the tokenizer and counts the command line's LDA uses, and top words."""
import numpy as np
import pytest
from numpy.testing import assert_array_equal

from dpem_fast._text import count_matrix, tokenize, top_word_indices


def test_tokenize_lower_cased_runs_of_letters():
    assert tokenize("U.S. bank's 2nd-quarter Ünïcode_x") == ["u", "s", "bank", "s", "nd", "quarter", "ünïcode", "x"]
    assert tokenize("  1996 -- 42 ") == []


def test_count_matrix_over_the_vocabulary_only():
    X = count_matrix(["A b, a!", "", "c z c c"], ["a", "b", "c"])
    assert X.format == "csr" and X.shape == (3, 3)
    assert_array_equal(X.toarray(), [[2, 1, 0], [0, 0, 0], [0, 0, 3]])
    with pytest.raises(ValueError, match="'a' appears twice"):
        count_matrix(["a"], ["a", "b", "a"])
    with pytest.raises(ValueError, match="entry 1"):
        count_matrix(["a"], ["a", ""])


def test_top_word_indices_heaviest_first_ties_by_index():
    assert_array_equal(top_word_indices(np.array([[1.0, 3.0, 3.0, 0.0], [0, 0, 1, 2]]), 2), [[1, 2], [3, 2]])
    assert top_word_indices(np.ones((2, 3)), 10).shape == (2, 3)
    with pytest.raises(ValueError, match="n_words"):
        top_word_indices(np.ones((2, 3)), 0)
    with pytest.raises(ValueError, match="2-D"):
        top_word_indices(np.ones(3), 1)
