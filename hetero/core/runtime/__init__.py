"""The compiled program at run time: the executable, its transfers, profiling, comparison
with the reference, saving and the compile cache (signed, digested)."""
