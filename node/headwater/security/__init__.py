"""Who is asking: principals, and (later) ACLs and SASL mechanisms as pure values.

Nothing here does I/O.  The server decides a request's principal from its listener
(TLS certificate, SASL exchange, or none) and hands it, as a :class:`KafkaPrincipal`,
to the authorizer; clients and the CLI use the same values to name principals in ACLs.
"""
