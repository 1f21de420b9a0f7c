"""Queues: team work queues, the assignments of human states (`assignments`: `$claim`,
`$unclaim`, `$complete`, `$assignment_cancel` and the queue reads).

May use the runtime core only.
"""
