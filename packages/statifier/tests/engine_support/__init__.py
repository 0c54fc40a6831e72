"""Test helpers of the statifier (engine) tests (imported through pytest's ``pythonpath``)."""
