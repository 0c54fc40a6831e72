"""Test helpers of the statifier_oban tests (imported through pytest's ``pythonpath``)."""
