"""Harness for the W3C SCXML 1.0 IRP conformance corpus (transform, manifest, resolver, report)."""
