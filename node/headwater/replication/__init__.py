"""headwater.replication (see DESIGN.md)."""
