"""The broker runtime: hosted partitions and everything that runs them.

:class:`~headwater.server.runtime.replica_manager.ReplicaManager` owns every
hosted partition (state machine and log); the replica fetchers, the ISR store
seam, topic-config watches, the metadata cache, the off-load seam for blocking
calls and the periodic scheduler live beside it.  Nothing here imports the
servicers (:mod:`headwater.server.services`); see docs/architecture.md for the
threads and tasks.
"""
