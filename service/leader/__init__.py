"""What runs in every ``loadmgr serve`` instance and does work only while it leads: the election through
the ``/loadbalance/leader`` ephemeral node (``election``), the view of the cluster read from ZooKeeper
(``load_view``, ``cluster_view``), the leader's jobs — shedding, placement, split, bundle data,
reconcile — and their schedule (``jobs``, ``schedule``), the executors that carry out moves
(``executors``), and the service object the API and commands drive (``service``). Decisions are
made by :mod:`balancer` over a snapshot of the view.
May import :mod:`service.zookeeper` and the foundation; never the broker side, the API or commands.
"""
