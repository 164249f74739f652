"""Campaigns: the campaign file, the transport table, job templates and their life cycle.

``plan`` renders jobs from a campaign, ``submit``/``status`` drive them through Slurm,
``runlocal`` runs the same scripts with bash. What the jobs wrote becomes data in the next
stage (kit.data.collect); kit.outputs.selftest checks the whole chain against a link of known
bandwidth.
"""
