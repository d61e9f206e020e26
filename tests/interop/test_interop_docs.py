"""The how-to page ``docs/interop.rst`` runs: its ``.. code-block:: python`` blocks are executed
in order in one namespace (small data, a few seconds), so the page cannot drift from the code."""
from __future__ import annotations

import pathlib
import re
import textwrap
import warnings

import pytest

pytest.importorskip("dp_accounting")
pytest.importorskip("opendp")

PAGE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "interop.rst"
_BLOCK = re.compile(r"^\.\. code-block:: python\n\n((?:[ \t]+.*\n|\n)+)", re.MULTILINE)


def blocks(text):
    """The python code blocks of an rst text, dedented."""
    return [textwrap.dedent(m.group(1)) for m in _BLOCK.finditer(text)]


def test_the_page_has_its_examples():
    assert len(blocks(PAGE.read_text(encoding="utf-8"))) == 4


def test_the_page_runs(capsys):
    namespace = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # small data: noise-dominated warnings are expected
        for i, code in enumerate(blocks(PAGE.read_text(encoding="utf-8"))):
            exec(compile(code, f"{PAGE.name}[block {i}]", "exec"), namespace)
    out = capsys.readouterr().out
    assert "refused: True" in out and "the ledger refused:" in out and "the filter refused fit 7" in out
