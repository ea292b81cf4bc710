"""Headwater operator (kopf): Topic resources and safe rolling restarts."""
