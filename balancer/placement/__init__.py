"""Bundle placement: Pulsar's strategies, its broker filters, and the selection pipeline."""
