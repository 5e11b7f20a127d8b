"""Tools for the tests, benchmarks and scripts, outside the installed package: tiny random models of every
architecture (:mod:`.tiny`), the real-browser helpers (:mod:`.browser`), the import graph (:mod:`.module_graph`).
Nothing under ``normviz/`` imports them."""
