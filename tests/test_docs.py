"""The documentation covers the public API.

Every name in the ``__all__`` of every public module (``dpem_fast`` and each of its
submodules whose name does not start with an underscore, found on disk, so a new module such
as ``dpem_fast.plotting`` is checked as soon as it exists) must

* have a docstring (for data: a ``#:`` comment above its assignment, or a body under its
  directive in the documentation), and
* be documented by an autodoc / ``py`` directive in ``docs/**/*.rst``, under its own name or
  under another public name of the same object (the estimators are documented once, on their
  model pages, as ``dpem_fast.DPGaussianMixture`` and so on).

These tests parse the reStructuredText sources and need no Sphinx; the last one builds the
site when Sphinx is installed (``pip install ".[docs]"``).
"""
import functools
import importlib
import inspect
import pathlib
import pkgutil
import re
import subprocess
import sys

import pytest

import dpem_fast

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PACKAGE_DIR = pathlib.Path(dpem_fast.__file__).resolve().parent

PUBLIC_MODULES = ["dpem_fast"] + sorted(
    f"dpem_fast.{m.name}" for m in pkgutil.iter_modules(dpem_fast.__path__)
    if not m.name.startswith("_"))

_DIRECTIVE = re.compile(
    r"^(?P<indent>[ \t]*)\.\. (?:py:)?(?P<auto>auto)?"
    r"(?P<kind>module|currentmodule|class|function|exception|data|attribute|method|decorator)"
    r"::[ \t]*(?P<target>\S+)[ \t]*$")


def parse_documented(rst_texts):
    """``{fully qualified name: body text}`` of every object an rst source documents.

    ``.. module::``, ``.. currentmodule::`` and ``.. automodule::`` set the module that
    unqualified names of the following directives belong to.  A directive's body is its
    indented content without the option lines (``:members:``, ...).
    """
    documented = {}
    for text in rst_texts:
        lines = text.splitlines()
        current = None
        for i, line in enumerate(lines):
            m = _DIRECTIVE.match(line)
            if not m:
                continue
            kind, target = m["kind"], m["target"]
            if kind == "currentmodule":
                current = None if target == "None" else target
                continue
            if kind == "module" or target.startswith("dpem_fast") or current is None:
                name = target
            else:
                name = f"{current}.{target}"
            body = []
            for nxt in lines[i + 1:]:
                if nxt.strip() and len(nxt) - len(nxt.lstrip()) <= len(m["indent"]):
                    break
                if not nxt.strip().startswith(":"):
                    body.append(nxt.strip())
            documented[name] = " ".join(b for b in body if b)
            if kind == "module":
                current = target
    return documented


@functools.lru_cache(maxsize=None)
def documented_in_docs():
    return parse_documented(p.read_text(encoding="utf-8") for p in sorted(DOCS.rglob("*.rst")))


@functools.lru_cache(maxsize=None)
def documented_objects():
    """``{id(object): name}`` of every object the documentation names."""
    found = {}
    for target in documented_in_docs():
        obj = resolve(target)
        if obj is not None:
            found.setdefault(id(obj), target)
    return found


def resolve(name):
    """The object a dotted name refers to, or None."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        return obj
    return None


def import_public(module_name):
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:   # an optional dependency of that module is missing
        if exc.name and not exc.name.startswith("dpem_fast"):
            pytest.skip(f"{module_name} needs {exc.name}")
        raise


def is_data(obj):
    return not (inspect.isclass(obj) or inspect.ismodule(obj) or callable(obj))


def has_doc_comment(name):
    """A ``#:`` comment right above a top-level assignment of ``name`` in the package."""
    pattern = re.compile(rf"^#:.*\n(?:#:.*\n)*{re.escape(name)}\s*[:=]", re.M)
    return any(pattern.search(p.read_text(encoding="utf-8")) for p in PACKAGE_DIR.rglob("*.py"))


def own_docstring(obj):
    if inspect.isclass(obj):
        return obj.__dict__.get("__doc__") or ""
    return inspect.getdoc(obj) or ""


# ---------------------------------------------------------------- the parser itself
def test_parser_qualifies_names_by_the_current_module():
    rst = """
.. currentmodule:: dpem_fast.random

.. autofunction:: uniform

.. automodule:: dpem_fast.io

.. autoclass:: NpyBlocks
   :members:

.. autodata:: dpem_fast.accounting.ACCOUNTANTS

   Names of the accountants.

.. py:data:: VERSION
   :no-index:
"""
    doc = parse_documented([rst])
    assert doc == {"dpem_fast.random.uniform": "", "dpem_fast.io": "",
                   "dpem_fast.io.NpyBlocks": "",
                   "dpem_fast.accounting.ACCOUNTANTS": "Names of the accountants.",
                   "dpem_fast.io.VERSION": ""}


def test_public_modules_are_found():
    assert {"dpem_fast", "dpem_fast.accounting", "dpem_fast.kernels", "dpem_fast.random",
            "dpem_fast.datasets", "dpem_fast.io", "dpem_fast.mixture", "dpem_fast.cluster",
            "dpem_fast.decomposition"} <= set(PUBLIC_MODULES)


# ---------------------------------------------------------------- the checks
@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_every_public_name_has_a_docstring(module_name):
    module = import_public(module_name)
    assert inspect.getdoc(module), f"{module_name} has no module docstring"
    names = getattr(module, "__all__", None)
    assert names, f"{module_name} has no __all__"
    documented = documented_in_docs()
    missing = []
    for name in names:
        obj = getattr(module, name)
        if is_data(obj):
            ok = has_doc_comment(name) or documented.get(f"{module_name}.{name}")
        else:
            ok = own_docstring(obj).strip()
        if not ok:
            missing.append(name)
    assert not missing, f"{module_name}: no docstring for {missing}"


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_every_public_name_is_in_the_reference(module_name):
    module = import_public(module_name)
    documented, by_identity = documented_in_docs(), documented_objects()
    assert module_name in documented, f"no '.. automodule:: {module_name}' in docs/"
    missing = [name for name in module.__all__
               if f"{module_name}.{name}" not in documented
               and id(getattr(module, name)) not in by_identity]
    assert not missing, (f"{module_name}: {missing} are public but not documented in docs/ "
                         "(add an autodoc directive to the module's page under docs/api/)")


def test_every_documented_name_exists():
    stale = [name for name in documented_in_docs() if resolve(name) is None]
    assert not stale, f"docs/ documents names that do not exist: {stale}"


def test_every_estimator_has_a_privacy_analysis():
    from sklearn.base import BaseEstimator

    estimators = [getattr(dpem_fast, n) for n in dpem_fast.__all__
                  if inspect.isclass(getattr(dpem_fast, n))
                  and issubclass(getattr(dpem_fast, n), BaseEstimator)]
    assert len(estimators) >= 7
    pages = {p.name: p.read_text(encoding="utf-8") for p in (DOCS / "models").glob("*.rst")}
    for est in estimators:
        doc = est.__dict__["__doc__"]
        assert re.search(r"\n\s*Privacy\n\s*-{7,}\n", doc), f"{est.__name__}: no Privacy section"
        pages_of = [p for p, text in pages.items()
                    if re.search(rf"^\.\. autoclass:: {est.__name__}$", text, re.M)]
        assert len(pages_of) == 1, f"{est.__name__} needs exactly one model page, has {pages_of}"
        assert f":doc:`{pages_of[0][:-4]}`" in pages["index.rst"]


def test_accounting_page_table_is_the_accountants_output():
    from dpem_fast.accounting import noise_table
    from dpem_fast.mixture import dpem_plan

    table = noise_table(functools.partial(dpem_plan, "GGG", 10, 20))
    text = (DOCS / "accounting.rst").read_text(encoding="utf-8")
    block = re.search(r"^noise multiplier .*?\n=+.*?\n(.*?)\n=+", text, re.S | re.M).group(1)
    rows = {}
    for line in block.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        rows[cells[0]] = [float(c) for c in cells[1:]]
    assert table["epsilons"] == [0.1, 0.5, 1.0, 2.0, 4.0] and table["delta"] == 1e-4
    assert set(rows) == set(table["rows"])
    for name, values in table["rows"].items():
        assert rows[name] == [float(f"{v:.4g}") for v in values], name


@pytest.mark.slow
def test_sphinx_build_has_no_warnings(tmp_path):
    pytest.importorskip("sphinx")
    pytest.importorskip("numpydoc")
    out = tmp_path / "html"
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
                           "-d", str(tmp_path / "doctrees"), str(DOCS), str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    for page in (out / "models").glob("*.html"):
        if page.name != "index.html":
            assert "Privacy analysis" in page.read_text(encoding="utf-8"), page.name
