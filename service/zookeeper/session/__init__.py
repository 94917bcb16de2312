"""The kazoo session: client factory, security, JSON nodes, fencing, validation, watch caches."""
