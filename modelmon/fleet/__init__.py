"""The fleet: the same measured load on every node of a Ray cluster at once.

``node`` is what runs on one node (a ``LoadRun`` whose start waits for every node);
``cluster`` schedules it, one task per node, behind one barrier actor; ``report`` turns the
nodes' runs into rows, an aggregate, JSON and CSV; ``bucket`` adds, for a model in object
storage, the nodes' requests and the bucket's bound. Only ``cluster`` imports Ray, and only
``modelmon fleet`` imports ``cluster``: Ray is the optional ``fleet`` extra, and
``modelmon.core`` never imports Ray at all.
"""

INSTALL_HINT = "modelmon fleet needs Ray, which is not installed: pip install 'modelmon[fleet]'"
