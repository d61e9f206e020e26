"""The package's layering, enforced by an AST walk over every module (issue 22).

Every import counts, at module level or inside a function: a lazy import is still an edge.

- no import circle anywhere in the package;
- the engine (``_engine``) imports no model, no persistence, no command line;
- the kernel layer (``_kernels``) imports no model, no persistence, no command line;
- persistence (``_persist``) and the command line (``_cli``) import no model: they read the
  registry (``_registry``), which imports nothing of the package;
- ``accounting`` imports no model and no engine;
- the clustering package (``cluster``) imports nothing of the mixtures (``mixture``): what both
  need (the data-independent start, the live-component rule) is the engine's (issue 36);
- nothing of the engine, kernels, accounting or models imports the audit (``audit``), which
  imports no persistence, no command line and no model (it picks a target by the estimator's
  declared loop);
- no production module imports the numpy twins (``_reference``, the test oracles), and the
  twins import nothing of what they check: no engine, kernel layer (``_kernels``, the compiled
  ``_dpcore``), model, ``_preprocess`` or ``_rng`` (issue 36);
- the public ``kernels`` module imports only the kernel layer, the engine, ``random`` and the
  basic utilities.

An entry point (``__main__``) is held to its package's rules like any other module.

One privacy path (issue 36), by the calls each module makes (:func:`path_violations`):

- no module outside the engine (``_engine``) constructs a ``Plan``, a ``Release`` or a
  ``PrivacyRecord`` (the file codec in ``_persist`` apart, which loads saved records);
- inside the engine, ``PrivacyRecord(...)`` is built in ``_engine._path`` only (its one record
  builder), and ``.spend(...)`` (a budget charge) is called there only, nowhere else in the package;
- no module outside the engine charges, builds a record or holds a release layer: it calls no
  ``charge``, ``build_record``, ``chain_record``, ``._charge`` or ``._record`` and constructs no
  ``ReleaseLayer``; the loops of ``_engine._loops`` do, and a model hands them its maths.

``test_the_checker_finds_a_forbidden_import`` copies the package, adds one forbidden import
(or call) of each kind and checks that the walk reports it, so the rules cannot pass vacuously.
"""
import ast
import pathlib
import shutil

import pytest

import dpem_fast

PACKAGE = pathlib.Path(dpem_fast.__file__).resolve().parent
MODELS = ("dpem_fast.mixture", "dpem_fast.cluster", "dpem_fast.decomposition")
#: small utility modules any layer may use
UTILITIES = ("dpem_fast._rng", "dpem_fast._threads", "dpem_fast._validation", "dpem_fast._preprocess",
             "dpem_fast._version", "dpem_fast._progress", "dpem_fast._config")
#: the compiled kernels: one leaf of the graph (they are not ``.py`` files)
DPCORE = "dpem_fast._dpcore"
#: what the test oracles may not import: the code they check
ORACLE_FORBIDDEN = ("dpem_fast._engine", "dpem_fast._kernels", DPCORE, "dpem_fast._preprocess",
                    "dpem_fast._rng") + MODELS


def _module_name(path, root):
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def import_graph(root):
    """``{module: {imported module of the package, ...}}`` for every ``.py`` under ``root``
    (the compiled ``_dpcore`` modules are one leaf, ``DPCORE``, with no entry of its own)."""
    files = {_module_name(p, root): p for p in root.rglob("*.py")}
    mods = set(files)

    def resolve(name):
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name

    graph = {}
    for mod, path in files.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        edges = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                    base = ".".join(base + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                # "from pkg import name": the submodule pkg.name where there is one, else pkg
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            for t in targets:
                if t.split(".")[0] != "dpem_fast":
                    continue
                t = DPCORE if _under(t, (DPCORE,)) else resolve(t)
                if t and t != mod:
                    edges.add(t)
        graph[mod] = edges
    return graph


#: the one module of the privacy path's charge and record (issue 36)
PATH = "dpem_fast._engine._path"
#: what only the engine's loops call: the charge, the record builders, the release layer (issue 36)
LOOP_ONLY = ("charge", "build_record", "chain_record", "_charge", "_record", "ReleaseLayer")
#: modules outside the engine still exempt from LOOP_ONLY
LOOP_EXEMPT = ()


def path_violations(root):
    """Every construction of a plan, release or record, and every budget charge, made outside
    the place the one privacy path allows it (module docstring), as readable lines."""
    bad = []
    for path in sorted(root.rglob("*.py")):
        mod = _module_name(path, root)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            where = f"{mod}:{node.lineno}"
            if name == "spend" and isinstance(f, ast.Attribute) and mod != PATH:
                bad.append(f"{where} charges a budget (.spend): only {PATH}.charge does")
            elif name in ("Plan", "Release") and not _under(mod, ("dpem_fast._engine", "dpem_fast._persist")):
                bad.append(f"{where} constructs a {name} outside the engine")
            elif name == "PrivacyRecord" and mod != PATH and not _under(mod, ("dpem_fast._persist",)):
                bad.append(f"{where} constructs a PrivacyRecord: only {PATH}.build_record does")
            elif name in LOOP_ONLY and not _under(mod, ("dpem_fast._engine",) + LOOP_EXEMPT):
                bad.append(f"{where} calls {name} outside the engine: only its loops (_engine._loops) do")
    return bad


def _under(mod, prefixes):
    return any(mod == p or mod.startswith(p + ".") for p in prefixes)


def cycles(graph):
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def violations(graph):
    """Every broken rule, as readable lines (empty: the layering holds)."""
    bad = [f"import circle: {' -> '.join(c)}" for c in cycles(graph)]
    rules = [
        (("dpem_fast._engine",), MODELS + ("dpem_fast._persist", "dpem_fast._cli", "dpem_fast._kernels")),
        (("dpem_fast._kernels",), MODELS + ("dpem_fast._persist", "dpem_fast._cli")),
        (("dpem_fast._persist", "dpem_fast._cli"), MODELS),
        (("dpem_fast.accounting",), MODELS + ("dpem_fast._engine", "dpem_fast._persist", "dpem_fast._cli")),
        (("dpem_fast._registry",), ("dpem_fast",)),
        (("dpem_fast.cluster",), ("dpem_fast.mixture",)),
        # the audit sits above the engine and the models: nothing below it may import it
        (("dpem_fast._engine", "dpem_fast._kernels", "dpem_fast.accounting") + MODELS, ("dpem_fast.audit",)),
        # the audit asks the loop (its target), never the model (issue 36)
        (("dpem_fast.audit",), ("dpem_fast._persist", "dpem_fast._cli") + MODELS),
    ]
    for mod, targets in sorted(graph.items()):
        for layer, forbidden in rules:
            if _under(mod, layer):
                bad += [f"{mod} imports {t}" for t in sorted(targets)
                        if _under(t, forbidden) and not _under(t, layer)]
        if not _under(mod, ("dpem_fast._reference",)):
            bad += [f"{mod} imports the test oracle {t}" for t in sorted(targets)
                    if _under(t, ("dpem_fast._reference",))]
        else:
            bad += [f"the test oracle {mod} imports {t}, which it checks" for t in sorted(targets)
                    if _under(t, ORACLE_FORBIDDEN)]
        if mod == "dpem_fast.kernels":
            allowed = ("dpem_fast._kernels", "dpem_fast._engine", "dpem_fast.random") + UTILITIES
            bad += [f"dpem_fast.kernels imports {t}" for t in sorted(targets) if not _under(t, allowed)]
    return bad


def test_the_package_is_layered():
    graph = import_graph(PACKAGE)
    assert len(graph) > 50 and "dpem_fast._engine._base" in graph
    assert violations(graph) == []


def test_one_privacy_path():
    assert PATH in import_graph(PACKAGE)
    assert path_violations(PACKAGE) == []


@pytest.mark.parametrize("where, line, expect", [
    ("_engine/_plan.py", "from ..mixture import DPGaussianMixture", "dpem_fast._engine._plan imports dpem_fast.mixture"),
    ("_engine/_release.py", "def f():\n    from .._persist import save", "imports dpem_fast._persist"),
    ("_kernels/gmm.py", "from ..cluster import DPKMeans", "dpem_fast._kernels.gmm imports dpem_fast.cluster"),
    ("_persist/_file.py", "from ..decomposition import DPFactorAnalysis", "dpem_fast._persist._file imports dpem_fast.decomposition"),
    ("accounting/_ledger.py", "from .._engine import PrivacyRecord", "imports dpem_fast._engine"),
    ("mixture/_dp_gmm.py", "from .._reference.gmm import estep_reference", "imports the test oracle"),
    ("kernels.py", "from .cluster import DPKMeans", "dpem_fast.kernels imports dpem_fast.cluster"),
    ("cluster/_dp_kmeans.py", "from ..mixture._common import noise_std",
     "dpem_fast.cluster._dp_kmeans imports dpem_fast.mixture._common"),
    ("cluster/__init__.py", "def f():\n    from ..mixture import DPGaussianMixture",
     "dpem_fast.cluster imports dpem_fast.mixture"),
    ("_registry.py", "from ._persist import save", "dpem_fast._registry imports dpem_fast._persist"),
    ("_engine/_sources/_rows.py", "from ._dask import dask_rows", "import circle"),
    ("mixture/_dp_gmm.py", "from ..audit import audit", "dpem_fast.mixture._dp_gmm imports dpem_fast.audit"),
    ("audit/_audit.py", "def f():\n    from ..mixture._dp_sep import DPStochasticEP",
     "dpem_fast.audit._audit imports dpem_fast.mixture"),
    ("audit/_targets.py", "from ..decomposition._lda_math import approx_bound",
     "dpem_fast.audit._targets imports dpem_fast.decomposition"),
    # an entry point is held to its package's rules
    ("accounting/__main__.py", "from ..mixture import dpem_plan",
     "dpem_fast.accounting.__main__ imports dpem_fast.mixture"),
    # the test oracles import nothing of what they check
    ("_reference/gmm.py", "from .._engine import Statistics",
     "the test oracle dpem_fast._reference.gmm imports dpem_fast._engine"),
    ("_reference/kmeans.py", "def f():\n    from .._kernels.gmm import gmm_statistics",
     "the test oracle dpem_fast._reference.kmeans imports dpem_fast._kernels"),
    ("_reference/domain.py", "from .._dpcore._domain import E_MIN",
     "the test oracle dpem_fast._reference.domain imports dpem_fast._dpcore"),
    ("_reference/lda.py", "from ..decomposition._lda_math import approx_bound",
     "the test oracle dpem_fast._reference.lda imports dpem_fast.decomposition"),
    ("_reference/mixed.py", "import dpem_fast.mixture", "the test oracle dpem_fast._reference.mixed imports dpem_fast.mixture"),
    ("_reference/kmeans.py", "from ..cluster import DPKMeans", "imports dpem_fast.cluster, which it checks"),
    ("_reference/fa.py", "from .._preprocess import scale_and_clip",
     "the test oracle dpem_fast._reference.fa imports dpem_fast._preprocess"),
    ("_reference/rng.py", "from .._rng import make_key", "the test oracle dpem_fast._reference.rng imports dpem_fast._rng"),
    # one privacy path: plans, releases and records are the engine's, and so is the one charge
    ("mixture/_dp_sep.py", "def f(plan):\n    return Plan({}, plan.event, 'rdp', 'replace', 1.0)",
     "dpem_fast.mixture._dp_sep:"),
    ("model_selection/_selection.py", "def f(r):\n    return _record.Release('score', 'gaussian', 'l2', 1.0, 1.0, ())",
     "constructs a Release outside the engine"),
    ("decomposition/_dp_unigram.py", "def f(**kw):\n    return PrivacyRecord(**kw)",
     "dpem_fast.decomposition._dp_unigram:"),
    ("_engine/_estimator.py", "def f(**kw):\n    return PrivacyRecord(**kw)", "only dpem_fast._engine._path.build_record"),
    ("decomposition/_dp_lda.py", "def f(self, plan):\n    self.budget.spend(plan.event)",
     "dpem_fast.decomposition._dp_lda:"),
    ("_engine/_base.py", "def f(budget, event):\n    budget.spend(event)", "only dpem_fast._engine._path.charge"),
    ("model_selection/_selection.py", "def f(budget, plan):\n    charge(budget, plan.event, 'fit')",
     "calls charge outside the engine"),
    ("model_selection/_trials.py", "def f(plan, key):\n    return _engine.ReleaseLayer(plan, key, 1)",
     "calls ReleaseLayer outside the engine"),
    # only the engine's loops charge, build records and hold a release layer
    ("decomposition/_dp_unigram.py", "def f(plan):\n    charge(None, plan.event, 'x')",
     "dpem_fast.decomposition._dp_unigram:"),
    ("mixture/_dp_sep.py", "def f(self, plan):\n    self._charge(plan.event)", "calls _charge outside the engine"),
    ("decomposition/_dp_lda.py", "def f(self, plan):\n    return self._record(plan, mechanism='m')",
     "calls _record outside the engine"),
    ("decomposition/_dp_lda.py", "def f(prev, plan):\n    return _path.chain_record(prev, plan, 'a')",
     "calls chain_record outside the engine"),
    ("cluster/_dp_kmeans.py", "def f(plan):\n    return build_record(plan)", "calls build_record outside the engine"),
    ("mixture/_dp_sep.py", "def f(plan, key):\n    return ReleaseLayer(plan, key)", "calls ReleaseLayer outside"),
])
def test_the_checker_finds_a_forbidden_import(tmp_path, where, line, expect):
    copy = tmp_path / "dpem_fast"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("*.so", "*.pyd", "__pycache__"))
    assert violations(import_graph(copy)) == [] and path_violations(copy) == []
    with open(copy / where, "a", encoding="utf-8") as fh:
        fh.write("\n" + line + "\n")
    found = violations(import_graph(copy)) + path_violations(copy)
    assert any(expect in v for v in found), found


#: the longest a module of the package may be (issue 36: a module that outgrows it splits by concern)
MAX_MODULE_LINES = 600


def test_no_module_is_longer_than_the_limit():
    long = {str(p.relative_to(PACKAGE)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"
