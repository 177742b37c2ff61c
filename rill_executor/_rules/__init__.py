"""The core's rules, with no I/O: the ledger's decisions (``core``) and the lifecycle rules
a store keeps (``decisions``, ``notices``, ``purge``, ``resolution``, ``events``), which the
memory store runs as they are and the SQL and Lua stores write again."""
