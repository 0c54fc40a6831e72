"""The runtime: live asyncio sessions, the process registry, in-process invocations."""
