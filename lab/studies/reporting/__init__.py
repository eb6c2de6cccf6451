"""The reporting side of the studies: the raw results (``results/``) read back into docs/results.md, its figures,
the notebooks' and the dashboard's verdicts and the README's headline. It writes no results file and trains
nothing; it reads :mod:`lab.studies.running` (specs, results files), never the other way round.

Three floors, each importing only the ones below it (tests/test_layers.py):

1. **Statistics and the claims as data.** ``stats`` (mean ± std, paired t-tests, Holm, the three verdicts of a
   claim, the shared formats), ``paper_claims`` (study 1's claims that one loss beats another, with the papers'
   numbers), ``trend_claims`` (the claims of studies 2, 4 and 5), ``replication_plan`` (study 1's replication as
   registered), ``sequential`` (its group-sequential boundaries and Holm's rule over looks), ``error_rates`` (each
   rule's error by simulation), ``section`` (the :class:`~.section.Section` record a study's section fills in),
   ``paper_tables`` (the papers' numbers and claims per setting, for the paper-scale studies), ``figures``.
2. **One section of the page per module**, siblings over the statistics: ``claims`` (studies 1 under protocol
   v1, 2 and 5), ``sweeps`` (studies 3, 4 and 6), ``ordering`` (study 1 under protocol v2: the primary table,
   the descriptive ranks, and the pilot), ``replication`` (the replication's looks as they stand), ``curves``
   (learning curves per loss), ``budget_table``, ``compute``, ``gpu_time``, ``code_versions``,
   ``paper_scale`` (a paper-scale study's section: its settings, claims, Holm and verdicts). A
   section module takes records (or a results file's data) and returns Markdown, a :class:`~.section.Section`
   or a figure; it reads no file and knows no view. ``study_sections`` says, for every view, which records a
   study's section reads (protocol v2's once complete, else v1's) and which analysis and figures it gets.
3. **Three thin views** that assemble sections and compute nothing themselves: ``results_page`` (docs/results.md
   and docs/figures/, ``python -m lab study --render``), ``verdicts`` (Markdown and rows for the notebooks and
   the dashboard), ``headline`` (the README's paragraph). No view imports another.

A new part of the page (say, a replication analysis with group-sequential boundaries, or the deviations from the
protocol) is a new module on floor 2: a function of records -> Markdown (or a Section), its rule and its numbers
there, tested there; the claims it tests, as data, beside ``paper_claims`` on floor 1; then one line in each view
that shows it (``results_page`` for the page, ``verdicts`` for the notebooks and the dashboard).
"""
