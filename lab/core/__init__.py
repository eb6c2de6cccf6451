"""The ground floor of ``lab``: small, independent modules that every other package may use, and that
use no other package of ``lab`` (``tests/test_layers.py`` checks both, and the two groups below).

Maths helpers, the ground under :mod:`lab.losses` and :mod:`lab.metrics`:

* ``checks`` — input validation with messages that name the argument;
* ``steps`` — the step function H and its surrogates (sigmoid, H⁻, soft histograms), ROADMAP
  Eq. 3-4; :mod:`lab.ranking` is their public face;
* ``relevance`` — graded relevance from hierarchical labels (SupRank Eq. 20, Property 1, NDCG);
* ``graded_ranks`` — exact ranks under graded relevance (H-rank⁺, rank⁺, rank);
* ``normalize`` — unit rows and cosine scores, the one normalisation of every loss and metric;
* ``budget`` — the working memory of one loss or metric call (bytes), from the device or the knob;
* ``hparams`` — each loss hyper-parameter declared once (default, range, meaning, slider).

Process helpers, what training, data, studies, grading and the command line share about the
process, its files and its inputs (none of them computes a loss or a metric):

* ``env`` — every switch read from the environment, and the guard of torch's thread count (the
  maths helpers read it too: ``budget`` its memory knob);
* ``files`` — atomic writes of every file a user keeps (run folders, results, grade sheets,
  caches), and a full disk as one line;
* ``provenance`` — the code, libraries and machine behind a run;
* ``convert`` — the one converter from text (flags, YAML) to the declared types;
* ``frozen`` — the read-only mapping of a frozen config's dict fields;
* ``precision`` — the opt-in TF32 switch for float32 matmuls, and TF32 emulated on any device;
* ``extras`` — the one-line error naming the extra (``pip install 'ranklab-retrieval[train]'``) when a part
  of the lab is imported without the packages it needs.

A maths helper imports no process helper but ``env``; a process helper imports no maths helper.
"""
from .env import fast_mode

__all__ = ["fast_mode"]
