"""ZooKeeper plumbing shared by every process: the kazoo session with its JSON nodes and compare-and-set
(``nodes``), leader-epoch fenced transactions (``fenced``), the JSON encoding and kazoo error
translation every call shares (``wire``), Pulsar's paths (``paths``), the typed store of Pulsar's
records (``store``), the embedded ZooKeeper server started with ``java`` from the jars in the pyspark
wheel (``launcher``, ``server_config``, ``java``, ``process``) or a replicated ensemble of them
(``ensemble``), and the audit of ZooKeeper's own transaction logs (``txnlog``, ``audit``). Kazoo's
exceptions stop here and become :mod:`service.errors`.
May import :mod:`balancer`, :mod:`service.errors` and :mod:`service.settings` only.
"""
