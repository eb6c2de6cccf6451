"""RankLab: rank losses for image retrieval, to learn, teach and research them.

Layers, bottom up: ``lab.ranking`` (step surrogates) -> ``lab.losses`` -> ``lab.metrics``.
"""
__version__ = "0.1.0"
