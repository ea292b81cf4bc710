"""headwater.client (see DESIGN.md)."""
