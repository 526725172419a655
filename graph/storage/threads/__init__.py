"""What `ferry threads` and `ferry history` read: each thread's summary row and stored messages."""
