"""A seeded, pure simulator of a broker cluster under a shedding + placement strategy pair.

``scenarios`` reads named scenario files, ``engine`` runs the leader's cycle against them and
``metrics`` scores a run. Entry points: ``loadmgr simulate`` and ``bench/quality.py``.
"""
