"""The app's state, Qt-free and observable: the open model's workbench (configurations, runs,
A/Bs, ceilings, recommendation, the live run) and its jobs, discovery, opening models,
watching programs; run records and the results table's rows, export serialisation, the
page-cache picture, the model panel's facts, the configuration knobs, formatting and frame
pacing. Its parts say when they change (``events.Event``); work that blocks runs in threads
and comes back through a ``Post``. Nothing here imports Qt (tests/test_boundaries.py checks
it): it is tested without a QApplication (tests/gui/state/), and the widgets and plots only
draw what it holds."""
