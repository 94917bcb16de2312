"""ZooKeeper's transaction logs decoded, and the audit of loadmgr's writes replayed from them."""
