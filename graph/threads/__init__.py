"""A thread across runs and crashes: who holds it, and where it has been.

`lease`: one run at a time per thread (`lease.ThreadBusy`, `lease.WAIT_FOR_THREAD`);
`travel`: its checkpoints, a fork into a new thread, undoing a turn. Whether a thread has an
unfinished turn is the loop's (graph/lifecycle.py), and a call with side effects is not re-run
after a crash where every call runs (graph/execution.py).
"""
