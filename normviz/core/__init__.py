"""The floor every layer stands on: user-facing errors, the one settings table, tokens, the device and dtype
choice, the CLI's subcommand registry and input checks, the result type of ``Session.get`` (``Analysis``),
the integrated-gradients factors of activations, ‖f(x)‖, pooled array blocks and the memory budget.

Nothing here imports from another normviz folder (the layer test, ``tests/unit/test_layers.py``).
"""
