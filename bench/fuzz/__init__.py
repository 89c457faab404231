"""Fuzzing corral at scale: generators, oracles and a time-budgeted driver (``python -m bench.fuzz.run``)."""
