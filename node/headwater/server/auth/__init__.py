"""Authentication on the broker: who sent each request, decided per listener.

The listeners (TLS, mTLS, SASL) decide a request's :class:`RequestIdentity`; the
servicers and the authorizer read it with :func:`identity.current_identity`.
"""
