"""Test helpers of the statifier_persistence tests (imported through pytest's ``pythonpath``)."""
