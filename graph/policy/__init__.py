"""What may run and what may leave: the rules between the model's tool calls and the tools.

`approval` holds calls for a person (in LangChain's format, `hitl`); `exfiltration` finds
outbound calls quoting a private result (`quotes` says what counts as a quote, `spellings`
which spellings are undone); `provenance` runs only the calls `check` released and refuses
results a client supplies; `fence` marks every result as data when the model is sent it.
"""
