"""The papers' claims at laptop scale: ``python -m lab study NAME [--quick] [--seeds N] [--out results/]``.

Studies (on glyphs, held-out classes, >= 3 seeds, one fixed budget for every method):
``methods`` (ROADMAP Tables 1-2, SupRank Tables I-II), ``batch_size`` (ROADMAP Fig. 5),
``hparams`` (ROADMAP Fig. 4, supp. Fig. 12), ``bins`` (FastAP Fig. 4b), ``gap`` (ROADMAP
supp. Table 9), ``memory`` (ROADMAP supp. Table 5); protocol v2 (``--protocol v2``) re-runs methods,
batch_size and gap on the whole test split with the budget its pilot fixed.

Two sides, the second reading what the first writes:

* :mod:`lab.studies.running`: what each study trains (``spec``), training what is missing (``runner``,
  ``pilot``) into raw-results files that many processes may add to at once (``results_file``), and the
  checks that a stored run is still today's (``replay``, ``evaluated_then``, ``rerun_curves``). It writes
  ``results/`` and imports nothing of the reporting side.
* :mod:`lab.studies.reporting`: statistics, the claims as data, one module per section of docs/results.md,
  and three views assembling the sections (the page, the notebooks' and dashboard's verdicts, the README's
  headline). Its docstring says where a new section goes.

:mod:`lab.studies.cli` is the ``study`` subcommand of ``python -m lab`` over both. The names below are the
running side's, re-exported for a caller that trains studies from Python.
"""
from .running.results_file import add_results, load_results, save_results
from .running.runner import execute, missing_runs, run_studies
from .running.spec import FULL_BASE, ORDER, QUICK_BASE, STUDIES, RunSpec, study_runs

__all__ = ["execute", "load_results", "missing_runs", "run_studies", "save_results", "add_results",
           "FULL_BASE", "QUICK_BASE", "ORDER", "STUDIES", "RunSpec", "study_runs"]
