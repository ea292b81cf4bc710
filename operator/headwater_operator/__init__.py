"""Headwater operator (kopf): Topic resources and safe rolling restarts of the brokers.

Run it as ``headwater operator`` or ``kopf run -m headwater_operator``.  Importing the
package registers its handlers on kopf's default registry (that is how ``kopf run -m``
finds them), configured from the environment the Helm chart sets; ``headwater
operator`` (through :func:`run.run_operator`) and tests build their own registry with
:func:`handlers.register`.

Only this package imports kopf (docs/design.md, "Layers"), and only where it is installed.
The logic lives in kopf-free modules: :mod:`topics` (spec vs. actual, pure),
:mod:`topic_reconciler` (the Admin side) and :mod:`roll_kube`, the Kubernetes backend
of the roll engine, which lives in the core package (:mod:`headwater.roll`) so that
``headwater cluster roll`` imports it without this package.
"""

from __future__ import annotations

import importlib.util
import os

# The kopf-free modules stay importable without the operator extra: register kopf
# handlers only where kopf is installed.
if importlib.util.find_spec("kopf") is not None:
    import kopf

    from headwater_operator import handlers
    from headwater_operator.config import OperatorConfig

    handlers.register(kopf.get_default_registry(), OperatorConfig.from_env(os.environ))
