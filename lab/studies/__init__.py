"""The papers' claims at laptop scale: ``python -m lab study NAME [--quick] [--seeds N] [--out results/]``.

Studies (on glyphs, held-out classes, >= 3 seeds, one fixed budget for every method):
``methods`` (ROADMAP Tables 1-2, SupRank Tables I-II), ``batch_size`` (ROADMAP Fig. 5),
``hparams`` (ROADMAP Fig. 4, supp. Fig. 12), ``bins`` (FastAP Fig. 4b), ``gap`` (ROADMAP
supp. Table 9), ``memory`` (ROADMAP supp. Table 5). Modules: ``spec`` (budget and grids),
``runner`` (training through lab.train.Trainer, resumable raw JSON), ``stats`` (mean +- std,
paired t-test, relative gain), ``report`` (docs/results.md and its figures), ``cli``.
"""
from .cli import add_arguments, main
from .runner import execute, load_results, missing_runs, run_studies, save_results
from .spec import FULL_BASE, ORDER, QUICK_BASE, STUDIES, RunSpec, study_runs

__all__ = ["add_arguments", "main", "execute", "load_results", "missing_runs", "run_studies", "save_results",
           "FULL_BASE", "QUICK_BASE", "ORDER", "STUDIES", "RunSpec", "study_runs"]
