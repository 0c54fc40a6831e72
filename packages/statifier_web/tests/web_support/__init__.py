"""Helpers of the statifier_web tests: real servers on loopback, charts, the browser."""
