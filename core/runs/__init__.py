"""Runs: whatever is measured is a run with one protocol (``start.Run``): modelmon's strategy
in worker processes with its sampler (``session.Session``), or another program watched from
outside and counted by the bytes that arrive (``program.ProgramRun``). ``start.run_for`` makes
the run a configuration calls for; an A/B, recommend, the bench, a fleet node and the app take
runs from it, never two kinds of thing."""
