"""A seeded, pure simulator of a broker cluster under a shedding + placement strategy pair.

``scenarios`` reads named scenario files, ``engine`` runs the leader's cycle against them
(``events`` schedules and applies their events) and ``metrics`` scores a run; ``families``
generates scenarios with random parameters and ``family_claims`` checks the claims over them.
Entry points: ``loadmgr simulate``, ``bench/quality.py`` (families) and ``bench/quality_named.py``
(named scenarios).
"""
