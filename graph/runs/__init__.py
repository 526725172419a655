"""A turn as a client sees it, the same whichever runner ran it (in-process or Temporal).

`report`: the turn's `--json` object, computed from what the turn stored; `progress`: the lines
it shows as it goes.
"""
