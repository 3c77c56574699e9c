"""Comparing recorded results: the pull-request diff (``diff``, ``summaries``) and drift of
live models against what was recorded (``drift``)."""
