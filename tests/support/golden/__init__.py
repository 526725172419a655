"""Golden values and files written by earlier versions, which every later version must read."""
