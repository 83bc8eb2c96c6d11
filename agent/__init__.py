"""swizzleperf.agent: the optimization loop, its state, proposers and the CLI."""
