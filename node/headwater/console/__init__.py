"""Headwater Console: a web app to look at and administer a cluster (``headwater console``).

A top layer over the public client (an import-linter contract keeps it so): it acts as
the identity it was started with, so the brokers' ACLs decide what each user sees and may
change.  Modules, from the pure to the served:

- :mod:`.inputs` parses every form field and query parameter, or refuses it clearly;
- :mod:`.formats` shows keys and values as text, JSON or hex; :mod:`.offsets` computes
  lag and reset-offsets plans; :mod:`.csrf` makes and checks form tokens;
- :mod:`.backend` makes the client calls (:class:`~.backend.ClusterView`);
- :mod:`.app` is the aiohttp application (pages, forms, security headers), with
  Jinja2 templates in ``templates/`` and the vendored htmx in ``static/``;
- :mod:`.server` serves it.
"""
