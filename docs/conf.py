"""Sphinx configuration of the dpem_fast documentation.

Built offline (no intersphinx, nothing fetched) with warnings as errors::

    pip install ".[docs]"
    sphinx-build -W --keep-going -b html docs docs/_build/html
"""
import re
import warnings

import dpem_fast
from numpydoc.docscrape import NumpyDocString

project = "dpem_fast"
author = "the dpem_fast developers"
copyright = "the dpem_fast developers"
release = dpem_fast.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
]

# Summary tables link to objects documented elsewhere; no stub pages are generated.
autosummary_generate = False
autodoc_member_order = "bysource"
autodoc_typehints = "none"

# numpydoc: methods are listed by autodoc's ``:members:`` on the model pages, not by
# numpydoc's per-class autosummary tables (which would need a generated stub per method).
numpydoc_show_class_members = False
numpydoc_show_inherited_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

# The estimators keep their privacy analysis in a "Privacy" docstring section.  numpydoc's
# parser knows a fixed list of sections: register this one so that every numpydoc pass
# (docstrings, signatures, autosummary) parses it, and render it with the hook below.
NumpyDocString.sections.setdefault("Privacy", "")
# numpydoc reports any other unknown section with a Python warning and drops its text from
# the page: make that an error, so no docstring silently loses a section.
warnings.filterwarnings("error", message=r"Unknown section", category=UserWarning)

exclude_patterns = ["_build"]
html_theme = "alabaster"
html_title = f"dpem_fast {release}"
html_theme_options = {
    "description": "Fast, exact and accounted differentially private EM",
    "page_width": "1150px",
    "sidebar_width": "230px",
    "fixed_sidebar": True,
}

_HEADER = re.compile(r"^-{3,}\s*$")


def _sections(lines):
    """Indices of numpydoc section titles (a line underlined by dashes)."""
    return [i for i in range(len(lines) - 1)
            if lines[i].strip() and _HEADER.match(lines[i + 1])
            and len(lines[i + 1].strip()) >= len(lines[i].strip())]


def _privacy_into_notes(app, what, name, obj, options, lines):
    """Render the estimators' ``Privacy`` docstring section.

    numpydoc knows a fixed list of sections and drops any other.  The estimators keep
    their privacy analysis in a section of its own (``help()`` shows it under that
    title); for the web pages it is moved, under a "Privacy analysis" heading, to the end
    of the ``Notes`` section (created where the ``Privacy`` section stood if there is
    none).  Runs before numpydoc (lower priority number).
    """
    heads = _sections(lines)
    privacy = [i for i in heads if lines[i].strip() == "Privacy"]
    if not privacy:
        return
    start = privacy[0]
    end = next((i for i in heads if i > start), len(lines))
    body = lines[start + 2:end]
    rest = lines[:start] + lines[end:]
    block = ["", ".. rubric:: Privacy analysis", ""] + body + [""]
    heads = _sections(rest)
    notes = [i for i in heads if rest[i].strip() == "Notes"]
    if notes:
        n_end = next((i for i in heads if i > notes[0]), len(rest))
        rest = rest[:n_end] + block + rest[n_end:]
    else:
        rest = rest[:start] + ["Notes", "-----"] + block + rest[start:]
    lines[:] = rest


def _skip_foreign_members(app, what, name, obj, skip, options):
    """Leave out members inherited from scikit-learn or builtins (``get_params``, ...):
    the model pages list the estimators' own methods and dpem_fast's shared ones."""
    module = getattr(obj, "__module__", None) or ""
    if what == "class" and not module.startswith("dpem_fast"):
        return True
    return None


def setup(app):
    app.connect("autodoc-process-docstring", _privacy_into_notes, priority=100)
    app.connect("autodoc-skip-member", _skip_foreign_members)
