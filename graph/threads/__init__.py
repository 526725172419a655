"""A thread across runs and crashes: who holds it, and what a run picks up from it.

`lease`: one run at a time per thread (`lease.ThreadBusy`, `lease.WAIT_FOR_THREAD`);
`travel`: its checkpoints, a fork into a new thread, undoing a turn;
`lifecycle`: whether the thread has an unfinished turn, decided from its stored messages;
`side_effects`: a call that must not run twice is not re-run after a crash. It lives here,
not in graph/policy, because it decides from what the thread recorded (the call's start,
kept in the thread's database next to its lease), not from the call itself or who sent it.
"""
