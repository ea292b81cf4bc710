"""The active controller's decisions, one pure function per event (Kafka's ``KafkaController.on*``).

Each function takes the controller's view
(:class:`~headwater.coordination.context.ControllerContext`, read only) and
what the event brought (already read from ZooKeeper by the executor), and
returns a :class:`~headwater.coordination.results.ControllerResult`.  Nothing
here reads ZooKeeper, sends a request or reads a clock.

* :mod:`.brokers`: failover (a new controller term), broker registrations
  appearing, disappearing or bouncing;
* :mod:`.topics`: topics created or deleted, partitions added, ISR change
  notifications;
* :mod:`.leaders`: controlled shutdown, preferred leader elections (requested
  and automatic).
"""
