"""Choosing a candidate: gates and waivers applied by the policy (``policy``), the committed
evidence it reads (``evidence``, ``calibration``), and ``evalreg select`` edits (``edit``)."""
