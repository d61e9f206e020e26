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

# The estimators keep their privacy analysis in a "Privacy" docstring section (and some a
# "Dask" or a "Person-level" section).  numpydoc's parser knows a fixed list of sections: register these so that
# every numpydoc pass (docstrings, signatures, autosummary) parses them, and render them
# with the hook below.  A new section title must be added here.
EXTRA_SECTIONS = {"Privacy": "Privacy analysis", "Dask": "Dask arrays", "Person-level": "Person-level privacy"}
for _title in EXTRA_SECTIONS:
    NumpyDocString.sections.setdefault(_title, "")
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


def _extra_sections_into_notes(app, what, name, obj, options, lines):
    """Render the docstring sections numpydoc does not know (``EXTRA_SECTIONS``).

    numpydoc renders a fixed list of sections and drops any other.  The estimators keep
    their privacy analysis in a section of its own (``help()`` shows it under that title);
    for the web pages each such section is moved, under a heading of its own ("Privacy
    analysis", ...), to the end of the ``Notes`` section (created where the first one stood
    if there is none).  Runs before numpydoc (lower priority number).
    """
    moved, where = [], None
    while True:
        heads = _sections(lines)
        extra = [i for i in heads if lines[i].strip() in EXTRA_SECTIONS]
        if not extra:
            break
        start = extra[0]
        end = next((i for i in heads if i > start), len(lines))
        moved += ["", f".. rubric:: {EXTRA_SECTIONS[lines[start].strip()]}", ""]
        moved += lines[start + 2:end] + [""]
        where = start if where is None else min(where, start)
        lines[:] = lines[:start] + lines[end:]
    if not moved:
        return
    heads = _sections(lines)
    notes = [i for i in heads if lines[i].strip() == "Notes"]
    if notes:
        n_end = next((i for i in heads if i > notes[0]), len(lines))
        lines[n_end:n_end] = moved
    else:
        lines[where:where] = ["Notes", "-----"] + moved


def _skip_foreign_members(app, what, name, obj, skip, options):
    """Leave out members inherited from scikit-learn or builtins (``get_params``, ...):
    the model pages list the estimators' own methods and dpem_fast's shared ones."""
    module = getattr(obj, "__module__", None) or ""
    if what == "class" and not module.startswith("dpem_fast"):
        return True
    return None


def setup(app):
    app.connect("autodoc-process-docstring", _extra_sections_into_notes, priority=100)
    app.connect("autodoc-skip-member", _skip_foreign_members)
