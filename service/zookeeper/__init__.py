"""ZooKeeper, by concern; kazoo's exceptions stop here and become :mod:`service.errors`.

* :mod:`.paths` — Pulsar's metadata-store layout plus loadmgr's own nodes: where everything is.
* :mod:`.session` — the kazoo session: the one client factory (``client``), credentials, ACL and TLS
  (``security``), JSON nodes with compare-and-set (``nodes``), fenced transactions (``fenced``,
  ``batch``), validation of every byte read (``validate``), the encoding and error translation
  (``wire``) and watch-fed subtree copies (``cache``, ``bulk``, ``pipeline``).
* :mod:`.metadata` — Pulsar's records on top of a session: the typed store (``store``, ``records``),
  namespace administration (``namespaces``) and placement policies (``policies``).
* :mod:`.server` — the embedded ZooKeeper server started with ``java`` from the jars in the pyspark
  wheel (``launcher``, ``server_config``, ``java``, ``process``) or an ensemble of them (``ensemble``).
* :mod:`.forensics` — ZooKeeper's own transaction logs decoded (``txnlog``) and the audit of
  loadmgr's writes replayed from them (``audit``).

Inside the package, imports go down too (``tests/unit/test_layers.py``): ``session`` uses only
``paths``; ``metadata`` uses ``session``; ``server`` stands alone; ``forensics`` may use all three.
May import :mod:`balancer`, :mod:`service.errors` and :mod:`service.settings` only.
"""
