"""The long-term pipeline: the history sink the leader appends each cycle to as Parquet (``history``),
and the PySpark job (``loadmgr longterm`` or ``spark-submit service/longterm/job.py``) that reads a
range of it (``input``), computes long-term bundle data and broker capacity (``compute``) and merges
``longTermData`` into ZooKeeper (``merge``).
May import :mod:`service.zookeeper` and the foundation only.
"""
