"""Probing: what the hidden states of a residual stack say, measured the same way on toys and transformers.

=====================  ==========================================================================
module                 what it holds
=====================  ==========================================================================
``metrics``            hidden-state metrics (angles, norms, progress): one definition for every model
``probes``             streaming aggregation of the metrics over tokens, early stopping, probe records
``groups``             update angles within a functional group of layers and across its boundaries
``early_exit``         where each input's readout exits along depth: confidence and settled rules
``interventions``      lesion, swap and trace across depth on any residual stack, batched over layers
``intervention_rows``  interventions read back from records: depth exponents, rows across toys and models
``tracking``           a student against its teacher along depth: local errors and how coherently they add
``constructions``      students built from the teacher, not trained: block-sum, teacher-field Euler and RK2
``smoothness``         how smoothly trained weights vary along depth (the neural-ODE limit's regularity)
=====================  ==========================================================================

Works on tensors of hidden states (and the Datasets they become); fits exponents with
:mod:`resflow.fitting`.  The public names are re-exported by :mod:`resflow.analysis`.
"""
