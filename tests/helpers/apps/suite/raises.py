"""An app that fails by itself, before any kernel: its input is missing."""
raise FileNotFoundError("raises.py: the input weights.bin is missing")
