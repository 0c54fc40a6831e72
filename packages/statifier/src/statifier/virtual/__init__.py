"""A deterministic driver on a virtual clock, for conformance tests, the CLI and examples."""

from statifier.virtual.driver import OpenInvocation, Timer, VirtualDriver, VirtualRun, run_chart

__all__ = ["OpenInvocation", "Timer", "VirtualDriver", "VirtualRun", "run_chart"]
