"""A labelled suite of small CPU trainings, faulty and healthy, recorded through the real Recorder.

``scenarios.SUITE`` lists them with their labels and their tune/held-out split;
``train.record`` trains one into a run directory; ``runner.record_all`` records the
whole suite (cached) for ``benchmarks/diagnosis_accuracy.py``.
"""
