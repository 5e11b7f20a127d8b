"""The pages' kit: widgets, the view state and its URL form, caches, charts, the page frame (see :mod:`normviz.ui`)."""
