"""Delegated stages for external workers (issue 13): list, lock and complete tasks.

The core opens a task when an instance enters a `delegated` state and posts it to the
surface's webhook (`runtime.core.delegation`); this package is what workers call: list the
open tasks they may take, lock one for a time (a lease, like Camunda's fetch-and-lock)
and complete it with the callback token, through the one write path. May use the core;
imports no other feature package.
"""
