"""The experiments, one module each; a module that defines ``EXPERIMENT`` is registered.

Installed as ``resflow.sims``; the registry is :func:`resflow.experiments.registered`.
"""
