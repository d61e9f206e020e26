"""Tampered model files (issue 21, item 4): the unkeyed checksum can be recomputed by anyone,
so a file is cross-checked against its own privacy record on load, and a key signs it.

Every tampering here rewrites the file the way an editor would: change the JSON header (or a
fitted array), then recompute the unkeyed SHA-256 exactly as the format documents it, so the
checksum alone accepts the file.
"""
import dataclasses
import hashlib
import json
import math

import numpy as np
import pytest
from numpy.testing import assert_array_equal

import dpem_fast
from dpem_fast import ModelFormatError, accounting as acc
from dpem_fast import _persist
from estimators.examples import EXAMPLES

KEY = b"a key held by the model's owner"
NAMES = list(EXAMPLES)
#: a fitted parameter array of every example (the "centres moved by +100" tampering)
PARAM = {"gmm": "means_", "bernoulli": "means_", "gradient_em": "means_", "sep": "means_",
         "kmeans": "cluster_centers_", "fa": "mean_", "pca": "components_", "poisson": "rates_", "lda": "components_",
         "mixed": "means_"}
#: the outputs compared after a signed round trip
METHODS = {"gmm": ("predict_proba", "score_samples"), "bernoulli": ("predict_proba", "score_samples"),
           "gradient_em": ("predict_proba", "score_samples"), "sep": ("predict_proba", "score_samples"),
           "kmeans": ("transform", "score_samples"), "fa": ("transform", "score_samples"),
           "pca": ("transform", "score_samples"),
           "poisson": ("predict_proba", "score_samples"), "lda": ("transform",),
           "mixed": ("predict_proba", "score_samples")}


@pytest.fixture(scope="module")
def fitted():
    """name -> (private model, data), each example fitted once."""
    return {name: (factory().fit(data()), data()) for name, (factory, data) in EXAMPLES.items()}


@pytest.fixture(scope="module")
def saved(fitted, tmp_path_factory):
    """name -> path of the unsigned file of each fitted example."""
    d = tmp_path_factory.mktemp("tamper")
    out = {}
    for name, (model, _) in fitted.items():
        out[name] = d / f"{name}.npz"
        model.save(out[name])
    return out


# ------------------------------------------------------------------ rewriting a file
def _checksum(meta_bytes, arrays):
    """The unkeyed SHA-256 as the format documents it: the header, then every other entry
    (name|dtype|shape, bytes) in name order."""
    h = hashlib.sha256(meta_bytes)
    for k in sorted(arrays):
        a = np.ascontiguousarray(arrays[k])
        h.update(f"{k}|{a.dtype.str}|{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _entries(path):
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _rewrite(path, out, edit=None, edit_arrays=None, drop=()):
    """Copy ``path`` to ``out``, applying ``edit(meta)`` and ``edit_arrays(meta, arrays)``
    (in place), dropping the entries ``drop``, and recomputing the unkeyed checksum.  Any
    other ``__`` entry (a signature) is copied unchanged."""
    entries = _entries(path)
    meta = json.loads(entries.pop("__meta__").tobytes())
    entries.pop("__sha256__")
    special = {k: v for k, v in entries.items() if k.startswith("__") and k not in drop}
    arrays = {k: v for k, v in entries.items() if not k.startswith("__")}
    if edit is not None:
        meta = edit(meta) or meta
    if edit_arrays is not None:
        edit_arrays(meta, arrays)
    mb = json.dumps(meta, sort_keys=True).encode()
    new = dict(arrays, **special, __meta__=np.frombuffer(mb, np.uint8),
               __sha256__=np.frombuffer(_checksum(mb, arrays).encode(), np.uint8))
    with open(out, "wb") as fh:
        np.savez(fh, **new)
    return out


def _walk_events(obj, fn):
    """Apply ``fn(event_dict)`` to every event dict inside a JSON value."""
    if isinstance(obj, dict):
        if "type" in obj and obj["type"].endswith("Event"):
            fn(obj)
        for v in obj.values():
            _walk_events(v, fn)
    elif isinstance(obj, list):
        for v in obj:
            _walk_events(v, fn)


def _scale_noise(event_json, factor):
    """Every mechanism in the event ``factor`` times noisier."""
    def fn(ev):
        if ev["type"] == "GaussianEvent":
            ev["noise_multiplier"] *= factor
        elif ev["type"] == "LaplaceEvent":
            ev["epsilon"] /= factor
        elif ev["type"] == "DiscreteGaussianEvent":
            ev["sigma"] *= factor
    _walk_events(event_json, fn)


def _reaccount(privacy_json):
    """epsilon of the header's event under its accountant, at its delta."""
    event = _persist.event_from_json(privacy_json["event"]["__event__"])
    factory = acc.get_accountant(privacy_json["accountant"], privacy_json["neighbouring"])
    return factory().compose(event).get_epsilon(privacy_json["delta"])


def _same_model(a, b, X, name):
    assert type(a) is type(b)
    for m in METHODS[name]:
        assert_array_equal(getattr(a, m)(X), getattr(b, m)(X), err_msg=m)
    assert _persist.record_to_json(a.privacy_, _persist._Inline()) == \
        _persist.record_to_json(b.privacy_, _persist._Inline())


# ------------------------------------------------------------------ genuine files load
def _variants():
    """Genuine records of other shapes: one-off releases, subsampling, Laplace, partial_fit."""
    gmm, gauss = EXAMPLES["gmm"]
    sep, _ = EXAMPLES["sep"]
    km, _ = EXAMPLES["kmeans"]
    bern, binary = EXAMPLES["bernoulli"]
    lda, corpus = EXAMPLES["lda"]

    def partial(change):
        m, X = lda(), corpus()
        m.partial_fit(X[:20]).partial_fit(X[20:40])
        if change:
            m.set_params(epsilon=0.5)
        return m.partial_fit(X[40:])

    return {
        "gmm_estimated_domain": lambda: gmm(bounds=None, epsilon=50.0).fit(gauss()),   # few rows
        "gmm_laplace": lambda: gmm(scenario="LLG").fit(gauss()),
        "gmm_add_remove": lambda: gmm(neighbouring="add_remove").fit(gauss()),
        "bernoulli_discrete": lambda: bern(noise="discrete_gaussian").fit(binary()),
        "sep_uniform": lambda: sep(sampling="uniform").fit(gauss()),
        "kmeans_dplloyd": lambda: km(method="dplloyd").fit(gauss()),
        "kmeans_add_remove": lambda: km(neighbouring="add_remove").fit(gauss()),
        "lda_noise_multiplier": lambda: lda(epsilon=None, noise_multiplier=1.0).fit(corpus()),
        "lda_partial_fit": lambda: partial(False),
        "lda_partial_fit_epsilon_changed": lambda: partial(True),
    }


VARIANTS = _variants()


@pytest.mark.parametrize("name", NAMES)
def test_every_genuine_file_loads(saved, fitted, name):
    model, X = fitted[name]
    _same_model(dpem_fast.load(saved[name]), model, X, name)


# record shapes on small fits: some are noise-dominated on purpose (DPLloyd's linear composition)
@pytest.mark.filterwarnings("ignore::dpem_fast.NoiseDominatedWarning")
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_genuine_records_of_every_shape_pass_the_cross_check(variant, tmp_path):
    model = VARIANTS[variant]()
    assert model.privacy_ is not None
    model.save(tmp_path / "m.npz")
    loaded = dpem_fast.load(tmp_path / "m.npz")
    assert loaded.privacy_.event == model.privacy_.event


# ------------------------------------------------------------------ privacy claims that do not follow
@pytest.mark.parametrize("name", NAMES)
def test_claimed_epsilon_below_what_was_spent_is_refused(saved, name, tmp_path):
    def edit(meta):
        meta["privacy"]["epsilon"] = 0.01
    with pytest.raises(ModelFormatError, match=r"epsilon_spent .* exceeds the stated target epsilon"):
        dpem_fast.load(_rewrite(saved[name], tmp_path / "t.npz", edit))


@pytest.mark.parametrize("name", NAMES)
def test_small_epsilon_next_to_an_event_the_releases_do_not_support_is_refused(saved, name, tmp_path):
    """The issue's example: an event whose multiplier says 1e6 times more noise, the claimed
    epsilon (target and spent) set to what that event re-accounts to: the arithmetic holds,
    but the releases say otherwise."""
    def edit(meta):
        ev = meta["privacy"]["event"]["__event__"]
        _scale_noise(ev, 1e6)
        if meta["privacy"]["joint_multiplier"] is not None:
            meta["privacy"]["joint_multiplier"] *= 1e6
        eps = _reaccount(meta["privacy"])
        assert eps < 0.01
        meta["privacy"]["epsilon"] = 0.01
        meta["privacy"]["epsilon_spent"] = eps
    with pytest.raises(ModelFormatError, match="release"):
        dpem_fast.load(_rewrite(saved[name], tmp_path / "t.npz", edit))


@pytest.mark.parametrize("name", NAMES)
def test_edited_epsilon_spent_is_refused(saved, name, tmp_path):
    def edit(meta):
        meta["privacy"]["epsilon_spent"] *= 0.5
    with pytest.raises(ModelFormatError, match=r"epsilon_spent .* re-accounts to"):
        dpem_fast.load(_rewrite(saved[name], tmp_path / "t.npz", edit))


#: releases made once before the loop (the domain estimate, the private start): in the event
#: separately, never in the joint bound
_ONE_OFF_PREFIXES = ("domain_", "start_", "marginals", "pairs")   # made once, outside the joint bound


def _joint_bound_unchanged(model, privacy_json):
    """True when the edited releases still give the recorded joint multiplier: the record
    is then a valid private record (a jointly accounted release whose noise does not bind,
    e.g. DPKMeans' counts under replace-one), and nothing in the file can tell the edit."""
    jz = privacy_json["joint_multiplier"]
    if jz is None:
        return False
    a = {k: (r["sensitivity"] / r["noise_scale"]) ** 2 for k, r in privacy_json["releases"].items()
         if not k.startswith(_ONE_OFF_PREFIXES)}
    return math.isclose(model._joint_sensitivity(a, privacy_json["neighbouring"]), jz ** -2, rel_tol=1e-9)


@pytest.mark.parametrize("name", NAMES)
def test_edited_release_noise_scale_is_refused(saved, fitted, name, tmp_path):
    """Each release in turn claims twice, or half, its noise: the event (and so epsilon) no
    longer follows from it.  The one exception is an edit the privacy record cannot show."""
    model, _ = fitted[name]
    refused = 0
    for release in model.privacy_.releases:
        for factor in (2.0, 0.5):
            seen = {}

            def edit(meta):
                meta["privacy"]["releases"][release]["noise_scale"] *= factor
                seen["unchanged"] = (not release.startswith(_ONE_OFF_PREFIXES)
                                     and _joint_bound_unchanged(model, meta["privacy"]))
            path = _rewrite(saved[name], tmp_path / "t.npz", edit)
            if seen["unchanged"]:
                assert factor == 2.0          # only more noise on a non-binding release
                dpem_fast.load(path)
                continue
            with pytest.raises(ModelFormatError, match=f"release.*'{release}'"):
                dpem_fast.load(path)
            refused += 1
    assert refused >= len(model.privacy_.releases)


@pytest.mark.parametrize("name", NAMES)
def test_edited_event_multiplier_is_refused(saved, name, tmp_path):
    """The event made noisier and nothing else: it no longer re-accounts to epsilon_spent."""
    def edit(meta):
        _scale_noise(meta["privacy"]["event"]["__event__"], 3.0)
    with pytest.raises(ModelFormatError, match="re-accounts to"):
        dpem_fast.load(_rewrite(saved[name], tmp_path / "t.npz", edit))


@pytest.mark.parametrize("name", NAMES)
def test_edited_event_and_spent_epsilon_are_refused(saved, name, tmp_path):
    """The event made noisier and epsilon_spent set to match: the releases disagree."""
    def edit(meta):
        _scale_noise(meta["privacy"]["event"]["__event__"], 3.0)
        if meta["privacy"]["joint_multiplier"] is not None:
            meta["privacy"]["joint_multiplier"] *= 3.0
        meta["privacy"]["epsilon_spent"] = _reaccount(meta["privacy"])
    with pytest.raises(ModelFormatError, match="release"):
        dpem_fast.load(_rewrite(saved[name], tmp_path / "t.npz", edit))


@pytest.mark.parametrize("variant", ["gmm_estimated_domain", "lda_partial_fit"])
def test_one_of_two_equal_mechanisms_made_noisier_is_refused(variant, tmp_path):
    """Two releases of the same mechanism (the two one-off domain releases; two partial_fit
    calls): one copy in the event made 1e6 times noisier and epsilon_spent set to match.
    Each release's mechanism is still in the event, but the event holds one no release
    describes."""
    model = VARIANTS[variant]()
    model.save(tmp_path / "m.npz")

    def edit(meta):
        done = []

        def fn(ev):
            if ev["type"] == "GaussianEvent" and not done:
                twins = []
                _walk_events(meta["privacy"]["event"]["__event__"],
                             lambda e: twins.append(e) if e == ev else None)
                if len(twins) >= 2:
                    ev["noise_multiplier"] *= 1e6
                    done.append(ev)
        _walk_events(meta["privacy"]["event"]["__event__"], fn)
        assert done
        meta["privacy"]["epsilon_spent"] = _reaccount(meta["privacy"])
    with pytest.raises(ModelFormatError, match="which no release describes"):
        dpem_fast.load(_rewrite(tmp_path / "m.npz", tmp_path / "t.npz", edit))


@pytest.mark.parametrize("name", NAMES)
def test_event_tagged_with_another_relation_is_refused(saved, name, tmp_path):
    def edit(meta):
        other = {"replace": "add_remove", "add_remove": "replace"}[meta["privacy"]["neighbouring"]]
        meta["privacy"]["neighbouring"] = other
    with pytest.raises(ModelFormatError, match="neighbouring"):
        dpem_fast.load(_rewrite(saved[name], tmp_path / "t.npz", edit))


# ------------------------------------------------------------------ the private flag
@pytest.mark.parametrize("name", NAMES)
def test_record_removed_while_private_says_true_is_refused(saved, name, tmp_path):
    def edit(meta):
        meta["privacy"] = None
    with pytest.raises(ModelFormatError, match="private"):
        dpem_fast.load(_rewrite(saved[name], tmp_path / "t.npz", edit))


@pytest.mark.parametrize("name", NAMES)
def test_non_private_fit_marked_private_is_refused(name, tmp_path):
    """epsilon=inf: no record, the file says private false; flipping the flag is refused."""
    factory, data = EXAMPLES[name]
    m = factory(epsilon=float("inf")).fit(data())
    assert m.privacy_ is None
    m.save(tmp_path / "m.npz", allow_not_private=True)
    assert dpem_fast.load(tmp_path / "m.npz").privacy_ is None

    def edit(meta):
        assert meta["private"] is False
        meta["private"] = True
    with pytest.raises(ModelFormatError, match="private"):
        dpem_fast.load(_rewrite(tmp_path / "m.npz", tmp_path / "t.npz", edit))


def test_domain_from_data_marked_private_is_refused(tmp_path):
    """bounds='from_data': a record whose guarantee does not hold; flipping the file's flag,
    or the flag and the record's, is refused (the record says its domain came from the data)."""
    factory, data = EXAMPLES["gmm"]
    with pytest.warns(dpem_fast.PrivacyLeakWarning):
        m = factory(bounds="from_data").fit(data())
    assert m.privacy_ is not None and not m.privacy_.private
    m.save(tmp_path / "m.npz", allow_not_private=True)
    assert dpem_fast.load(tmp_path / "m.npz").privacy_.private is False

    def flag(meta):
        meta["private"] = True

    def both(meta):
        meta["private"] = True
        meta["privacy"]["private"] = True
    with pytest.raises(ModelFormatError, match="private"):
        dpem_fast.load(_rewrite(tmp_path / "m.npz", tmp_path / "t1.npz", flag))
    with pytest.raises(ModelFormatError, match="from the data"):
        dpem_fast.load(_rewrite(tmp_path / "m.npz", tmp_path / "t2.npz", both))


@pytest.mark.parametrize("name", NAMES)
def test_private_record_labelled_not_private_is_refused(saved, name, tmp_path):
    def edit(meta):
        meta["private"] = False
    with pytest.raises(ModelFormatError, match="private"):
        dpem_fast.load(_rewrite(saved[name], tmp_path / "t.npz", edit))


# ------------------------------------------------------------------ save refuses what load would
def test_save_refuses_a_record_that_does_not_follow_from_its_releases(fitted, tmp_path):
    model, _ = fitted["gmm"]
    rec = model.privacy_
    try:
        model.privacy_ = dataclasses.replace(rec, epsilon_spent=rec.epsilon_spent / 2)
        with pytest.raises(ValueError, match="re-accounts to"):
            model.save(tmp_path / "m.npz")
    finally:
        model.privacy_ = rec


# ------------------------------------------------------------------ signed files (HMAC)
@pytest.mark.parametrize("name", NAMES)
def test_signed_file_with_the_right_key_loads_the_identical_model(fitted, name, tmp_path):
    model, X = fitted[name]
    model.save(tmp_path / "s.npz", key=KEY)
    _same_model(dpem_fast.load(tmp_path / "s.npz", key=KEY), model, X, name)
    # str keys are their UTF-8 bytes
    _same_model(dpem_fast.load(tmp_path / "s.npz", key=KEY.decode()), model, X, name)
    # without a key the checksum and the record are still checked, and it loads
    _same_model(dpem_fast.load(tmp_path / "s.npz"), model, X, name)


@pytest.mark.parametrize("name", NAMES)
def test_signed_file_with_edited_parameters_is_refused_with_the_key(fitted, name, tmp_path):
    """Parameters moved by +100 and the checksum recomputed: only the key can tell."""
    model, _ = fitted[name]
    model.save(tmp_path / "s.npz", key=KEY)

    def move(meta, arrays):
        k = meta["fitted"][PARAM[name]]["__array__"]
        arrays[k] = arrays[k] + 100.0
    path = _rewrite(tmp_path / "s.npz", tmp_path / "t.npz", edit_arrays=move)
    with pytest.raises(ModelFormatError, match="signature does not match"):
        dpem_fast.load(path, key=KEY)
    # the unkeyed checksum cannot see it (documented): the edited file loads without the key
    loaded = dpem_fast.load(path)
    assert_array_equal(getattr(loaded, PARAM[name]), getattr(model, PARAM[name]) + 100.0)


@pytest.mark.parametrize("name", NAMES)
def test_unsigned_file_is_refused_when_a_key_is_given(saved, name):
    with pytest.raises(ModelFormatError, match="not signed"):
        dpem_fast.load(saved[name], key=KEY)


@pytest.mark.parametrize("name", NAMES)
def test_wrong_key_is_refused(fitted, name, tmp_path):
    model, _ = fitted[name]
    model.save(tmp_path / "s.npz", key=KEY)
    with pytest.raises(ModelFormatError, match="signature does not match"):
        dpem_fast.load(tmp_path / "s.npz", key=b"another key")


def test_signed_header_edit_is_refused_with_the_key(fitted, tmp_path):
    model, _ = fitted["gmm"]
    model.save(tmp_path / "s.npz", key=KEY)

    def edit(meta):
        meta["info"] = {"columns": ["x"]}
    with pytest.raises(ModelFormatError, match="signature does not match"):
        dpem_fast.load(_rewrite(tmp_path / "s.npz", tmp_path / "t.npz", edit), key=KEY)


def test_stripped_signature_is_refused(fitted, tmp_path):
    """Dropping the signature entry: refused with or without the key while the header still
    declares it; a full downgrade to an unsigned file is refused with the key."""
    model, _ = fitted["gmm"]
    model.save(tmp_path / "s.npz", key=KEY)
    (sig,) = [k for k in _entries(tmp_path / "s.npz") if k.startswith("__") and k not in ("__meta__", "__sha256__")]
    stripped = _rewrite(tmp_path / "s.npz", tmp_path / "t.npz", drop=(sig,))
    with pytest.raises(ModelFormatError, match="signature"):
        dpem_fast.load(stripped)
    with pytest.raises(ModelFormatError, match="signature"):
        dpem_fast.load(stripped, key=KEY)

    def unsigned(meta):
        meta["format_version"] = 1
        meta.pop("signature", None)
    downgraded = _rewrite(tmp_path / "s.npz", tmp_path / "u.npz", unsigned, drop=(sig,))
    dpem_fast.load(downgraded)                         # the checksum proves nothing about origin
    with pytest.raises(ModelFormatError, match="not signed"):
        dpem_fast.load(downgraded, key=KEY)


def test_keys_are_bytes_or_str_and_never_empty(fitted, tmp_path):
    model, _ = fitted["kmeans"]
    for bad in (b"", ""):
        with pytest.raises(ValueError, match="key"):
            model.save(tmp_path / "s.npz", key=bad)
    with pytest.raises(TypeError, match="key"):
        model.save(tmp_path / "s.npz", key=123)
    model.save(tmp_path / "s.npz", key="clé")         # str: its UTF-8 bytes
    dpem_fast.load(tmp_path / "s.npz", key="clé".encode())
    with pytest.raises(ValueError, match="key"):
        dpem_fast.load(tmp_path / "s.npz", key=b"")


def test_format_versions(fitted, saved, tmp_path):
    """Unsigned files stay format version 1 (what 1.x readers read); a signed file is version
    2, so a version-1 reader says "newer format" instead of a checksum error; both load."""
    model, _ = fitted["gmm"]
    assert json.loads(_entries(saved["gmm"])["__meta__"].tobytes())["format_version"] == 1
    model.save(tmp_path / "s.npz", key=KEY)
    meta = json.loads(_entries(tmp_path / "s.npz")["__meta__"].tobytes())
    assert meta["format_version"] == 2 and meta["signature"] == "hmac-sha256"
    assert _persist.FORMAT_VERSION == 2


def _first_release(field, value):
    def edit(meta):
        next(iter(meta["privacy"]["releases"].values()))[field] = value
    return edit


def _record_field(field, value):
    def edit(meta):
        meta["privacy"][field] = value
    return edit


MALFORMED = {
    "sensitivity a string": _first_release("sensitivity", "x"), "noise_scale 0": _first_release("noise_scale", 0.0),
    "count 1.5": _first_release("count", 1.5), "count 0": _first_release("count", 0),
    "unknown mechanism": _first_release("mechanism", "bogus"), "release renamed": _first_release("name", "other"),
    "shape a string": _first_release("shape", "x"), "granularity on a continuous release":
    _first_release("granularity", 0.5), "delta 2": _record_field("delta", 2.0),
    "unknown accountant": _record_field("accountant", "bogus"), "joint_multiplier a string":
    _record_field("joint_multiplier", "x"), "joint_multiplier added": _record_field("joint_multiplier", 5.0),
    "data_domain a list": _record_field("data_domain", [1]), "n_iter 0": _record_field("n_iter", 0),
    "no releases": _record_field("releases", {}), "no event": _record_field("event", None),
    "record private a string": _record_field("private", "yes"),
    "epsilon nan": _record_field("epsilon", {"__float__": "nan"}),
    "file private a string": lambda meta: meta.__setitem__("private", "true"),
}


@pytest.mark.parametrize("name", ["gmm", "sep", "lda"])
def test_malformed_records_are_refused_as_model_format_errors(saved, name, tmp_path):
    """Whatever the header holds, load answers ModelFormatError (never another exception, never
    a model)."""
    for what, edit in MALFORMED.items():
        with pytest.raises(ModelFormatError):
            dpem_fast.load(_rewrite(saved[name], tmp_path / "t.npz", edit))


# ------------------------------------------- files written before the per-feature scale
def _as_pre_issue23(meta, arrays, radius):
    """Rewrite every data domain of the file as an old one: ``"radius"`` (one number) where
    the current format writes the per-feature ``"scale"`` array (also in the privacy record)."""
    def walk(obj):
        if isinstance(obj, dict):
            for key in ("__domain__", "data_domain"):
                dom = obj.get(key)
                if isinstance(dom, dict) and "scale" in dom:
                    ref = dom.pop("scale")
                    if isinstance(ref, dict) and "__array__" in ref:
                        arrays.pop(ref["__array__"], None)
                    dom["radius"] = radius
            for v in obj.values():
                walk(v)
        elif isinstance(obj, list):
            for v in obj:
                walk(v)
    walk(meta)


def test_files_with_one_radius_still_load(fitted, saved, tmp_path):
    """A file written before issue 23 carries ``radius`` (one scale for every feature): it
    loads as the same map (a uniform per-feature scale), with the same outputs; a radius
    that is not a number is refused with a clear error."""
    model, X = fitted["kmeans"]
    radius = float(model.data_norm)
    assert np.all(model._domain.scale == radius)
    path = _rewrite(saved["kmeans"], tmp_path / "old.npz",
                    edit_arrays=lambda meta, arrays: _as_pre_issue23(meta, arrays, radius))
    meta = json.loads(_entries(path)["__meta__"].tobytes())
    assert '"radius"' in json.dumps(meta) and '"scale"' not in json.dumps(meta)
    old = dpem_fast.load(path)
    assert_array_equal(old._domain.scale, np.full(X.shape[1], radius))
    for method in METHODS["kmeans"]:
        assert_array_equal(getattr(old, method)(X), getattr(model, method)(X))
    assert old.nicv(X) == model.nicv(X)
    bad = _rewrite(saved["kmeans"], tmp_path / "bad.npz",
                   edit_arrays=lambda meta, arrays: _as_pre_issue23(meta, arrays, "x"))
    with pytest.raises(ModelFormatError, match="radius"):
        dpem_fast.load(bad)
