"""Runs Pulsar-derived behaviour vectors (parsed JSON) against the core; pure, no file I/O."""
