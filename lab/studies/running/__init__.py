"""The running side of the studies: what each study trains, training it, and its raw-results files.

``spec`` (budgets, grids, run specs and their keys), ``runner`` (what is missing, and training it through
:class:`lab.train.Trainer`), ``pilot`` (protocol v2's pilot), ``results_file`` (results/NAME.json: read,
added to by many writers under a lock, merged), ``replay`` and ``evaluated_then`` (does today's code still
train, and evaluate, a stored run as the code of then did?), ``rerun_curves`` (a re-run's learning curve
onto its stored run), ``paths``. It writes ``results/`` and never Markdown, and imports nothing of
:mod:`lab.studies.reporting` (tests/test_layers.py).
"""
