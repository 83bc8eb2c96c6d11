raise SystemExit("fails.py: the input file is missing")
