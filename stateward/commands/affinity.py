"""`STATEWARD_SERVER_CPUS`: the server's event loop and its database threads kept on
chosen CPUs (issue 18).

A request's path crosses threads: the event loop hands each SQLite call to aiosqlite's
driver thread and is woken when it is done. When the two threads run on different CPUs,
each wake-up is an interrupt from one CPU to the other, which a virtual machine pays for
dearly: on the 2-core VM of session 19 one such round trip cost 85–110 µs of CPU across
CPUs and 34 µs with both threads on one CPU (an empty call through aiosqlite); with the
server kept on one CPU a `performAction` cost 8–17 % less server CPU and a page of
`instances` 36 % less (docs/performance.md, "Session 19"). The OS, left alone, spreads
the threads.

`pin_server` runs first in `stateward serve`, on the main thread, before any other
thread or process starts: Linux gives a new thread its creator's CPUs, so the event
loop, the driver threads, the default executor's threads and any child process keep to
`cpus`. One exception: the signature worker, a helper process that checks a
`submitEvents` batch's signatures in parallel with the loop, is told the CPUs left over
(`sigworker.WORKER_CPUS_ENV`) and moves there; with none left it runs beside the server.

Off by default: a server kept on one CPU cannot move off it when something else keeps
that CPU busy. For a box that runs stateward and little else (the one-box SQLite
deployment) it is the better setup. One process only: with `--workers` each worker would
be kept on the same CPUs, so the combination is refused.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from stateward.governance.sigworker import WORKER_CPUS_ENV


class AffinityError(Exception):
    """STATEWARD_SERVER_CPUS cannot be applied here (the message says why)."""


def format_cpus(cpus: Iterable[int]) -> str:
    """`0,2,3`: CPU numbers as a list the environment can carry."""
    return ",".join(str(cpu) for cpu in sorted(cpus))


def pin_server(cpus: Iterable[int]) -> tuple[set[int], set[int]]:
    """Keep the calling thread, and every thread and process it starts from now on, on
    `cpus`; set the CPUs left over apart for the signature worker. Returns (the server's
    CPUs, the worker's). `AffinityError` when the platform cannot pin threads or a CPU is
    not one this process may run on (then nothing changed)."""
    wanted = set(cpus)
    if not hasattr(os, "sched_setaffinity"):
        raise AffinityError("STATEWARD_SERVER_CPUS: this platform cannot keep threads on CPUs")
    if not wanted:
        raise AffinityError("STATEWARD_SERVER_CPUS names no CPU")
    allowed = os.sched_getaffinity(0)
    outside = wanted - allowed
    if outside:
        raise AffinityError(
            f"STATEWARD_SERVER_CPUS: CPU {format_cpus(outside)} is not among the "
            f"CPUs this process may run on ({format_cpus(allowed)})"
        )
    rest = allowed - wanted
    os.sched_setaffinity(0, wanted)
    if rest:
        os.environ[WORKER_CPUS_ENV] = format_cpus(rest)
    else:
        os.environ.pop(WORKER_CPUS_ENV, None)
    return wanted, rest
