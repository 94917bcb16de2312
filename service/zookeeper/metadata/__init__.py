"""Pulsar's records on a session: the typed store, namespace administration, placement policies."""
