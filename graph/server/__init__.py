"""What `langgraph.json` loads: the checkpointer, Studio's thread registry, who may connect."""
