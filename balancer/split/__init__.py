"""Bundle split: which bundles are hot (Pulsar's BundleSplitterTask) and where to cut them."""
