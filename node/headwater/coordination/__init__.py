"""ZooKeeper and the controller (docs/design.md, "ZooKeeper and the controller")."""
