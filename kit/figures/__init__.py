"""The one definition of every figure a user sees about a series, and how it is written.

Each surface (``pt2pt datasets``, ``pt2pt fit``, the report, the demo summary, the TUI,
``pt2pt diff``) reads these instead of computing its own: one series, one number.

* :mod:`kit.figures.latency`: latency = median time of the smallest messages (which sizes,
  which statistic), with a distribution-free interval;
* :mod:`kit.figures.bandwidth`: effective bandwidth = S / median time over the top octave;
* :mod:`kit.figures.estimate`: the median and its order-statistic interval (both figures);
* :mod:`kit.figures.score`: the held-out score (CRPS / floor) and its sampling error;
* :mod:`kit.figures.baseline`: the honest baselines, their names, the best of them;
* :mod:`kit.figures.verdict`: the one sentence that says whether the regimes help;
* :mod:`kit.figures.series`: all of the above for one series (:class:`SeriesFigures`);
* :mod:`kit.figures.text`: how sizes, times, rates and ratios are written.

Pure functions on numbers, dicts and (for the dataset's summary query) Polars expressions:
nothing here reads a dataset or a model, so every layer above may use it.
"""
