"""RankLab: rank losses for image retrieval, to learn, teach and research them.

Packages, bottom up (a package imports only lower layers; ``tests/test_layers.py`` checks it):
``core`` (input checks, step surrogates, graded relevance; ``lab.ranking`` is its public face) ->
``losses``, ``metrics`` -> ``data``, ``models`` -> ``train`` -> ``experiments``, ``viz`` ->
``dashboard``, ``grading``, ``studies`` -> ``cli``; then ``app.py`` and the notebooks.
"""
__version__ = "0.1.0"
