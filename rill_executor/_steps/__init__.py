"""The ledger's steps: each operation an I/O-free generator of actions (``call``,
``operations``, the ``store_calls`` they yield), and the loops that drive them (``drive``)."""
