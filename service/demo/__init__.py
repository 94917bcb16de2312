"""The demo cluster behind ``make run`` / ``loadmgr demo``: an embedded ZooKeeper, a leader with its REST
app, and simulated broker agents on a skewed workload, balancing live (``cluster``), watched on a
terminal through a rich live view (``live``).
May import every package below it (:mod:`service.api`, :mod:`service.leader`, :mod:`service.broker`,
:mod:`service.zookeeper`, :mod:`service.longterm`) and the foundation; never the commands.
"""
