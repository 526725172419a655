"""How a stored value is made (compact messages, compression, encryption) and what it may name."""
