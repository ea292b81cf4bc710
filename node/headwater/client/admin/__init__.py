"""The admin client: :class:`~headwater.client.admin.client.Admin`.

``client`` is the user's API; it is composed of a small core (the connection and
metadata, :mod:`~headwater.client.admin.core`) and one class per area that takes
that core: ``acls``, ``log_dirs``, ``reassignments``, ``rebalance``, ``scram``.
``values`` holds the value types they exchange, so no area imports the client.
"""
