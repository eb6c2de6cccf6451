"""The running side of the studies: what each study trains, training it, and its raw-results files.

``spec`` (budgets, grids, run specs and their keys, seed ranges), ``paper_studies`` (the papers' tables as
studies on the recipes of ``recipes/``), ``runner`` (what is missing, shards of it, and training it), ``execution``
(one run through :class:`lab.train.Trainer`, stoppable and resumable from its work folder), ``recording`` (a call's
line in each file, its records as runs end), ``local_pool`` (``--jobs N`` processes, one GPU each where there are
several), ``cluster``, ``cluster_job`` and ``submitit_runs`` (``--executor submitit``: one job per run, requeued on
preemption, one driver writing), ``dry_run`` and ``gpu_hours`` (``--dry-run``: the runs and their GPU hours from
measured step times), ``pilot`` (protocol v2's pilot), ``results_file`` (results/NAME.json: read, added to by many
writers under a lock, merged), ``replay`` and ``evaluated_then`` (does today's code still train, and evaluate, a
stored run as the code of then did?), ``rerun_curves`` (a re-run's learning curve onto its stored run), ``paths``.
It writes ``results/`` and never Markdown, and imports nothing of :mod:`lab.studies.reporting`
(tests/test_layers.py).
"""
