"""Kafka's client quotas: the quota entities and their precedence
(:mod:`headwater.quotas.entities`) and the sampled rates and throttle times that
enforce them (:mod:`headwater.quotas.rates`).  Pure: no I/O, no clock of their own."""
