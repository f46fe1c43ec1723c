"""Another program's load, seen from outside: its process tree, the model files it opens or
maps, their pages arriving in the page cache, its descriptors, and what to change."""
