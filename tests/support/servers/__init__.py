"""HTTP servers on 127.0.0.1 that speak the real wire formats, with injectable faults."""
