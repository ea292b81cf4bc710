"""Safe rolling restarts and upgrades: the roll engine, without Kubernetes.

:mod:`headwater.roll.engine` decides (one broker at a time, the controller last,
never below ``min.insync.replicas``); :mod:`headwater.roll.probe` reads the
cluster through the Admin client; :mod:`headwater.roll.local` restarts local
broker processes (``headwater cluster roll``).  The operator
(``headwater_operator``) adds the Kubernetes backend and the kopf handlers.

Layering: uses :mod:`headwater.client` only, like the operator and the Spark
connector; imports neither kopf nor the broker's internals.
"""
