"""The long-term pipeline: the history sink the leader appends each cycle to as Parquet (``history``),
and the PySpark job (``loadmgr longterm`` or ``spark-submit service/longterm/job.py``) that reads a
range of it (``input``), computes long-term bundle data and broker capacity (``compute``) and merges
``longTermData`` into ZooKeeper (``merge``); ``replay_extract`` pulls a range's per-cycle traffic, brokers
and capacity lines out for ``loadmgr replay``; ``history_meta`` keeps the config a history was
recorded under.
May import :mod:`service.zookeeper` and the foundation only.
"""
