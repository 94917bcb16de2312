"""The embedded ZooKeeper server and ensemble, run with ``java`` from the pyspark wheel's jars."""
