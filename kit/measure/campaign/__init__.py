"""Campaigns: the campaign file, the transport table, job templates and their life cycle.

``plan`` renders jobs from a campaign, ``submit``/``status`` drive them through Slurm,
``runlocal`` runs the same scripts with bash, ``collect`` ingests what they wrote, and
``selftest`` checks the whole chain against a link of known bandwidth.
"""
