"""A thread's messages rebuilt from its steps' writes, and the histories a process caches."""
