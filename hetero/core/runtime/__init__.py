"""Run-time pieces: input checking, the reference executor."""
